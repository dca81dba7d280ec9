//! Which kernels may have faulted: the names launched on each device since its last
//! successful synchronisation, so that a fault reported later names them; and what a driver
//! error means (a kernel's sticky fault, or the driver's own failure).
//!
//! The ground floor with [`crate::error`]: every file that talks to the driver maps its errors
//! here, and this file imports nothing else of gpukern.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, DriverError, sys};

use crate::error::{Error, Result};

/// Most names remembered per device (the oldest are dropped, and the message says so).
const REMEMBERED: usize = 8;

type Recent = HashMap<usize, (Vec<&'static str>, bool)>;

fn recent() -> &'static Mutex<Recent> {
    static RECENT: std::sync::OnceLock<Mutex<Recent>> = std::sync::OnceLock::new();
    RECENT.get_or_init(|| Mutex::new(HashMap::new()))
}

fn key(ctx: &Arc<CudaContext>) -> usize {
    Arc::as_ptr(ctx) as usize
}

/// Notes a launch of `kernel` in `ctx`.
pub(crate) fn launched(ctx: &Arc<CudaContext>, kernel: &'static str) {
    let mut recent = recent().lock().unwrap_or_else(|p| p.into_inner());
    let (names, dropped) = recent.entry(key(ctx)).or_default();
    if names.last() != Some(&kernel) {
        if names.len() == REMEMBERED {
            names.remove(0);
            *dropped = true;
        }
        names.push(kernel);
    }
}

/// Forgets the launches in `ctx`: they all finished.
pub(crate) fn synchronized(ctx: &Arc<CudaContext>) {
    let mut recent = recent().lock().unwrap_or_else(|p| p.into_inner());
    recent.remove(&key(ctx));
}

/// Whether a driver error means a kernel faulted on the device, leaving the context unusable.
pub(crate) fn is_sticky(e: &DriverError) -> bool {
    use sys::CUresult::*;
    matches!(
        e.0,
        CUDA_ERROR_ASSERT
            | CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_ECC_UNCORRECTABLE
    )
}

/// The error for a launch of `kernel` that the driver refused with `e`: an earlier kernel's
/// fault if `e` is one, else `kernel`'s own failure.
pub(crate) fn launch_error(ctx: &Arc<CudaContext>, kernel: &'static str, e: DriverError) -> Error {
    if is_sticky(&e) {
        return error(ctx, "launching a kernel", e);
    }
    Error::KernelFailed {
        kernels: kernel.to_string(),
        during: "launching it",
        sticky: false,
        source: e,
    }
}

/// The error for `e`, seen while `during`: [`Error::KernelFailed`] naming the kernels
/// launched since the last synchronisation when a kernel faulted, else [`Error::Driver`].
pub(crate) fn error(ctx: &Arc<CudaContext>, during: &'static str, e: DriverError) -> Error {
    if !is_sticky(&e) {
        return Error::Driver { during, source: e };
    }
    let recent = recent().lock().unwrap_or_else(|p| p.into_inner());
    let kernels = match recent.get(&key(ctx)) {
        Some((names, dropped)) => format!("{}{}", if *dropped { "... " } else { "" }, names.join(", ")),
        None => "(none recorded)".to_string(),
    };
    Error::KernelFailed {
        kernels,
        during,
        sticky: true,
        source: e,
    }
}

/// `r` with a fault mapped by [`error`]; a success forgets the launches (`r` came from a
/// synchronisation of the device's stream).
pub(crate) fn synced<T>(
    ctx: &Arc<CudaContext>,
    during: &'static str,
    r: std::result::Result<T, DriverError>,
) -> Result<T> {
    match r {
        Ok(v) => {
            synchronized(ctx);
            Ok(v)
        }
        Err(e) => Err(error(ctx, during, e)),
    }
}
