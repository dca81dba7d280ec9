//! The fused tensor rung's arrival counters (`decode_attention_tensor` with `fused`): a word per
//! row group, kept per stream handle, zeroed when made and never again (every fused launch
//! leaves its counters 0 for the next, as the kernel's contract asks), grown when a call needs
//! more. So a call allocates nothing once the handle has counters enough, and a workspace made
//! for a cache ([`Gpu::decode_workspace`]) makes them before any capture.

use std::sync::{Mutex, PoisonError};

use crate::buffer::DeviceVec;
use crate::device::{Backend, Gpu};
use crate::error::Result;

use super::OP;

/// Fewest counters made at once (a batch of 64 sequences of 8 kv heads, one row group each):
/// growing is rare.
const MIN_COUNTERS: usize = 512;

/// The handle's counters, if made.
#[derive(Default)]
pub(super) struct Counters(Option<DeviceVec<u32>>);

/// Runs `f` with at least `len` zeroed counters of `gpu`'s stream handle (made or grown first);
/// the handle's other fused calls wait meanwhile.
///
/// Errors: [`crate::Error::Capture`] when the counters must be made or grown while `gpu` is
/// being captured (that allocates); what making them or `f` returns.
pub(super) fn with_counters<R>(
    gpu: &Gpu,
    len: usize,
    f: impl FnOnce(&mut DeviceVec<u32>) -> Result<R>,
) -> Result<R> {
    /// The simulator's: every simulator handle is one device running its calls in order.
    static SIMULATOR: Mutex<Counters> = Mutex::new(Counters(None));
    let cuda_slot;
    let slot: &Mutex<Counters> = match &gpu.backend {
        Backend::Cuda(d) => {
            cuda_slot = d.cache::<Counters>();
            &cuda_slot
        }
        Backend::Simulator => &SIMULATOR,
    };
    // A panic while the lock was held left nothing half-made: the counters are stored whole.
    let mut guard = slot.lock().unwrap_or_else(PoisonError::into_inner);
    let counters = match &mut guard.0 {
        Some(counters) if counters.len() >= len => counters,
        held => {
            crate::capture::refuse(
                gpu,
                OP,
                "the fused decode attention makes (or grows) its stream handle's arrival counters \
                 on first use: make the DecodeWorkspace before capturing; that is an allocation",
            )?;
            held.insert(gpu.zeros_of::<u32>(len.max(MIN_COUNTERS))?)
        }
    };
    f(counters)
}
