//! Checks only a real device can make: memory exhaustion and a launch past 2^31 elements.

use gpukern::{Error, cpu};
use libtest_mimic::Failed;
use ndarray::Array2;

use crate::{Backend, MATMUL_REL_TOL, fail};

/// Allocating past the device's memory fails with OutOfMemory, leaks nothing, and the device
/// keeps working.
pub(crate) fn out_of_memory(_seed: u64) -> Result<(), Failed> {
    let gpu = Backend::Cuda.gpu()?;
    // SAFETY: only the context's memory counters are read; nothing is queued or allocated.
    let Some((ctx, _)) = (unsafe { gpu.cuda_stream() }) else {
        return Err("not a CUDA Gpu".into());
    };
    let (free_before, total) = ctx.mem_get_info().map_err(|e| e.to_string())?;
    // k = 0: the operands are empty, only the m x n output (well past the device) is allocated.
    let side = ((total as f64 / 4.0).sqrt() * 1.5) as usize;
    let a = gpu
        .upload_matrix(&Array2::<f32>::zeros((side, 0)))
        .map_err(fail)?;
    let b = gpu
        .upload_matrix(&Array2::<f32>::zeros((0, side)))
        .map_err(fail)?;
    match gpu.matmul(&a, &b) {
        Err(Error::OutOfMemory { bytes }) if bytes == side * side * 4 => {}
        other => {
            return Err(format!(
                "{side}x{side} output: expected OutOfMemory, got {:?}",
                other.map(|_| ())
            )
            .into());
        }
    }
    gpu.synchronize().map_err(fail)?;
    let x = Array2::from_shape_fn((64, 48), |(i, j)| (i as f32 - j as f32) * 0.01);
    let c = gpukern::cpu::matmul(&x, &x.t()).map_err(fail)?;
    let g = gpu
        .matmul(
            &gpu.upload_matrix(&x).map_err(fail)?,
            &gpu.upload_matrix(&x.t()).map_err(fail)?,
        )
        .map_err(fail)?;
    let g = g.to_array().map_err(fail)?;
    if cpu::rel_error(
        &g.iter().copied().collect::<Vec<_>>(),
        &c.iter().copied().collect::<Vec<_>>(),
    ) > MATMUL_REL_TOL
    {
        return Err("matmul wrong after an out-of-memory error".into());
    }
    drop((a, b));
    gpu.synchronize().map_err(fail)?;
    let (free_after, _) = ctx.mem_get_info().map_err(|e| e.to_string())?;
    // The stream-ordered pool may keep a little; anything near the failed allocation would show.
    let leaked = free_before.saturating_sub(free_after);
    if leaked > 64 << 20 {
        return Err(format!("{leaked} bytes of device memory gone after the failed allocation").into());
    }
    Ok(())
}

/// More than 2^31 elements in one launch: computed in full, the last elements included.
pub(crate) fn past_2_pow_31(_seed: u64) -> Result<(), Failed> {
    let gpu = Backend::Cuda.gpu()?;
    let n = (1usize << 31) + 3;
    let a: Vec<f32> = (0..n).map(|i| (i % 1021) as f32).collect();
    let mut x = gpu.upload(&a).map_err(fail)?;
    gpu.increment_by_one(&mut x).map_err(fail)?;
    let sum = gpu.add(&x, &x).map_err(fail)?;
    let out = sum.to_vec().map_err(fail)?;
    for i in [0, 1, (1 << 31) - 1, 1 << 31, n - 1] {
        let expected = 2.0 * ((i % 1021) as f32 + 1.0);
        if out[i] != expected {
            return Err(format!("element {i}: {} != {expected}", out[i]).into());
        }
    }
    if out
        .iter()
        .enumerate()
        .any(|(i, &v)| v != 2.0 * ((i % 1021) as f32 + 1.0))
    {
        return Err("some element of the 2^31 + 3 add is wrong".into());
    }
    Ok(())
}
