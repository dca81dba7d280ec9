//! Host-device copies: pinned, pageable and staged, each direction (kernel `transfer`,
//! `direction` = `upload` / `download`), and the three timings of the pipelined batch
//! (kernel `pipelined`, the `transfer` example's batch).
//!
//! Traffic: the bytes copied, once (one direction over the bus). Wall time per copy, including
//! the wait for it (a synchronisation, or the pinned buffer's event).

use gpukern::{DeviceMatrix, MatmulAlgorithm};

use crate::Bench;
use crate::data::random_vec;
use crate::memory::F32_TOL;
use crate::record::{Check, Record, Res, Sink};
use crate::timing::wall_median;

/// Floats per copy: 256 MiB (16 MiB quick), the size.
pub fn copy_len(quick: bool) -> usize {
    if quick { 4 << 20 } else { 64 << 20 }
}

/// Records per run of [`transfer`]: pinned, staged and pageable both ways, and `to_vec`.
pub const TRANSFER_RECORDS: usize = 7;

/// Upload and download of [`copy_len`] floats: `gpukern:pinned` (a `PinnedBuffer`),
/// `gpukern:staged` (`Gpu::upload` / `Gpu::download` through the pinned staging buffers, a new
/// device buffer or `Vec` each time), `cudarc:pageable` (cudarc's copy from or into a reused
/// `Vec`), `gpukern:to_vec` (a fresh `Vec`, pageable).
pub fn transfer(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    let n = copy_len(b.quick);
    let bytes = 4.0 * n as f64;
    let (reps, max_s) = if b.quick { (5, 0.3) } else { (20, 2.0) };
    let host = random_vec(n, -1.0, 1.0);
    let base = |imp: &str, direction: &str| {
        Record::new("transfer", imp, format!("{}MiB", (4 * n) >> 20))
            .with("n", n)
            .with("direction", direction)
    };
    let gpu = b.gpu.clone();
    let exact = |got: &[f32]| Check::new(got, &host, 0.0, "input");

    sink.item(base("gpukern:pinned", "upload"), || {
        let src = gpu.pinned_from(&host)?;
        let mut d = gpu.zeros(n)?;
        d.copy_from_pinned(&src, 0)?;
        let check = exact(&d.to_vec()?);
        let rec = base("gpukern:pinned", "upload").checked(&check);
        let stats = wall_median(reps, max_s, || {
            d.copy_from_pinned(&src, 0)?;
            Ok(gpu.synchronize()?)
        })?;
        Ok(rec.timed(&stats, Some(bytes), None))
    })?;
    sink.item(base("gpukern:pinned", "download"), || {
        let d = gpu.upload(&host)?;
        let mut dst = gpu.pinned::<f32>(n)?;
        d.copy_to_pinned(&mut dst, 0)?;
        let check = exact(dst.as_slice()?);
        let rec = base("gpukern:pinned", "download").checked(&check);
        let stats = wall_median(reps, max_s, || {
            d.copy_to_pinned(&mut dst, 0)?;
            dst.as_slice()?;
            Ok(())
        })?;
        Ok(rec.timed(&stats, Some(bytes), None))
    })?;
    sink.item(base("gpukern:staged", "upload"), || {
        let check = exact(&gpu.upload(&host)?.to_vec()?);
        let rec = base("gpukern:staged", "upload").checked(&check);
        let stats = wall_median(reps, max_s, || {
            let d = gpu.upload(&host)?;
            gpu.synchronize()?;
            drop(d);
            Ok(())
        })?;
        Ok(rec.timed(&stats, Some(bytes), None))
    })?;
    sink.item(base("gpukern:staged", "download"), || {
        let d = gpu.upload(&host)?;
        let check = exact(&gpu.download(&d)?);
        let rec = base("gpukern:staged", "download").checked(&check);
        let stats = wall_median(reps, max_s, || {
            gpu.download(&d)?;
            Ok(())
        })?;
        Ok(rec.timed(&stats, Some(bytes), None))
    })?;
    sink.item(base("cudarc:pageable", "upload"), || {
        let mut d = b.stream.alloc_zeros::<f32>(n)?;
        b.stream.memcpy_htod(&host, &mut d)?;
        let check = exact(&b.stream.clone_dtoh(&d)?);
        let rec = base("cudarc:pageable", "upload").checked(&check);
        let stats = wall_median(reps, max_s, || {
            b.stream.memcpy_htod(&host, &mut d)?;
            Ok(b.stream.synchronize()?)
        })?;
        Ok(rec.timed(&stats, Some(bytes), None))
    })?;
    sink.item(base("cudarc:pageable", "download"), || {
        let d = b.stream.clone_htod(&host)?;
        let mut out = vec![0.0f32; n];
        b.stream.memcpy_dtoh(&d, &mut out)?;
        b.stream.synchronize()?;
        let check = exact(&out);
        let rec = base("cudarc:pageable", "download").checked(&check);
        let stats = wall_median(reps, max_s, || {
            b.stream.memcpy_dtoh(&d, &mut out)?;
            Ok(b.stream.synchronize()?)
        })?;
        Ok(rec.timed(&stats, Some(bytes), None))
    })?;
    sink.item(base("gpukern:to_vec", "download"), || {
        let d = gpu.upload(&host)?;
        let check = exact(&d.to_vec()?);
        let rec = base("gpukern:to_vec", "download").checked(&check);
        let stats = wall_median(reps, max_s, || {
            d.to_vec()?;
            Ok(())
        })?;
        Ok(rec.timed(&stats, Some(bytes), None))
    })?;
    Ok(())
}

/// Chunks and chunk size of the pipelined batch (the `transfer` example's).
fn batch(quick: bool) -> (usize, usize) {
    if quick { (4, 1024) } else { (8, 2048) }
}

/// Records of [`pipelined`]: copies alone, compute alone, one stream, three streams.
pub const PIPELINED_RECORDS: usize = 4;

/// The batch `C_i = A_i * B` (see `examples/transfer.rs`): `mode` = `copies`, `compute`,
/// `serial` (upload, compute, download per chunk on one stream), `pipelined` (three streams).
/// Bytes: every `A_i` up and `C_i` down; flops: the products (0 for `copies`).
pub fn pipelined(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    let (chunks, n) = batch(b.quick);
    let (reps, max_s) = if b.quick { (3, 0.3) } else { (10, 2.0) };
    let algorithm = MatmulAlgorithm::default();
    let gpu = b.gpu.clone();
    let bytes = 2.0 * 4.0 * (chunks * n * n) as f64;
    let flops = 2.0 * (chunks * n * n * n) as f64;
    let base = |mode: &str| {
        Record::new(
            "pipelined",
            format!("gpukern:{}", algorithm.name()),
            format!("{chunks}x{n}^3"),
        )
        .with("chunks", chunks)
        .with("n", n)
        .with("mode", mode)
    };
    let a = random_vec(chunks * n * n, -1.0, 1.0);
    let bm = random_vec(n * n, -1.0, 1.0);
    let db = gpu.upload_matrix(&ndarray::Array2::from_shape_vec((n, n), bm.clone())?)?;
    let input = gpu.pinned_from(&a)?;
    let mut output = gpu.pinned::<f32>(chunks * n * n)?;
    let compute =
        |g: &gpukern::Gpu, x: &DeviceMatrix, y: &mut DeviceMatrix| g.matmul_into(x, &db, y, algorithm);
    // Checked: the three-stream result against the one-stream one, chunk 0 against the CPU.
    gpu.pipelined(1, &input, (n, n), &mut output, (n, n), compute)?;
    let serial = output.to_vec()?;
    gpu.pipelined(3, &input, (n, n), &mut output, (n, n), compute)?;
    let piped = output.to_vec()?;
    let a0 = ndarray::Array2::from_shape_vec((n, n), a[..n * n].to_vec())?;
    let b0 = ndarray::Array2::from_shape_vec((n, n), bm)?;
    let reference = gpukern::cpu::matmul(&a0, &b0)?;
    let check0 = Check::new(
        &piped[..n * n],
        reference.as_slice().unwrap_or(&[]),
        F32_TOL,
        "cpu_f64",
    );
    let same = Check::new(&piped, &serial, 0.0, "one_stream");
    let checked = |mode: &str| {
        let rec = base(mode).checked(&check0);
        if check0.passed() { rec.checked(&same) } else { rec }
    };

    let mut lanes = Vec::with_capacity(chunks);
    for _ in 0..chunks {
        lanes.push((gpu.zeros_matrix(n, n)?, gpu.zeros_matrix(n, n)?));
    }
    sink.item(base("copies"), || {
        let stats = wall_median(reps, max_s, || {
            for (i, (x, _)) in lanes.iter_mut().enumerate() {
                x.as_vec_mut().copy_from_pinned(&input, i * n * n)?;
            }
            for (i, (_, y)) in lanes.iter().enumerate() {
                y.as_vec().copy_to_pinned(&mut output, i * n * n)?;
            }
            output.as_slice()?;
            Ok(())
        })?;
        Ok(checked("copies").timed(&stats, Some(bytes), None))
    })?;
    sink.item(base("compute"), || {
        let stats = wall_median(reps, max_s, || {
            for (x, y) in lanes.iter_mut() {
                compute(&gpu, x, y)?;
            }
            Ok(gpu.synchronize()?)
        })?;
        Ok(checked("compute").timed(&stats, None, Some(flops)))
    })?;
    for (mode, streams) in [("serial", 1), ("pipelined", 3)] {
        sink.item(base(mode), || {
            let stats = wall_median(reps, max_s, || {
                gpu.pipelined(streams, &input, (n, n), &mut output, (n, n), compute)?;
                output.as_slice()?;
                Ok(())
            })?;
            Ok(checked(mode)
                .timed(&stats, Some(bytes), Some(flops))
                .with("streams", streams))
        })?;
    }
    Ok(())
}
