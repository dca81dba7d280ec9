//! The capture registry: which CUDA streams are being captured into a graph (by any thread), and
//! whether this thread is capturing (or replaying) a graph on the simulator.
//!
//! Every allocation, host copy and synchronisation asks it first ([`refuse`]) and every launch
//! asks whether the simulator only checks ([`simulator_dry_run`]); [`crate::graph`] opens and
//! closes the captures ([`Capturing`]). It knows streams, not `Gpu`s: what queues work says on
//! which stream through [`Queued`], so the floors above (device, buffers, pinned memory) ask it
//! without it knowing them.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::CudaStream;

use crate::error::{Error, Result};

/// What queues work on one stream: a `Gpu` handle, a buffer (on its home stream), a place in
/// one. The stream is `None` on the simulator.
pub(crate) trait Queued {
    /// The CUDA stream the work goes to; `None` for the simulator.
    fn queue(&self) -> Option<&Arc<CudaStream>>;
}

impl Queued for Option<&Arc<CudaStream>> {
    fn queue(&self) -> Option<&Arc<CudaStream>> {
        *self
    }
}

/// CUDA streams under capture, by address; with a count for a lock-free "none" answer.
static CUDA_CAPTURES: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static CUDA_CAPTURE_COUNT: AtomicUsize = AtomicUsize::new(0);

/// How this thread is running a simulator graph's closure.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SimMode {
    /// Not at all.
    Off,
    /// Capturing: every check, no kernel runs.
    Capture,
    /// Replaying: kernels run, refusals still apply.
    Replay,
}

thread_local! {
    static SIM_MODE: Cell<SimMode> = const { Cell::new(SimMode::Off) };
}

fn stream_key(stream: &Arc<CudaStream>) -> usize {
    Arc::as_ptr(stream) as usize
}

/// A capture in progress, ended when dropped (a panic in the closure included).
pub(crate) enum Capturing {
    Cuda(usize),
    Simulator,
}

impl Capturing {
    /// Marks `stream` as being captured; [`Error::Capture`] if it already is.
    pub(crate) fn cuda(stream: &Arc<CudaStream>) -> Result<Capturing> {
        let key = stream_key(stream);
        let mut captures = CUDA_CAPTURES.lock().unwrap_or_else(|p| p.into_inner());
        if captures.contains(&key) {
            return Err(nested());
        }
        captures.push(key);
        CUDA_CAPTURE_COUNT.fetch_add(1, Ordering::SeqCst);
        Ok(Capturing::Cuda(key))
    }

    /// Marks this thread as capturing (`capture`: checks only) or replaying a simulator graph;
    /// [`Error::Capture`] if it already does either.
    pub(crate) fn simulator(capture: bool) -> Result<Capturing> {
        if SIM_MODE.get() != SimMode::Off {
            return Err(nested());
        }
        SIM_MODE.set(if capture {
            SimMode::Capture
        } else {
            SimMode::Replay
        });
        Ok(Capturing::Simulator)
    }
}

impl Drop for Capturing {
    fn drop(&mut self) {
        match self {
            Capturing::Cuda(key) => {
                let mut captures = CUDA_CAPTURES.lock().unwrap_or_else(|p| p.into_inner());
                captures.retain(|k| k != key);
                CUDA_CAPTURE_COUNT.fetch_sub(1, Ordering::SeqCst);
            }
            Capturing::Simulator => SIM_MODE.set(SimMode::Off),
        }
    }
}

fn nested() -> Error {
    Error::Capture {
        op: "Gpu::capture",
        detail: "a capture or a graph launch inside a capture: capture the calls themselves".into(),
    }
}

fn cuda_capturing(key: usize) -> bool {
    CUDA_CAPTURE_COUNT.load(Ordering::SeqCst) > 0
        && CUDA_CAPTURES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
}

fn refused(op: &'static str, what: &str) -> Error {
    Error::Capture {
        op,
        detail: format!(
            "{what} inside Gpu::capture: a graph can only launch kernels. Allocate and copy \
             before capturing, read results after a launch"
        ),
    }
}

/// [`Error::Capture`] if the stream of `on` (a `Gpu`, a buffer's home stream) is being captured
/// (CUDA: by any thread; simulator: by this thread, or a simulator graph is replaying on it):
/// `what` (an allocation, a host copy, a synchronisation...) cannot be part of a graph.
pub(crate) fn refuse(on: &impl Queued, op: &'static str, what: &str) -> Result<()> {
    let busy = match on.queue() {
        Some(stream) => cuda_capturing(stream_key(stream)),
        None => SIM_MODE.get() != SimMode::Off,
    };
    if busy { Err(refused(op, what)) } else { Ok(()) }
}

/// Whether the simulator is capturing on this thread: launches are checked, not run.
pub(crate) fn simulator_dry_run() -> bool {
    SIM_MODE.get() == SimMode::Capture
}
