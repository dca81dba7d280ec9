//! The capturable decode step (`host/ops/decode_attention/step.rs`, `Gpu::matmul_decode_into`):
//! a graph holding a paged cache captures `kv_cache_write` and `decode_attention_into` once and
//! is replayed step after step, the reservation made on the host between replays, each
//! replay's output against `cpu::decode_attention` over every token written so far
//! (`decode_step::replays`, also with the one-launch decode attention, whose hand-off counters
//! must be back to 0 after each replay); a split-k decode product on a preallocated workspace captured and
//! replayed, bit for bit against the allocating call (`decode_step::matmul_workspace`); a
//! decode product captured on its first call, bit for bit against the `mma.sync` rung's plan,
//! which a capture falls back to where the Hopper rung would have to upload its tensor maps
//! (`decode_step::matmul_capture_first_call`); and the host's checks of the new forms
//! (`errors::decode_step`).

use gpukern::{DecodeAlgorithm, DecodePlan, DecodeQuery, Gpu, KvCacheShape, bf16, cpu};
use libtest_mimic::Trial;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_vec;
use crate::common::trial::{Target, trial};

/// The largest error of a bf16 output in [-1, 1] (its rounding, 2^-9, and the f32 sums').
const OUT_TOL: f64 = 8e-3;

/// Every trial of the step.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, (heads, kv_heads, head_dim, prompt, steps)) in [
        (sim, (4, 2, 64, 5, 3)),
        (sim, (2, 2, 40, 1, 2)),
        (cuda, (32, 8, 128, 1000, 8)),
        (cuda, (8, 8, 64, 37, 20)),
    ] {
        let name = format!("decode_step::replays_h{heads}_kv{kv_heads}_d{head_dim}_p{prompt}_s{steps}");
        trials.push(trial(target, &name, move |gpu, rng| {
            replays(
                &own(gpu)?,
                rng,
                (heads, kv_heads, head_dim),
                (prompt, steps),
                DecodeAlgorithm::default(),
            )
        }));
    }
    // The one-launch rung replayed: its counters must be back to 0 after every replay (3
    // chunks in the simulator's capacity of 16 tokens; the planned chunks on the GPU).
    for (target, (heads, kv_heads, head_dim, prompt, steps), algorithm) in [
        (sim, (4, 2, 64, 5, 3), DecodeAlgorithm::TensorFusedSplits(3)),
        (cuda, (32, 8, 128, 1000, 8), DecodeAlgorithm::TensorFused),
    ] {
        let name = format!(
            "decode_step::replays_{}_h{heads}_kv{kv_heads}_d{head_dim}_p{prompt}_s{steps}",
            algorithm.name()
        );
        trials.push(trial(target, &name, move |gpu, rng| {
            replays(
                &own(gpu)?,
                rng,
                (heads, kv_heads, head_dim),
                (prompt, steps),
                algorithm,
            )
        }));
    }
    for (target, (m, n, k)) in [
        (sim, (3, 40, 2048)),
        (cuda, (8, 4096, 4096)),
        (cuda, (1, 512, 14336)),
    ] {
        trials.push(trial(
            target,
            &format!("decode_step::matmul_workspace_{m}x{n}x{k}"),
            move |gpu, rng| matmul_workspace(&own(gpu)?, rng, (m, n, k)),
        ));
    }
    for (target, (m, n, k)) in [(sim, (9, 40, 2048)), (cuda, (16, 2048, 4096))] {
        trials.push(trial(
            target,
            &format!("decode_step::matmul_capture_first_call_{m}x{n}x{k}"),
            move |gpu, rng| matmul_capture_first_call(&own(gpu)?, rng, (m, n, k)),
        ));
    }
    trials.push(trial(sim, "errors::decode_step", |gpu, _| errors(gpu)));
    trials.push(trial(cuda, "errors::decode_step", |gpu, _| errors(gpu)));
    trials
}

/// A `Gpu` of the trial's own on CUDA (a capture records whatever its stream gets meanwhile);
/// the simulator's shared one otherwise.
fn own(gpu: &Gpu) -> gpukern::Result<Gpu> {
    match gpu.ordinal() {
        Some(ordinal) => Gpu::new(ordinal),
        None => Ok(gpu.clone()),
    }
}

/// A batch of 3 prompts of `prompt` tokens appended, then `steps` replays of a captured
/// (write, attention) pair, one token per sequence each, against the f64 reference; the
/// attention's workspace made for `algorithm`.
fn replays(
    gpu: &Gpu,
    rng: &mut StdRng,
    (heads, kv_heads, head_dim): (usize, usize, usize),
    (prompt, steps): (usize, usize),
    algorithm: DecodeAlgorithm,
) -> Check {
    let batch = 3;
    let block_size = 16;
    let row = kv_heads * head_dim;
    let max_blocks = (prompt + steps).div_ceil(block_size);
    let shape = KvCacheShape {
        num_blocks: batch * max_blocks,
        block_size,
        kv_heads,
        head_dim,
        batch,
        max_blocks,
    };
    // Sequence b's blocks in reverse order: the table, not the pools' order, places them.
    let table: Vec<i32> = (0..batch * max_blocks).rev().map(|i| i as i32).collect();
    let mut cache = gpu.paged_kv_cache::<bf16>(shape, &table)?;
    let bf = |x: Vec<f32>| -> Vec<bf16> { x.into_iter().map(bf16::from_f32).collect() };
    let mut k: Vec<Vec<f32>> = vec![Vec::new(); batch];
    let mut v: Vec<Vec<f32>> = vec![Vec::new(); batch];
    let kp = bf(random_vec(rng, batch * prompt * row));
    let vp = bf(random_vec(rng, batch * prompt * row));
    for b in 0..batch {
        let span = b * prompt * row..(b + 1) * prompt * row;
        k[b].extend(kp[span.clone()].iter().map(|x| x.to_f32()));
        v[b].extend(vp[span].iter().map(|x| x.to_f32()));
    }
    gpu.kv_cache_append(&mut cache, &gpu.upload(&kp)?, &gpu.upload(&vp)?, prompt)?;
    let query = DecodeQuery {
        heads,
        q_len: 1,
        scale: None,
    };
    let workspace = gpu.decode_workspace_with(&cache, query, algorithm)?;
    let buffers = (
        cache,
        workspace,
        gpu.zeros_of::<bf16>(batch * heads * head_dim)?,
        gpu.zeros_of::<bf16>(batch * row)?,
        gpu.zeros_of::<bf16>(batch * row)?,
        gpu.zeros_of::<bf16>(batch * heads * head_dim)?,
        gpu.zeros_of::<f32>(batch * heads)?,
    );
    let mut state = buffers;
    gpu.kv_cache_reserve(&mut state.0, 1)?;
    let mut graph = gpu.capture_with(state, |g, (cache, ws, q, kn, vn, out, lse)| {
        g.kv_cache_write(cache, kn, vn)?;
        g.decode_attention_into(q, cache, ws, out, lse)
    })?;
    let mut failures = Vec::new();
    for step in 0..steps {
        let s = graph.buffers_mut();
        if step > 0 {
            gpu.kv_cache_reserve(&mut s.0, 1)?;
        }
        let q = bf(random_vec(rng, batch * heads * head_dim)
            .into_iter()
            .map(|x| 4.0 * x)
            .collect());
        let kn = bf(random_vec(rng, batch * row));
        let vn = bf(random_vec(rng, batch * row));
        s.2.copy_from_host(&q)?;
        s.3.copy_from_host(&kn)?;
        s.4.copy_from_host(&vn)?;
        for b in 0..batch {
            k[b].extend(kn[b * row..(b + 1) * row].iter().map(|x| x.to_f32()));
            v[b].extend(vn[b * row..(b + 1) * row].iter().map(|x| x.to_f32()));
        }
        graph.launch()?;
        let s = graph.buffers();
        let q32: Vec<f32> = q.iter().map(|x| x.to_f32()).collect();
        let scale = 1.0 / (head_dim as f64).sqrt();
        let (want, want_lse) = cpu::decode_attention(&q32, &k, &v, (1, heads, kv_heads, head_dim), scale);
        let out: Vec<f32> = s.5.to_vec()?.into_iter().map(|x| x.to_f32()).collect();
        let lens = s.0.lens().to_vec();
        if lens != vec![(prompt + step + 1) as i32; batch] {
            failures.push(format!("step {step}: lengths {lens:?}"));
        }
        for (what, got, want, tol) in [
            ("out", out, want, OUT_TOL),
            ("lse", s.6.to_vec()?, want_lse, 2e-4),
        ] {
            if let Some((i, e)) = got
                .iter()
                .zip(&want)
                .map(|(g, w)| (f64::from(*g) - w).abs())
                .enumerate()
                .find(|&(_, e)| !within(e, tol))
            {
                failures.push(format!(
                    "step {step} {what}: element {i} got {}, expected {} (error {e:.3e} > {tol:.0e})",
                    got[i], want[i]
                ));
                break;
            }
        }
    }
    all_passed(failures)
}

/// `matmul_decode_into` captured on operands no call has seen (on Hopper the Hopper rung's maps
/// are not in device memory, and a capture cannot upload them): the capture succeeds and gives,
/// bit for bit, what the `mma.sync` rung's plan gives.
fn matmul_capture_first_call(gpu: &Gpu, rng: &mut StdRng, (m, n, k): (usize, usize, usize)) -> Check {
    let bf = |x: Vec<f32>| -> Vec<bf16> { x.into_iter().map(bf16::from_f32).collect() };
    let x = gpu.upload_matrix(&ndarray::Array2::from_shape_vec(
        (m, k),
        bf(random_vec(rng, m * k)),
    )?)?;
    let w = gpu.upload_matrix(&ndarray::Array2::from_shape_vec(
        (n, k),
        bf(random_vec(rng, n * k)),
    )?)?;
    let len = gpu.matmul_decode_workspace_len(m, n, k)?;
    let buffers = (
        gpu.zeros_matrix_of::<bf16>(m, n)?,
        gpu.zeros_of::<f32>(len.max(1))?,
    );
    let mut graph = gpu.capture_with(buffers, |g, (y, ws)| g.matmul_decode_into(&x, &w, y, ws))?;
    graph.launch()?;
    let got: Vec<f32> = graph
        .buffers()
        .0
        .as_vec()
        .to_vec()?
        .into_iter()
        .map(|x| x.to_f32())
        .collect();
    let plan = DecodePlan::choose(m, n, k, gpu.multiprocessors()?, true, false);
    let mut y = gpu.zeros_matrix_of::<bf16>(m, n)?;
    gpu.matmul_decode_with(&x, &w, &mut y, plan)?;
    let want: Vec<f32> = y.as_vec().to_vec()?.into_iter().map(|x| x.to_f32()).collect();
    check_abs(
        &format!("matmul_decode_into captured first {m}x{n}x{k}"),
        &got,
        &want,
        0.0,
    )
}

/// `matmul_decode_into` on a workspace, captured and replayed, against `matmul_decode` (the
/// same plan: bit for bit); on the GPU the shapes split `k`, so the workspace is used.
fn matmul_workspace(gpu: &Gpu, rng: &mut StdRng, (m, n, k): (usize, usize, usize)) -> Check {
    let bf = |x: Vec<f32>| -> Vec<bf16> { x.into_iter().map(bf16::from_f32).collect() };
    let x = gpu.upload_matrix(&ndarray::Array2::from_shape_vec(
        (m, k),
        bf(random_vec(rng, m * k)),
    )?)?;
    let w = gpu.upload_matrix(&ndarray::Array2::from_shape_vec(
        (n, k),
        bf(random_vec(rng, n * k)),
    )?)?;
    let want = gpu.matmul_decode(&x, &w)?.as_vec().to_vec()?;
    let len = gpu.matmul_decode_workspace_len(m, n, k)?;
    if gpu.ordinal().is_some() && len == 0 {
        return Err(format!("{m}x{n}x{k} was meant to split k on this GPU; its workspace is empty").into());
    }
    let buffers = (
        gpu.zeros_matrix_of::<bf16>(m, n)?,
        gpu.zeros_of::<f32>(len.max(1))?,
    );
    let mut graph = gpu.capture_with(buffers, |g, (y, ws)| g.matmul_decode_into(&x, &w, y, ws))?;
    graph.launch()?;
    graph.launch()?;
    let got: Vec<f32> = graph
        .buffers()
        .0
        .as_vec()
        .to_vec()?
        .into_iter()
        .map(|x| x.to_f32())
        .collect();
    let want: Vec<f32> = want.into_iter().map(|x| x.to_f32()).collect();
    check_abs(&format!("matmul_decode_into {m}x{n}x{k}"), &got, &want, 0.0)
}

/// The new forms' checks: a workspace of another shape, a short product workspace, a write of
/// another size than the reservation, a reservation past the capacity; a reservation copied to
/// a second cache (its lengths on the host and the device), and refused when copied twice.
fn errors(gpu: &Gpu) -> Check {
    let shape = KvCacheShape {
        num_blocks: 4,
        block_size: 4,
        kv_heads: 2,
        head_dim: 8,
        batch: 2,
        max_blocks: 2,
    };
    let table = [0, 1, 2, 3];
    let mut failures = Vec::new();
    let mut expect = |what: &str, r: gpukern::Result<()>, needle: &str| match r {
        Err(e) if e.to_string().contains(needle) => {}
        Err(e) => failures.push(format!("{what}: error {e} lacks {needle:?}")),
        Ok(()) => failures.push(format!("{what}: accepted")),
    };
    let mut cache = gpu.paged_kv_cache::<bf16>(shape, &table)?;
    let other = gpu.paged_kv_cache::<bf16>(KvCacheShape { batch: 1, ..shape }, &[0, 1])?;
    let query = DecodeQuery {
        heads: 4,
        q_len: 1,
        scale: None,
    };
    let mut ws = gpu.decode_workspace(&other, query)?;
    let q = gpu.zeros_of::<bf16>(2 * 4 * 8)?;
    let (mut out, mut lse) = (gpu.zeros_of::<bf16>(2 * 4 * 8)?, gpu.zeros_of::<f32>(2 * 4)?);
    gpu.kv_cache_reserve(&mut cache, 1)?;
    expect(
        "a workspace of another shape",
        gpu.decode_attention_into(&q, &cache, &mut ws, &mut out, &mut lse),
        "the workspace was made for",
    );
    expect(
        "a workspace for 3 heads",
        gpu.decode_workspace(&cache, DecodeQuery { heads: 3, ..query })
            .map(|_| ()),
        "not a multiple",
    );
    let rows = gpu.zeros_of::<bf16>(2 * 2 * 2 * 8)?;
    expect(
        "two tokens written for a reservation of one",
        gpu.kv_cache_write(&mut cache, &rows, &rows),
        "reserved",
    );
    expect(
        "a reservation past the capacity",
        gpu.kv_cache_reserve(&mut cache, 8),
        "past its 8",
    );
    let lens_after_refusal = cache.lens().to_vec();
    // The same reservation on a second cache of the same lengths, copied on the device; a second
    // copy of it (the second cache no longer holds what the first held before) is refused.
    let mut second = gpu.paged_kv_cache::<bf16>(shape, &table)?;
    gpu.kv_cache_reserve_as(&mut second, &cache)?;
    let copied = (second.lens().to_vec(), second.lens_on_device().to_vec()?);
    expect(
        "a reservation copied twice",
        gpu.kv_cache_reserve_as(&mut second, &cache),
        "the cache holds",
    );
    let x = gpu.zeros_matrix_of::<bf16>(1, 8192)?;
    let w = gpu.zeros_matrix_of::<bf16>(64, 8192)?;
    let mut y = gpu.zeros_matrix_of::<bf16>(1, 64)?;
    let need = gpu.matmul_decode_workspace_len(1, 64, 8192)?;
    if need > 0 {
        let mut short = gpu.zeros_of::<f32>(need - 1)?;
        expect(
            "a short product workspace",
            gpu.matmul_decode_into(&x, &w, &mut y, &mut short),
            "fewer than the plan's",
        );
    }
    if copied != (vec![1, 1], vec![1, 1]) {
        failures.push(format!(
            "the copied reservation's lengths (host, device): {copied:?}"
        ));
    }
    if lens_after_refusal != [1, 1] {
        failures.push(format!(
            "a refused reservation changed the lengths: {lens_after_refusal:?}"
        ));
    }
    all_passed(failures)
}
