//! Times the user kernels on CUDA device 0 with the copy ceiling of the same run, and writes one
//! JSON object per measurement (JSON Lines) to the file named by the first argument:
//! `{"kernel": "user_gelu", "impl": "gpukern:user", "shape": "8192x8192", "dtype": "bf16",
//! "median_ms", "gbps", "rel_err", ...}` (`bench/run-user.sh` runs it beside the Python peers).
//!
//! Method (`../shared/BENCHMARKING.md`): random inputs; each kernel's output checked against the
//! f64 CPU reference first (a kernel that fails is recorded with `"passed": false` and not
//! timed); then warm-up launches and `REPS` samples, each a 256 MiB write (the L2 flushed)
//! followed by one launch between two CUDA events; the median, 10th and 90th percentiles. GB/s
//! count each input read once and each output written once. The copy ceiling is a
//! device-to-device copy (`cuMemcpyDtoDAsync`) timed the same way, bytes read plus written.
//!
//! `user_gemm` (`C = gelu(A B + bias)`, bf16, 4096^3 and 8192^3) records TFLOP/s (`2 m n k`
//! flops) beside its GB/s; its output is checked at the matrix edges and 20,000 sampled
//! elements (the whole f64 reference of 8192^3 would take the CPU too long).
//!
//! `attention_fwd` (the crate's prefix-LM mask, `gpukern:user`, and the library's causal instance,
//! `gpukern:causal`, bf16 4x4096x16x128, the prefix a quarter of the sequence) records TFLOP/s
//! (`4 d` per kept pair) with keys `mask` and `prefix`; its check runs on a smaller ragged case.
//! `attention_bwd`, the backward on the same operands (the custom mask's own kernels by the plan,
//! `gpukern:user`, and on its `mma.sync` rung, `gpukern:user-flash`; the library's causal
//! backward, `gpukern:causal`), records 2.5 times the forward's flops.
//!
//! `cargo run -p user-kernels --release --bin bench -- OUT.jsonl [--quick | --simulator] [--attention]`

use std::error::Error;
use std::io::Write;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, sys::CUevent_flags};
use gpukern::{DeviceVec, Gpu, Module, bf16};
use user_kernels::{KERNELS, reference};

type Res<T> = Result<T, Box<dyn Error>>;

/// Timed samples per measurement.
const REPS: usize = 40;
/// Untimed launches first.
const WARMUP: usize = 5;
/// Floats of the L2 flush: 256 MiB, over four times the H200's L2.
const FLUSH_FLOATS: usize = 64 << 20;

/// What every record of the run shares.
struct Run {
    gpu: String,
    driver: String,
    git_rev: String,
    out: std::fs::File,
}

/// What a record measures: the kernel, the implementation, the shape and the element type.
#[derive(Clone, Copy)]
struct Id<'a> {
    kernel: &'a str,
    imp: &'a str,
    shape: &'a str,
    dtype: &'a str,
}

/// One measurement's statistics, in milliseconds.
struct Stats {
    median: f64,
    p10: f64,
    p90: f64,
}

impl Stats {
    fn of(mut times: Vec<f64>) -> Stats {
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        Stats {
            median: at(0.5),
            p10: at(0.1),
            p90: at(0.9),
        }
    }
}

impl Run {
    /// Writes one record: `fields` are `"key": value` pairs already in JSON.
    fn record(&mut self, id: Id, fields: &[(&str, String)]) -> Res<()> {
        let Id {
            kernel,
            imp,
            shape,
            dtype,
        } = id;
        let mut line = format!(
            "{{\"kernel\": \"{kernel}\", \"impl\": \"{imp}\", \"shape\": \"{shape}\", \"dtype\": \"{dtype}\", \
             \"gpu\": \"{}\", \"driver\": \"{}\", \"git_rev\": \"{}\"",
            self.gpu, self.driver, self.git_rev
        );
        for (k, v) in fields {
            line.push_str(&format!(", \"{k}\": {v}"));
        }
        line.push('}');
        println!("{line}");
        writeln!(self.out, "{line}")?;
        Ok(())
    }

    /// The record of a timed kernel: its statistics, GB/s from `bytes`, its error.
    fn timed(&mut self, id: Id, stats: &Stats, bytes: f64, rel_err: f64) -> Res<()> {
        self.timed_flops(id, stats, bytes, None, rel_err)
    }

    /// [`Run::timed`] with TFLOP/s from `flops` where the kernel has a flop count.
    fn timed_flops(
        &mut self,
        id: Id,
        stats: &Stats,
        bytes: f64,
        flops: Option<f64>,
        rel_err: f64,
    ) -> Res<()> {
        self.timed_with(id, stats, bytes, flops, Some(rel_err), &[])
    }

    /// [`Run::timed_flops`] with more fields (`"key": value` pairs already in JSON), the error
    /// `null` where the timed output was not itself compared.
    fn timed_with(
        &mut self,
        id: Id,
        stats: &Stats,
        bytes: f64,
        flops: Option<f64>,
        rel_err: Option<f64>,
        extra: &[(&str, String)],
    ) -> Res<()> {
        let gbps = bytes / (stats.median * 1e-3) / 1e9;
        let tflops = flops.map_or("null".into(), |f| {
            format!("{:.1}", f / (stats.median * 1e-3) / 1e12)
        });
        let mut fields = vec![
            ("median_ms", format!("{:.6}", stats.median)),
            ("p10_ms", format!("{:.6}", stats.p10)),
            ("p90_ms", format!("{:.6}", stats.p90)),
            ("gbps", format!("{gbps:.1}")),
            ("tflops", tflops),
            ("bytes", format!("{bytes:.0}")),
            ("rel_err", rel_err.map_or("null".into(), |e| format!("{e:.3e}"))),
            ("passed", "true".into()),
            ("reps", REPS.to_string()),
        ];
        fields.extend(extra.iter().cloned());
        self.record(id, &fields)
    }
}

/// `launch` timed on `gpu`'s stream: warm-ups, then `REPS` samples of (flush, event, launch,
/// event).
fn time(
    gpu: &Gpu,
    flush: &mut DeviceVec<f32>,
    mut launch: impl FnMut() -> gpukern::Result<()>,
) -> Res<Stats> {
    for _ in 0..WARMUP {
        launch()?;
    }
    let mut times = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        gpu.increment_by_one(flush)?;
        let start = gpu.record()?;
        launch()?;
        let end = gpu.record()?;
        times.push(start.elapsed_ms(&end)?);
    }
    Ok(Stats::of(times))
}

/// A deterministic pseudo-random stream (xorshift).
fn noise(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

fn main() -> Res<()> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: bench OUT.jsonl [--quick | --simulator] [--attention]")?;
    let quick = std::env::args().any(|a| a == "--quick");
    // `--simulator`: the same checks and records on tiny shapes in the CPU simulator (its times
    // mean nothing; it tests this program where there is no GPU).
    let simulated = std::env::args().any(|a| a == "--simulator");
    let gpu = if simulated { Gpu::simulator() } else { Gpu::new(0)? };
    let module = gpu.load(&KERNELS)?;
    let mut run = Run {
        gpu: gpu.describe(),
        driver: std::env::var("GPUKERN_DRIVER").unwrap_or_else(|_| "unknown".into()),
        // The commit the caller names (`GPUKERN_GIT_REV`, as the Python peers read it), else the
        // HEAD when this binary was built (which misnames a tree built before its commit).
        git_rev: std::env::var("GPUKERN_GIT_REV")
            .unwrap_or_else(|_| option_env!("USER_KERNELS_GIT_REV").unwrap_or("unknown").into()),
        out: std::fs::File::create(&path)?,
    };
    let (side, bytes) = match (simulated, quick) {
        (true, _) => (64, 1 << 14),
        (false, true) => (2048, 1 << 24),
        (false, false) => (8192, 1 << 28),
    };
    let mut flush = gpu.zeros_of::<f32>(if simulated { 1 << 10 } else { FLUSH_FLOATS })?;
    if !simulated {
        copy_ceiling(&mut run, if quick { 1 << 22 } else { 1 << 26 })?;
    }
    // `--attention`: the attention row alone (with the copy ceiling).
    let attention_only = std::env::args().any(|a| a == "--attention");
    let gemm_shapes: &[usize] = match (simulated, quick, attention_only) {
        (_, _, true) => &[],
        (true, _, _) => &[128],
        (false, true, _) => &[2048],
        (false, false, _) => &[4096, 8192],
    };
    if !attention_only {
        gelu(&mut run, &module, &mut flush, side, side)?;
        stencil(&mut run, &module, &mut flush, side, side)?;
        histogram(&mut run, &module, &mut flush, bytes)?;
    }
    for &side in gemm_shapes {
        let (m, n, k) = if simulated {
            (side, 2 * side, side)
        } else {
            (side, side, side)
        };
        gemm(&mut run, &module, &mut flush, (m, n, k))?;
    }
    let attention_dims = match (simulated, quick) {
        (true, _) => [1, 130, 2, 64],
        (false, true) => [2, 2048, 16, 128],
        (false, false) => [4, 4096, 16, 128],
    };
    prefix_lm(&mut run, &gpu, &mut flush, attention_dims, attention_dims[1] / 4)?;
    Ok(())
}

/// Attention forward and backward with the crate's own mask ([`fast_kernels::PrefixLm`] through
/// `AttentionMask::Custom`, `gpukern:user`) at `[b, s, h, d]` (bf16, `q_len == kv_len`), and the
/// library's causal instance on the same operands (`gpukern:causal`: what the mask costs beside
/// the library's own). The custom mask's kernels are checked first against gpukern's f64 CPU
/// reference with the mask written out, on a ragged case through the same plan (`checked_on`,
/// its worst error over the tolerance `check_ratio`: the whole reference at this shape would take
/// the CPU minutes); the causal instance is the library's, checked by its own trials. TFLOP/s
/// count `4 d` per (query, key) pair the mask keeps (FlexAttention's count).
fn prefix_lm(
    run: &mut Run,
    gpu: &Gpu,
    flush: &mut DeviceVec<f32>,
    [b, s, h, d]: [usize; 4],
    prefix: usize,
) -> Res<()> {
    use gpukern::{AttentionAlgorithm, AttentionMask, AttentionOptions, AttentionTensor, CustomMask};
    use user_kernels::prefix_lm::{PREFIX_LM, PrefixCase, prefix_lm_backward_check, prefix_lm_check};
    let shape = format!("{b}x{s}x{h}x{d}");
    let checked = if gpu.is_simulator() {
        [1, 70, 90, 2, 1, d]
    } else {
        [1, 1000, 1100, 8, 2, d]
    };
    let ratio = prefix_lm_check::<bf16>(
        gpu,
        PrefixCase::new(checked, 300.min(checked[1] / 2)),
        AttentionAlgorithm::Auto,
        29,
    )?;
    let extra = |mask: &str| check_keys(mask, prefix, checked, ratio);
    let id = user("attention_fwd", &shape, "bf16");
    if ratio > 1.0 {
        return failed(run, id, ratio);
    }
    let mut r = noise(31);
    let mut random = || -> gpukern::Result<DeviceVec<bf16>> {
        let data: Vec<bf16> = (0..b * s * h * d)
            .map(|_| bf16::from_f32((r() % 2001) as f32 / 1000.0 - 1.0))
            .collect();
        gpu.upload(&data)
    };
    let (q, k, v) = (random()?, random()?, random()?);
    let (qt, kt, vt) = (
        AttentionTensor::contiguous(&q, [b, s, h, d])?,
        AttentionTensor::contiguous(&k, [b, s, h, d])?,
        AttentionTensor::contiguous(&v, [b, s, h, d])?,
    );
    let mut out = gpu.zeros_of::<bf16>(b * s * h * d)?;
    let mut lse = gpu.zeros_of::<f32>(b * h * s)?;
    let bytes = (2 * 4 * b * s * h * d) as f64;
    // Row `i` keeps the keys below `max(prefix, i + 1)`.
    let pairs: usize = (0..s).map(|i| prefix.max(i + 1).min(s)).sum();
    let mask = CustomMask::new(&PREFIX_LM).int(prefix);
    let options = AttentionOptions {
        mask: AttentionMask::Custom(&mask),
        ..Default::default()
    };
    let stats = time(gpu, flush, || {
        gpu.attention_into(&qt, &kt, &vt, &options, &mut out, &mut lse)
    })?;
    let flops = 4.0 * (b * h * d * pairs) as f64;
    run.timed_with(id, &stats, bytes, Some(flops), None, &extra("prefix_lm"))?;
    // The same kernels on the persistent grid (`WgmmaPersistent`: a block per multiprocessor
    // walking the block tiles, what the causal instance runs up to 4096 keys), on Hopper.
    if gpu.has_wgmma() {
        let persistent = AttentionOptions {
            algorithm: AttentionAlgorithm::WgmmaPersistent,
            ..options
        };
        let stats = time(gpu, flush, || {
            gpu.attention_into(&qt, &kt, &vt, &persistent, &mut out, &mut lse)
        })?;
        let id = Id {
            imp: "gpukern:user-persistent",
            ..id
        };
        run.timed_with(id, &stats, bytes, Some(flops), None, &extra("prefix_lm"))?;
    }
    let causal = AttentionOptions {
        causal: true,
        ..Default::default()
    };
    let stats = time(gpu, flush, || {
        gpu.attention_into(&qt, &kt, &vt, &causal, &mut out, &mut lse)
    })?;
    let causal_pairs = s * (s + 1) / 2;
    run.timed_with(
        Id {
            imp: "gpukern:causal",
            ..id
        },
        &stats,
        bytes,
        Some(4.0 * (b * h * d * causal_pairs) as f64),
        None,
        &[("mask", "\"causal\"".into())],
    )?;

    // The backward with the same mask (the plan's choice, `gpukern:user`: on Hopper the mask's
    // own instances of the one-kernel rung, its type saying `KEY_ROWS_EXACT`), checked first on a
    // smaller ragged case, then its `mma.sync` rung forced (`gpukern:user-flash`) and the
    // library's causal backward (its one-kernel Hopper rung by default) on the same operands.
    // TFLOP/s count 2.5 times the forward's flops (FlashAttention's count).
    let backward_checked = if gpu.is_simulator() {
        [1, 70, 90, 2, 1, d]
    } else {
        [1, 300, 333, 4, 2, d]
    };
    let ratio = prefix_lm_backward_check::<bf16>(
        gpu,
        PrefixCase::new(backward_checked, 100.min(backward_checked[1] / 2)),
        AttentionAlgorithm::Auto,
        37,
    )?;
    let backward_extra = |mask: &str| check_keys(mask, prefix, backward_checked, ratio);
    let id = user("attention_bwd", &shape, "bf16");
    if ratio > 1.0 {
        return failed(run, id, ratio);
    }
    let d_out = random()?;
    let gt = AttentionTensor::contiguous(&d_out, [b, s, h, d])?;
    let (mut dq, mut dk, mut dv) = (
        gpu.zeros_of::<bf16>(b * s * h * d)?,
        gpu.zeros_of::<bf16>(b * s * h * d)?,
        gpu.zeros_of::<bf16>(b * s * h * d)?,
    );
    // `q`, `k`, `v`, `out`, `d_out` read, `dq`, `dk`, `dv` written, once each.
    let backward_bytes = (2 * 8 * b * s * h * d) as f64;
    let flash = AttentionOptions {
        algorithm: AttentionAlgorithm::Flash,
        ..options
    };
    for (imp, options, pairs, extra) in [
        ("gpukern:user", options, pairs, backward_extra("prefix_lm")),
        ("gpukern:user-flash", flash, pairs, backward_extra("prefix_lm")),
        (
            "gpukern:causal",
            causal,
            causal_pairs,
            vec![("mask", "\"causal\"".into())],
        ),
    ] {
        gpu.attention_into(&qt, &kt, &vt, &options, &mut out, &mut lse)?;
        let ot = AttentionTensor::contiguous(&out, [b, s, h, d])?;
        let stats = time(gpu, flush, || {
            gpu.attention_backward_into(&gt, &qt, &kt, &vt, &ot, &lse, &options, &mut dq, &mut dk, &mut dv)
        })?;
        let flops = 2.5 * 4.0 * (b * h * d * pairs) as f64;
        run.timed_with(
            Id { imp, ..id },
            &stats,
            backward_bytes,
            Some(flops),
            None,
            &extra,
        )?;
    }
    Ok(())
}

/// The keys of a custom mask's records: the mask, its prefix, the case its kernels were checked
/// on and the check's worst error over its tolerance.
fn check_keys(mask: &str, prefix: usize, checked: [usize; 6], ratio: f64) -> Vec<(&'static str, String)> {
    vec![
        ("mask", format!("\"{mask}\"")),
        ("prefix", prefix.to_string()),
        ("checked_on", format!("\"{checked:?}\"")),
        ("check_ratio", format!("{ratio:.3}")),
    ]
}

/// The device-to-device copy of `n` floats, through cudarc on its own stream (the same device
/// and process), timed with events after an L2 flush of its own; bytes read plus written.
fn copy_ceiling(run: &mut Run, n: usize) -> Res<()> {
    let ctx = CudaContext::new(0)?;
    let stream: Arc<CudaStream> = ctx.new_stream()?;
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let src = stream.clone_htod(&host)?;
    let mut dst = stream.alloc_zeros::<f32>(n)?;
    let flush_src = stream.alloc_zeros::<f32>(FLUSH_FLOATS)?;
    let mut flush_dst = stream.alloc_zeros::<f32>(FLUSH_FLOATS)?;
    stream.memcpy_dtod(&src, &mut dst)?;
    let shape = n.to_string();
    let id = Id {
        kernel: "copy",
        imp: "copy",
        shape: &shape,
        dtype: "f32",
    };
    let check = stream.clone_dtoh(&dst)?;
    let passed = check == host;
    if !passed {
        return run.record(id, &[("passed", "false".into())]);
    }
    for _ in 0..WARMUP {
        stream.memcpy_dtod(&src, &mut dst)?;
    }
    let mut times = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        stream.memcpy_dtod(&flush_src, &mut flush_dst)?;
        let start = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        let end = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        start.record(&stream)?;
        stream.memcpy_dtod(&src, &mut dst)?;
        end.record(&stream)?;
        times.push(f64::from(start.elapsed_ms(&end)?));
    }
    let stats = Stats::of(times);
    run.timed(id, &stats, 8.0 * n as f64, 0.0)
}

fn gelu(run: &mut Run, module: &Module, flush: &mut DeviceVec<f32>, rows: usize, cols: usize) -> Res<()> {
    let mut r = noise(21);
    let x: Vec<bf16> = (0..rows * cols)
        .map(|_| bf16::from_f32((r() % 8001) as f32 / 1000.0 - 4.0))
        .collect();
    let bias: Vec<f32> = (0..cols).map(|_| (r() % 1001) as f32 / 1000.0 - 0.5).collect();
    let gpu = module.gpu();
    let (xd, bd) = (gpu.upload(&x)?, gpu.upload(&bias)?);
    let mut yd = gpu.zeros_of::<bf16>(rows * cols)?;
    let want = reference::bias_gelu(&x, &bias, cols);
    let (atol, rtol) = reference::GELU_TOL;
    let shape = format!("{rows}x{cols}");
    let bytes = (4 * rows * cols + 4 * cols) as f64;
    // One sweep is the first launch (`gpukern:user`), the resident grid the second.
    for ((_, gelu), imp) in user_kernels::GELUS
        .into_iter()
        .zip(["gpukern:user", "gpukern:user-resident"])
    {
        let id = Id {
            imp,
            ..user("user_gelu", &shape, "bf16")
        };
        gelu(module, &xd, &bd, &mut yd, rows, cols)?;
        let got: Vec<f64> = yd.to_vec()?.iter().map(|v| f64::from(v.to_f32())).collect();
        let rel_err = reference::rel_err(got.iter().copied(), &want);
        if reference::worst_ratio(got.into_iter(), &want, atol, rtol) > 1.0 {
            failed(run, id, rel_err)?;
            continue;
        }
        let stats = time(&gpu, flush, || gelu(module, &xd, &bd, &mut yd, rows, cols))?;
        run.timed(id, &stats, bytes, rel_err)?;
    }
    Ok(())
}

fn stencil(run: &mut Run, module: &Module, flush: &mut DeviceVec<f32>, rows: usize, cols: usize) -> Res<()> {
    let mut r = noise(23);
    let x: Vec<f32> = (0..rows * cols)
        .map(|_| (r() % 100_000) as f32 / 50_000.0 - 1.0)
        .collect();
    let gpu = module.gpu();
    let xd = gpu.upload(&x)?;
    let want = reference::stencil(&x, rows, cols);
    let (atol, rtol) = reference::STENCIL_TOL;
    let shape = format!("{rows}x{cols}");
    // The shared tile is the first rung (`gpukern:user-tile`), the register strips the second,
    // the strips on a resident grid the third (plain stores, then evict-first stores: the
    // fastest, recorded as `gpukern:user`).
    for ((_, stencil), imp) in user_kernels::STENCILS.into_iter().zip([
        "gpukern:user-tile",
        "gpukern:user-columns",
        "gpukern:user-stream",
        "gpukern:user",
    ]) {
        let id = Id {
            kernel: "user_stencil",
            imp,
            shape: &shape,
            dtype: "f32",
        };
        let mut out = gpu.zeros_of::<f32>(rows * cols)?;
        stencil(module, &xd, &mut out, rows, cols)?;
        let got: Vec<f64> = out.to_vec()?.iter().map(|&v| f64::from(v)).collect();
        let rel_err = reference::rel_err(got.iter().copied(), &want);
        if reference::worst_ratio(got.into_iter(), &want, atol, rtol) > 1.0 {
            failed(run, id, rel_err)?;
            continue;
        }
        let stats = time(&gpu, flush, || stencil(module, &xd, &mut out, rows, cols))?;
        run.timed(id, &stats, (8 * rows * cols) as f64, rel_err)?;
    }
    Ok(())
}

fn histogram(run: &mut Run, module: &Module, flush: &mut DeviceVec<f32>, n: usize) -> Res<()> {
    let mut r = noise(29);
    let data: Vec<u8> = (0..n).map(|_| (r() >> 24) as u8).collect();
    let gpu = module.gpu();
    let dd = gpu.upload(&data)?;
    let mut counts = gpu.zeros_of::<u32>(256)?;
    let shape = format!("2^{}", n.trailing_zeros());
    let want = reference::histogram(&data);
    // Each rung under its own impl label; timed alone: the bins keep counting across launches,
    // which changes no traffic.
    // The banked rung, the fastest, is recorded as `gpukern:user`.
    let imps = [
        "gpukern:user-atomic",
        "gpukern:user-lanes",
        "gpukern:user-spread",
        "gpukern:user",
        "gpukern:user-banked2",
    ];
    for ((_, (histogram, add)), imp) in user_kernels::HISTOGRAMS.into_iter().zip(imps) {
        let id = Id {
            imp,
            ..user("user_histogram", &shape, "u8")
        };
        histogram(module, &dd, &mut counts)?;
        if counts.to_vec()? != want {
            failed(run, id, f64::NAN)?;
            continue;
        }
        let stats = time(&gpu, flush, || add(module, &dd, &mut counts))?;
        run.timed(id, &stats, n as f64, 0.0)?;
    }
    Ok(())
}

/// `C = gelu(A B + bias)`, bf16: checked at the edges and 20,000 sampled elements against the
/// f64 reference, then timed; TFLOP/s count `2 m n k`, GB/s each operand once.
fn gemm(
    run: &mut Run,
    module: &Module,
    flush: &mut DeviceVec<f32>,
    (m, n, k): (usize, usize, usize),
) -> Res<()> {
    let mut r = noise(31);
    let (a, b, bias) = reference::gemm_inputs(&mut r, (m, n, k));
    let gpu = module.gpu();
    let shape = if m == n && n == k {
        format!("{m}^3")
    } else {
        format!("{m}x{n}x{k}")
    };
    let id = user("user_gemm", &shape, "bf16");
    if !gpu.is_simulator() && !module.kernel_names().contains(&"gemm_bias_gelu") {
        eprintln!("user_gemm: the sm_90a module is not loaded on this GPU; not timed");
        return run.record(
            id,
            &[
                ("passed", "false".into()),
                ("error", "\"no sm_90a module\"".into()),
            ],
        );
    }
    let (ad, bd, biasd) = (gpu.upload(&a)?, gpu.upload(&b)?, gpu.upload(&bias)?);
    let mut cd = gpu.zeros_of::<bf16>(m * n)?;
    user_kernels::gemm_bias_gelu(module, &ad, &bd, &biasd, &mut cd, (m, n, k))?;
    let c = cd.to_vec()?;
    let points = reference::gemm_check_points((m, n), 20_000);
    let want = reference::gemm_bias_gelu_at(&a, &b, &bias, (m, n, k), &points);
    let got: Vec<f64> = points
        .iter()
        .map(|&(i, j)| f64::from(c[i * n + j].to_f32()))
        .collect();
    let rel_err = reference::rel_err(got.iter().copied(), &want);
    let (atol, rtol) = reference::GEMM_TOL;
    if reference::worst_ratio(got.into_iter(), &want, atol, rtol) > 1.0 {
        return failed(run, id, rel_err);
    }
    // The maps encoded and uploaded once, as a caller multiplying the same matrices keeps them.
    let operands = user_kernels::GemmOperands::new(module, &ad, &bd, (m, n, k))?;
    let stats = time(&gpu, flush, || operands.gemm_bias_gelu(module, &biasd, &mut cd))?;
    let bytes = (2 * (m * k + k * n + m * n) + 4 * n) as f64;
    let flops = 2.0 * (m * n * k) as f64;
    run.timed_flops(id, &stats, bytes, Some(flops), rel_err)
}

/// The [`Id`] of a user kernel's record.
fn user<'a>(kernel: &'a str, shape: &'a str, dtype: &'a str) -> Id<'a> {
    Id {
        kernel,
        imp: "gpukern:user",
        shape,
        dtype,
    }
}

/// The record of a kernel whose output failed its check: not timed.
fn failed(run: &mut Run, id: Id, rel_err: f64) -> Res<()> {
    eprintln!(
        "{} {}: the output differs from the CPU reference; not timed",
        id.kernel, id.shape
    );
    run.record(
        id,
        &[
            ("passed", "false".into()),
            ("rel_err", format!("\"{rel_err:e}\"")),
        ],
    )
}
