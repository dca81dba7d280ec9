//! Memory-bound kernels: the device-to-device copy ceiling, `add`, `increment_by_one`.
//!
//! Minimum traffic per element: copy 8 bytes (read + write), add 12, increment 8.

use cudarc::driver::CudaSlice;
use gpukern::AddAlgorithm;

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::record::{Check, Record, Res, Sink};

/// Largest relative error an f32 kernel may show against its reference.
pub const F32_TOL: f64 = 1e-4;

/// Vector lengths of the element-wise kernels and the copy.
pub fn sizes(quick: bool) -> Vec<usize> {
    crate::suite::sizes("memory", quick)
}

/// The minimum bytes of a `kernel` record (`copy`, `add`, `increment_by_one`) on `n` floats.
fn bytes(kernel: &str, n: usize) -> Option<f64> {
    Some(crate::suite::bytes(kernel, &[("n", n)]))
}

/// Device-to-device copy bandwidth (`cuMemcpyDtoDAsync`), counting bytes read plus written:
/// the ceiling of every memory-bound kernel.
pub fn copy(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for n in sizes(b.quick) {
        let base = Record::new("copy", "copy", n.to_string()).with("n", n);
        sink.item(base.clone(), || timed_copy(b, base, n))?;
    }
    Ok(())
}

/// A device-to-device copy of `bytes` (record `kernel`, `impl` `copy`, at `shape`): what a copy
/// of a kernel's traffic reaches at that size, beside the kernel's own rows (the LLM blocks'
/// suites, decode attention's).
pub fn copy_of_traffic(b: &mut Bench, sink: &mut Sink, kernel: &str, shape: &str, bytes: f64) -> Res<()> {
    let mut base = Record::new(kernel, "copy", shape).with("call", "cuMemcpyDtoDAsync");
    base.dtype = "bf16";
    // Half the bytes read, half written: a copy of `bytes / 2` moves `bytes`.
    let n = (bytes / 2.0 / 4.0).ceil() as usize;
    sink.item(base.clone(), || timed_copy(b, base, n.max(1)))
}

/// `base` checked and timed for a device-to-device copy of `n` random floats (rotating among
/// copies of the buffers where they fit in L2), counting `8 n` bytes: the copy suite's rows, and
/// the norm suite's copy of its own shapes' bytes.
pub fn timed_copy(b: &mut Bench, base: Record, n: usize) -> Res<Record> {
    let host = random_vec(n, -1.0, 1.0);
    let sets = sets_for(8 * n);
    let src = (0..sets)
        .map(|_| b.stream.clone_htod(&host))
        .collect::<Result<Vec<CudaSlice<f32>>, _>>()?;
    let mut dst = (0..sets)
        .map(|_| b.stream.alloc_zeros::<f32>(n))
        .collect::<Result<Vec<CudaSlice<f32>>, _>>()?;
    b.stream.memcpy_dtod(&src[0], &mut dst[0])?;
    let check = Check::new(&b.stream.clone_dtoh(&dst[0])?, &host, 0.0, "input");
    let record = base.checked(&check).with("sets", sets);
    if !check.passed() {
        return Ok(record);
    }
    let stats = b.timer.measure(|i| {
        let j = i % sets;
        Ok(b.stream.memcpy_dtod(&src[j], &mut dst[j])?)
    })?;
    Ok(record.timed(&stats, bytes("copy", n), None))
}

/// `gpu.add_into_with(a, b, c, algorithm)` on device-resident vectors, every algorithm.
pub fn add(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for n in sizes(b.quick) {
        for algorithm in AddAlgorithm::ALL {
            let base =
                Record::new("add", format!("gpukern:{}", algorithm.name()), n.to_string()).with("n", n);
            sink.item(base.clone(), || {
                let (x, y) = (random_vec(n, -1.0, 1.0), random_vec(n, -1.0, 1.0));
                let reference = gpukern::cpu::add(&x, &y)?;
                let nan = vec![f32::NAN; n];
                let sets = sets_for(12 * n);
                let mut bufs = Vec::with_capacity(sets);
                for _ in 0..sets {
                    bufs.push((b.gpu.upload(&x)?, b.gpu.upload(&y)?, b.gpu.upload(&nan)?));
                }
                let (x0, y0, z0) = &mut bufs[0];
                b.gpu.add_into_with(x0, y0, z0, algorithm)?;
                let check = Check::new(&z0.to_vec()?, &reference, F32_TOL, "cpu_f64");
                let record = base.checked(&check).with("sets", sets);
                if !check.passed() {
                    return Ok(record);
                }
                let gpu = &b.gpu;
                let stats = b.timer.measure(|i| {
                    let (x, y, z) = &mut bufs[i % sets];
                    Ok(gpu.add_into_with(x, y, z, algorithm)?)
                })?;
                Ok(record.timed(&stats, bytes("add", n), None))
            })?;
        }
    }
    Ok(())
}

/// `gpu.increment_by_one_with(x, algorithm)` in place on a device-resident vector, every
/// algorithm.
pub fn increment_by_one(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for n in sizes(b.quick) {
        for algorithm in AddAlgorithm::ALL {
            let impl_name = format!("gpukern:{}", algorithm.name());
            let base = Record::new("increment_by_one", impl_name, n.to_string()).with("n", n);
            sink.item(base.clone(), || {
                let x = random_vec(n, -1.0, 1.0);
                let reference = gpukern::cpu::increment_by_one(&x);
                let sets = sets_for(8 * n);
                let mut bufs = Vec::with_capacity(sets);
                for _ in 0..sets {
                    bufs.push(b.gpu.upload(&x)?);
                }
                b.gpu.increment_by_one_with(&mut bufs[0], algorithm)?;
                let check = Check::new(&bufs[0].to_vec()?, &reference, F32_TOL, "cpu_f64");
                let record = base.checked(&check).with("sets", sets);
                if !check.passed() {
                    return Ok(record);
                }
                let gpu = &b.gpu;
                let stats = b
                    .timer
                    .measure(|i| Ok(gpu.increment_by_one_with(&mut bufs[i % sets], algorithm)?))?;
                Ok(record.timed(&stats, bytes("increment_by_one", n), None))
            })?;
        }
    }
    Ok(())
}
