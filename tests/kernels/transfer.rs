//! Data movement: pinned buffers, staged pageable copies, streams and events, the pipelined
//! batch, and their errors. No kernels of their own: the ops run on several streams.
//!
//! In the simulator every stream runs in call order, so the ordering trials only race on CUDA:
//! `cuda::transfer::cross_stream_order` writes a buffer with a long kernel on one stream and
//! reads it on another at once.

use gpukern::pinned::{STAGING_CHUNK_BYTES, STAGING_MIN_BYTES};
use gpukern::{DeviceMatrix, Error, Gpu, MatmulAlgorithm, PinnedBuffer, cpu};
use libtest_mimic::Trial;
use ndarray::Array2;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_vec;
use crate::common::trial::{Target, trial};

/// Relative error norm of a matmul chunk against the f64 reference.
const MATMUL_REL_TOL: f64 = 1e-5;

/// Floats in one staging piece, and in the smallest staged copy.
const CHUNK: usize = STAGING_CHUNK_BYTES / 4;
const STAGED: usize = STAGING_MIN_BYTES / 4;

/// Lengths of the round trips: empty, ragged, and on CUDA around the staging threshold and
/// over several staging pieces with a ragged last one.
const SIM_LENGTHS: &[usize] = &[0, 1, 7, 33, 1025];
const CUDA_LENGTHS: &[usize] = &[0, 1, 7, 1025, STAGED - 1, STAGED, 3 * CHUNK + 5, 8 * CHUNK];

/// Every trial of this file.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, lengths, pipeline) in [
        (sim, SIM_LENGTHS, (4, 33, 17, 9)),
        (cuda, CUDA_LENGTHS, (8, 513, 257, 129)),
    ] {
        trials.extend([
            trial(target, "transfer::pinned_round_trip", move |gpu, rng| {
                pinned_round_trip(gpu, rng, lengths)
            }),
            trial(target, "transfer::staged_round_trip", move |gpu, rng| {
                staged_round_trip(gpu, rng, lengths)
            }),
            trial(target, "transfer::streams", streams),
            trial(target, "transfer::events", |gpu, _| events(gpu)),
            trial(target, "transfer::pipelined", move |gpu, rng| {
                pipelined(gpu, rng, pipeline)
            }),
            trial(target, "transfer::errors", |gpu, _| errors(gpu)),
        ]);
    }
    trials.extend([
        trial(cuda, "transfer::cross_stream_order", |gpu, rng| {
            cross_stream_order(gpu, rng, 2048)
        }),
        trial(cuda, "transfer::wrong_device", |gpu, _| {
            wrong_device(gpu, &Gpu::simulator())
        }),
        trial(cuda, "transfer::two_gpu_handles_on_device_0", |gpu, _| {
            wrong_device(gpu, &Gpu::new(0)?)
        }),
    ]);
    trials
}

/// Host -> pinned -> device -> pinned (whole and at an offset) gives the data back exactly.
fn pinned_round_trip(gpu: &Gpu, rng: &mut StdRng, lengths: &[usize]) -> Check {
    for &n in lengths {
        let data = random_vec(rng, n);
        let src = gpu.pinned_from(&data)?;
        let d = gpu.upload_pinned(&src)?;
        let mut back = gpu.pinned_from(&vec![f32::NAN; n])?;
        d.copy_to_pinned(&mut back, 0)?;
        check_abs(&format!("pinned round trip of {n}"), back.as_slice()?, &data, 0.0)?;
        check_abs(
            &format!("to_vec after a pinned upload of {n}"),
            &d.to_vec()?,
            &data,
            0.0,
        )?;

        // Offsets: the middle third of a buffer three times as long.
        let mut wide = gpu.pinned_from(&vec![f32::NAN; 3 * n])?;
        d.copy_to_pinned(&mut wide, n)?;
        let got = wide.to_vec()?;
        check_abs(
            &format!("copy_to_pinned at offset {n}"),
            &got[n..2 * n],
            &data,
            0.0,
        )?;
        if got[..n].iter().chain(&got[2 * n..]).any(|v| !v.is_nan()) {
            return Err(format!("copy_to_pinned at offset {n} wrote outside its range").into());
        }
        let mut d2 = gpu.upload(&vec![f32::NAN; n])?;
        d2.copy_from_pinned(&wide, n)?;
        check_abs(
            &format!("copy_from_pinned at offset {n}"),
            &d2.to_vec()?,
            &data,
            0.0,
        )?;

        // The host writes a pinned buffer again once the upload from it is queued: the upload
        // must have read the old contents (it waits for nothing on the host, the write waits).
        let mut reused = gpu.pinned_from(&data)?;
        let d3 = gpu.upload_pinned(&reused)?;
        reused.as_mut_slice()?.fill(f32::NAN);
        check_abs(
            &format!("upload then host overwrite of {n}"),
            &d3.to_vec()?,
            &data,
            0.0,
        )?;
    }
    Ok(())
}

/// `upload` and `Gpu::download` (pinned staging from `STAGING_MIN_BYTES` on) agree with
/// `to_vec` and the data, also through a second stream's staging.
fn staged_round_trip(gpu: &Gpu, rng: &mut StdRng, lengths: &[usize]) -> Check {
    let other = gpu.stream()?;
    for &n in lengths {
        let data = random_vec(rng, n);
        for (name, g) in [("first", gpu), ("second", &other)] {
            let d = g.upload(&data)?;
            check_abs(
                &format!("{name} stream: download of {n}"),
                &g.download(&d)?,
                &data,
                0.0,
            )?;
            check_abs(&format!("{name} stream: to_vec of {n}"), &d.to_vec()?, &data, 0.0)?;
        }
    }
    // Two large uploads back to back reuse the staging buffers: the first must be complete.
    if let Some(&n) = lengths.iter().max() {
        let (a, b) = (random_vec(rng, n), random_vec(rng, n));
        let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
        check_abs("first of two staged uploads", &gpu.download(&da)?, &a, 0.0)?;
        check_abs("second of two staged uploads", &gpu.download(&db)?, &b, 0.0)?;
    }
    Ok(())
}

/// The ops on a second stream, with operands of the first and of the second, equal the CPU.
fn streams(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let s = gpu.stream()?;
    if !s.same_device(gpu) || !gpu.same_device(&s) {
        return Err("a stream handle is not on the same device".into());
    }
    let (m, k, n) = (65, 33, 47);
    let a = crate::common::random_matrix(rng, m, k);
    let b = crate::common::random_matrix(rng, k, n);
    let want = cpu::matmul(&a, &b)?;
    // `a` on the first stream, `b` on the second, the product on the second.
    let (da, db) = (gpu.upload_matrix(&a)?, s.upload_matrix(&b)?);
    let c = s.matmul(&da, &db)?;
    check_rel_error(
        "matmul on a second stream",
        c.to_array()?.as_slice().unwrap_or(&[]),
        want.as_slice().unwrap_or(&[]),
        MATMUL_REL_TOL,
    )?;
    // ... and back on the first stream, reading the second stream's result.
    let y = gpu.softmax(&c, 1.0)?;
    let want_y = cpu::softmax_rows(&want, 1.0);
    check_rel_error(
        "softmax of the second stream's result",
        y.to_array()?.as_slice().unwrap_or(&[]),
        want_y.as_slice().unwrap_or(&[]),
        1e-5,
    )?;
    // A buffer of the first stream written by the second, then read on the first.
    let mut out = poisoned_matrix(gpu, m, n)?;
    s.matmul_into(&da, &db, &mut out, MatmulAlgorithm::default())?;
    check_rel_error(
        "matmul_into a first-stream buffer",
        out.to_array()?.as_slice().unwrap_or(&[]),
        want.as_slice().unwrap_or(&[]),
        MATMUL_REL_TOL,
    )?;
    gpu.synchronize()?;
    s.synchronize()?;
    Ok(())
}

/// Events record, wait across streams, synchronise and time.
fn events(gpu: &Gpu) -> Check {
    let s = gpu.stream()?;
    let start = gpu.record()?;
    let x = gpu.upload(&vec![1.0f32; 1000])?;
    let mut y = gpu.add(&x, &x)?;
    let done = gpu.record()?;
    s.wait(&done)?;
    s.increment_by_one(&mut y)?;
    let end = s.record()?;
    end.synchronize()?;
    let ms = start.elapsed_ms(&done)?;
    if ms.is_nan() || ms < 0.0 {
        return Err(format!("elapsed_ms = {ms}").into());
    }
    check_abs(
        "add then increment on two streams",
        &y.to_vec()?,
        &vec![3.0; 1000],
        0.0,
    )?;
    // An event of another backend.
    let foreign = if gpu.is_simulator() {
        None
    } else {
        Some(Gpu::simulator().record()?)
    };
    if let Some(e) = foreign {
        expect_wrong_device("wait on a simulator event", gpu.wait(&e))?;
        expect_wrong_device("elapsed between backends", start.elapsed_ms(&e))?;
    }
    Ok(())
}

/// `pipelined` with 1, 2 and 3 streams equals the matmul of each chunk done one by one.
fn pipelined(gpu: &Gpu, rng: &mut StdRng, (chunks, m, k, n): (usize, usize, usize, usize)) -> Check {
    let a = crate::common::random_matrix(rng, chunks * m, k);
    let b = crate::common::random_matrix(rng, k, n);
    let want = cpu::matmul(&a, &b)?;
    let db = gpu.upload_matrix(&b)?;
    let input = gpu.pinned_from(a.as_slice().unwrap_or(&[]))?;
    let mut first: Option<Vec<f32>> = None;
    for streams in [1, 2, 3] {
        let mut output: PinnedBuffer<f32> = gpu.pinned_from(&vec![f32::NAN; chunks * m * n])?;
        gpu.pipelined(streams, &input, (m, k), &mut output, (m, n), |g, x, y| {
            g.matmul_into(x, &db, y, MatmulAlgorithm::default())
        })?;
        let got = output.to_vec()?;
        check_rel_error(
            &format!("pipelined on {streams} streams"),
            &got,
            want.as_slice().unwrap_or(&[]),
            MATMUL_REL_TOL,
        )?;
        match &first {
            None => first = Some(got),
            // Same kernels on the same chunks: the same bits whatever the streams.
            Some(f) => check_abs(&format!("pipelined on {streams} streams vs 1"), &got, f, 0.0)?,
        }
    }
    // The unpipelined path: upload, compute, download chunk by chunk with the plain API.
    for i in [0, chunks - 1] {
        let chunk = a.slice(ndarray::s![i * m..(i + 1) * m, ..]);
        let c = gpu.matmul(&gpu.upload_matrix(&chunk)?, &db)?;
        let f = first.as_deref().unwrap_or(&[]);
        check_abs(
            &format!("chunk {i} unpipelined vs pipelined"),
            c.to_array()?.as_slice().unwrap_or(&[]),
            &f[i * m * n..(i + 1) * m * n],
            0.0,
        )?;
    }
    Ok(())
}

/// Bad ranges, shapes and sizes are errors, never panics; empty buffers work.
fn errors(gpu: &Gpu) -> Check {
    let p = gpu.pinned_from(&[1.0f32, 2.0, 3.0])?;
    let mut d = gpu.upload(&[0.0f32; 2])?;
    expect_shape_mismatch(
        "copy_from_pinned past the end",
        d.copy_from_pinned(&p, 2),
        &[2, 2],
        &[3],
    )?;
    expect_shape_mismatch(
        "copy_from_pinned offset overflow",
        d.copy_from_pinned(&p, usize::MAX),
        &[usize::MAX, 2],
        &[3],
    )?;
    let mut small = gpu.pinned::<f32>(1)?;
    expect_shape_mismatch(
        "copy_to_pinned past the end",
        d.copy_to_pinned(&mut small, 0),
        &[0, 2],
        &[1],
    )?;
    // Empty buffers.
    let empty = gpu.pinned::<f32>(0)?;
    let de = gpu.upload_pinned(&empty)?;
    if !de.is_empty() || !empty.as_slice()?.is_empty() {
        return Err("an empty pinned upload is not empty".into());
    }
    let mut empty_out = gpu.pinned::<f32>(0)?;
    de.copy_to_pinned(&mut empty_out, 0)?;
    d.copy_to_pinned(&mut gpu.pinned(5)?, 3)?;
    // Too large: past isize::MAX bytes is refused before the driver is asked; a size the
    // driver (or the host) cannot page-lock is an error too.
    match gpu.pinned::<f32>(usize::MAX / 2) {
        Err(Error::TooLarge { .. }) => {}
        other => {
            return Err(format!("pinned(usize::MAX / 2): expected TooLarge, got {:?}", other.err()).into());
        }
    }
    match gpu.pinned::<u8>(1 << 50) {
        Err(Error::TooLarge { .. } | Error::OutOfMemory { .. }) => {}
        other => {
            return Err(format!(
                "pinned(1 PiB): expected TooLarge or OutOfMemory, got {:?}",
                other.err()
            )
            .into());
        }
    }
    // Pipelined: no streams, empty chunks, ragged input, wrong output.
    let db = gpu.upload_matrix(&Array2::<f32>::ones((2, 2)))?;
    let input = gpu.pinned_from(&[1.0f32; 8])?;
    let mut out = gpu.pinned::<f32>(8)?;
    let run = |streams, in_shape, out_len: usize| {
        let mut o = gpu.pinned::<f32>(out_len)?;
        gpu.pipelined(
            streams,
            &input,
            in_shape,
            &mut o,
            (2, 2),
            |g, x: &DeviceMatrix, y| g.matmul_into(x, &db, y, MatmulAlgorithm::default()),
        )
    };
    for (what, r) in [
        ("no streams", run(0, (2, 2), 8)),
        ("empty chunk", run(1, (0, 2), 8)),
        ("ragged input", run(1, (3, 1), 8)),
    ] {
        match r {
            Err(Error::InvalidArgument { .. }) => {}
            other => {
                return Err(format!(
                    "pipelined with {what}: expected InvalidArgument, got {:?}",
                    other.err()
                )
                .into());
            }
        }
    }
    expect_shape_mismatch(
        "pipelined with a short output",
        run(1, (2, 2), 6),
        &[2, 2, 2],
        &[6],
    )?;
    gpu.pipelined(2, &input, (2, 2), &mut out, (2, 2), |g, x, y| {
        g.matmul_into(x, &db, y, MatmulAlgorithm::default())
    })?;
    check_abs("pipelined ones", out.as_slice()?, &[2.0; 8], 0.0)?;
    Ok(())
}

/// Pinned buffers and events of one device are refused by another.
fn wrong_device(gpu: &Gpu, foreign: &Gpu) -> Check {
    let theirs = foreign.pinned_from(&[1.0f32; 4])?;
    expect_wrong_device("upload_pinned", gpu.upload_pinned(&theirs))?;
    let mut d = gpu.upload(&[0.0f32; 4])?;
    expect_wrong_device("copy_from_pinned", d.copy_from_pinned(&theirs, 0))?;
    let mut theirs = theirs;
    expect_wrong_device("copy_to_pinned", d.copy_to_pinned(&mut theirs, 0))?;
    expect_wrong_device("download", foreign.download(&d))?;
    expect_wrong_device("wait", gpu.wait(&foreign.record()?))?;
    if gpu.same_device(foreign) {
        return Err("same_device of two devices".into());
    }
    Ok(())
}

/// A long kernel writes a buffer on stream A; stream B reads it at once (B's kernel must wait);
/// B writes a buffer of A that A then downloads (A must wait); a buffer of B used on A is dropped
/// right after (its free must wait). Each result equals the CPU's.
fn cross_stream_order(gpu: &Gpu, rng: &mut StdRng, size: usize) -> Check {
    let (sa, sb) = (gpu.stream()?, gpu.stream()?);
    let a = crate::common::random_matrix(rng, size, size);
    let b = crate::common::random_matrix(rng, size, size);
    let (da, db) = (sa.upload_matrix(&a)?, sa.upload_matrix(&b)?);
    sa.synchronize()?;
    for round in 0..3 {
        // The naive kernel: milliseconds at this size, so an unordered read would see NaN.
        let mut c = poisoned_matrix(&sa, size, size)?;
        sa.synchronize()?;
        sa.matmul_into(&da, &db, &mut c, MatmulAlgorithm::Naive)?;
        let twice = sb.add(c.as_vec(), c.as_vec())?;
        let want = c.as_vec().to_vec()?;
        let got = twice.to_vec()?;
        let doubled: Vec<f32> = want.iter().map(|v| v + v).collect();
        if want.iter().any(|v| v.is_nan()) {
            return Err(format!("round {round}: the product has NaNs").into());
        }
        check_abs(
            &format!("round {round}: B's add of A's product"),
            &got,
            &doubled,
            0.0,
        )?;

        // B writes a buffer of A; A downloads it.
        let mut on_a = poisoned_matrix(&sa, size, size)?;
        sa.synchronize()?;
        sb.matmul_into(&da, &db, &mut on_a, MatmulAlgorithm::Naive)?;
        check_abs(
            &format!("round {round}: A's download of B's product"),
            &on_a.as_vec().to_vec()?,
            &want,
            0.0,
        )?;
    }
    Ok(())
}
