//! gpukern's benchmark suite: every kernel and variant at the shapes of BENCHMARKING.md, checked
//! against a reference before it is timed, next to the ceilings measured in the same run
//! (device-to-device copy bandwidth, cuBLAS sgemm fp32 and TF32), written as JSON Lines.
//!
//! ```text
//! cargo run --release --example bench -- --out bench/results/gpukern.jsonl [--quick] [--kernels add,matmul]
//! ```
//!
//! `bench/run.sh` runs this and `bench/peers.py` (PyTorch, Triton, Numba) on the GPU machine
//! and merges their output; `bench/report.py` turns it into BENCHMARKS.md. See bench/README.md.
//!
//! Layout: `timing` (CUDA events, wall clock), `record` (JSON Lines, progress, summary), `data`
//! (random inputs, CPU references), `suite` (the shapes and byte and flop models of
//! `bench/suite.json`, which the Python peers read too), then one module per kernel family.

#[path = "bench/attention.rs"]
mod attention;
#[path = "bench/attention_bwd.rs"]
mod attention_bwd;
#[path = "bench/attention_masks.rs"]
mod attention_masks;
#[path = "bench/cross_entropy.rs"]
mod cross_entropy;
#[path = "bench/data.rs"]
mod data;
#[path = "bench/decode_attention.rs"]
mod decode_attention;
#[path = "bench/graph.rs"]
mod graph;
#[path = "bench/llm_blocks.rs"]
mod llm_blocks;
#[path = "bench/matmul.rs"]
mod matmul;
#[path = "bench/matmul_decode.rs"]
mod matmul_decode;
#[path = "bench/matmul_fp8.rs"]
mod matmul_fp8;
#[path = "bench/matmul_grouped.rs"]
mod matmul_grouped;
#[path = "bench/matmul_half.rs"]
mod matmul_half;
#[path = "bench/memory.rs"]
mod memory;
#[path = "bench/norm.rs"]
mod norm;
#[path = "bench/overhead.rs"]
mod overhead;
#[path = "bench/provenance.rs"]
mod provenance;
#[path = "bench/record.rs"]
mod record;
#[path = "bench/reduce.rs"]
mod reduce;
#[path = "bench/sample.rs"]
mod sample;
#[path = "bench/softmax.rs"]
mod softmax;
#[path = "bench/suite.rs"]
mod suite;
#[path = "bench/timing.rs"]
mod timing;
#[path = "bench/transfer.rs"]
mod transfer;
#[path = "bench/transpose.rs"]
mod transpose;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, ValueEnum};
use cudarc::driver::{CudaContext, CudaStream};
use gpukern::ops::add::AddAlgorithm;
use gpukern::{Error, Gpu, MatmulAlgorithm};

use record::{Meta, Res, Sink};
use timing::{Budget, CleanPass, Flush, Timer};

/// Benchmarks gpukern's kernels against cuBLAS and the device-to-device copy on a CUDA GPU.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// JSON Lines file to write (one object per measurement); its folder is created.
    #[arg(long, default_value = "bench/results/gpukern.jsonl")]
    out: PathBuf,
    /// Only the smallest shape of each kernel, with short timing: a smoke test.
    #[arg(long)]
    quick: bool,
    /// Which measurements, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    kernels: Option<Vec<Suite>>,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Only these shapes, comma-separated as the records name them (`4096x4096x4096`,
    /// `8192x32768`); suites without such a shape run in full.
    #[arg(long, value_delimiter = ',')]
    shapes: Option<Vec<String>>,
    /// Also time every tiling of the fast matmul on every shape (`gpukern:fast/<tiling>`,
    /// `k` unsplit), beside the plan that `FastPlan::choose` picks.
    #[arg(long)]
    plans: bool,
    /// With `--plans`, only these forced plans, comma-separated as the records' `plan` key names
    /// them (`promoted-128x128,promoted-pair-128x128`), beside the plans chosen by shape (suites
    /// that read it: `matmul_fp8`).
    #[arg(long, value_delimiter = ',')]
    only_plans: Option<Vec<String>>,
    /// Measurements not started after this many seconds are recorded as skipped.
    #[arg(long, default_value_t = 240.0)]
    budget_s: f64,
}

/// One group of measurements; the names are the records' `kernel` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Suite {
    /// Device-to-device copy bandwidth (the memory-bound ceiling).
    #[value(name = "copy")]
    Copy,
    #[value(name = "add")]
    Add,
    #[value(name = "increment_by_one")]
    IncrementByOne,
    /// gpukern's matmul variants, cuBLAS fp32 and TF32.
    #[value(name = "matmul")]
    Matmul,
    #[value(name = "softmax")]
    Softmax,
    /// Wall time per tiny call through each layer.
    #[value(name = "launch_overhead")]
    LaunchOverhead,
    /// Matmul with host-device copies against device-resident data.
    #[value(name = "matmul_with_copies")]
    MatmulWithCopies,
    /// A replayed CUDA graph of 100 small kernels against 100 launches, per kernel.
    #[value(name = "graph_replay")]
    GraphReplay,
    /// Two or more GPUs: NCCL all-reduce bus bandwidth, data-parallel matmul scaling.
    #[value(name = "multi_gpu")]
    MultiGpu,
    /// Host-device copies of 256 MiB: pinned, staged, pageable.
    #[value(name = "transfer")]
    Transfer,
    /// The chunked matmul batch: copies alone, compute alone, one stream, three streams.
    #[value(name = "pipelined")]
    Pipelined,
    /// Sum of a vector, every reduction algorithm.
    #[value(name = "sum")]
    Sum,
    /// Index of the largest element of a vector.
    #[value(name = "argmax")]
    Argmax,
    /// Sums, maxima and argmaxes along each axis of a matrix (records `sum_axis`, `max_axis`,
    /// `argmax_axis`).
    #[value(name = "axis")]
    Axis,
    /// A matrix transposed, every transpose algorithm.
    #[value(name = "transpose")]
    Transpose,
    /// RMSNorm and LayerNorm (records `rms_norm`, `layer_norm`), f32 and bf16.
    #[value(name = "norm")]
    Norm,
    /// Cross-entropy per row and its mean (records `cross_entropy`, `cross_entropy_mean`).
    #[value(name = "cross-entropy")]
    CrossEntropy,
    /// bf16 and fp16 matmul (f32 sums) against cuBLAS `cublasGemmEx` of the same types.
    #[value(name = "matmul_half")]
    MatmulHalf,
    /// The residual add fused into RMSNorm, bf16 (record `residual_rms_norm`).
    #[value(name = "residual_norm")]
    ResidualNorm,
    /// SwiGLU and GeGLU, bf16 (records `swiglu`, `geglu`).
    #[value(name = "glu")]
    Glu,
    /// Rotary embedding of q and k in place, bf16 (record `rotary`).
    #[value(name = "rotary")]
    Rotary,
    /// Embedding gather, bf16 (record `embedding`).
    #[value(name = "embedding")]
    Embedding,
    /// The next token of each row of logits: greedy, temperature 1, t 0.8 with top-k 50 and
    /// top-p 0.9 (records `sample`).
    #[value(name = "sample")]
    Sample,
    /// Decode products `Y = X W^T`: m from 1 to 64 against a large bf16 weight (n x k).
    #[value(name = "matmul_decode")]
    MatmulDecode,
    /// The grouped (mixture-of-experts) product, bf16, and the dense product of the same flops.
    #[value(name = "matmul_grouped")]
    MatmulGrouped,
    /// FP8 E4M3 products, bf16 result: per-tensor, per-row and block scales, fast and promoted
    /// accumulation (records `matmul_fp8`).
    #[value(name = "matmul_fp8")]
    MatmulFp8,
    /// Attention forward, bf16, causal and not (records `attention_fwd`).
    #[value(name = "attention")]
    Attention,
    /// Attention backward, bf16, causal and not (records `attention_bwd`).
    #[value(name = "attention_bwd")]
    AttentionBwd,
    /// Attention forward with masks (sliding window, documents, ALiBi, soft cap), bf16 (records
    /// `attention_fwd` with the key `mask`).
    #[value(name = "attention_masks")]
    AttentionMasks,
    /// Decode attention over a paged bf16 KV cache, tiles, split and warp rungs (records
    /// `decode_attention`).
    #[value(name = "decode_attention")]
    DecodeAttention,
}

impl Suite {
    const ALL: [Suite; 30] = [
        Suite::Copy,
        Suite::Add,
        Suite::IncrementByOne,
        Suite::Matmul,
        Suite::Softmax,
        Suite::LaunchOverhead,
        Suite::MatmulWithCopies,
        Suite::GraphReplay,
        Suite::MultiGpu,
        Suite::Transfer,
        Suite::Pipelined,
        Suite::Sum,
        Suite::Argmax,
        Suite::Axis,
        Suite::Transpose,
        Suite::Norm,
        Suite::CrossEntropy,
        Suite::MatmulHalf,
        Suite::ResidualNorm,
        Suite::Glu,
        Suite::Rotary,
        Suite::Embedding,
        Suite::Sample,
        Suite::MatmulDecode,
        Suite::MatmulGrouped,
        Suite::MatmulFp8,
        Suite::Attention,
        Suite::AttentionBwd,
        Suite::AttentionMasks,
        Suite::DecodeAttention,
    ];

    /// Records this suite writes.
    fn planned(self, quick: bool, plans: bool) -> u64 {
        let n = match self {
            Suite::Copy => memory::sizes(quick).len(),
            Suite::Add | Suite::IncrementByOne => memory::sizes(quick).len() * AddAlgorithm::ALL.len(),
            // + cuBLAS fp32 and TF32, + `gpukern:tf32_wgmma` (counted where it may not run).
            Suite::Matmul => matmul::shapes(quick).len() * (MatmulAlgorithm::ALL.len() + 3),
            Suite::Softmax => softmax::planned(quick, plans),
            Suite::LaunchOverhead => overhead::LAUNCH_RECORDS as usize,
            Suite::MatmulWithCopies => overhead::copies_shapes(quick).len() * 2,
            Suite::GraphReplay => graph::GRAPH_RECORDS as usize,
            Suite::MultiGpu => graph::MULTI_RECORDS as usize,
            Suite::Transfer => transfer::TRANSFER_RECORDS,
            Suite::Pipelined => transfer::PIPELINED_RECORDS,
            Suite::Sum => reduce::sizes(quick).len() * gpukern::ReduceAlgorithm::ALL.len(),
            Suite::Argmax => reduce::sizes(quick).len() * gpukern::ArgmaxAlgorithm::ALL.len(),
            Suite::Axis => reduce::axis_shapes(quick).len() * reduce::AXIS_RECORDS_PER_SHAPE,
            Suite::Transpose => transpose::shapes(quick).len() * gpukern::TransposeAlgorithm::ALL.len(),
            Suite::Norm => norm::planned(quick, plans),
            Suite::CrossEntropy => cross_entropy::planned(quick),
            Suite::MatmulHalf => matmul_half::planned(quick, plans),
            Suite::ResidualNorm => llm_blocks::residual_planned(quick),
            Suite::Glu => llm_blocks::glu_planned(quick),
            Suite::Rotary => llm_blocks::rotary_planned(quick),
            Suite::Embedding => llm_blocks::embedding_planned(quick),
            Suite::Sample => sample::planned(quick),
            Suite::MatmulDecode => matmul_decode::planned(quick, plans),
            Suite::MatmulGrouped => matmul_grouped::planned(quick, plans),
            Suite::MatmulFp8 => matmul_fp8::planned(quick, plans),
            Suite::Attention => attention::planned(quick),
            Suite::AttentionBwd => attention_bwd::planned(quick),
            Suite::AttentionMasks => attention_masks::planned(quick),
            Suite::DecodeAttention => decode_attention::planned(quick, plans),
        };
        n as u64
    }

    fn run(self, bench: &mut Bench, sink: &mut Sink) -> Res<()> {
        match self {
            Suite::Copy => memory::copy(bench, sink),
            Suite::Add => memory::add(bench, sink),
            Suite::IncrementByOne => memory::increment_by_one(bench, sink),
            Suite::Matmul => matmul::matmul(bench, sink),
            Suite::Softmax => softmax::softmax(bench, sink),
            Suite::LaunchOverhead => overhead::launch_overhead(bench, sink),
            Suite::MatmulWithCopies => overhead::matmul_with_copies(bench, sink),
            Suite::GraphReplay => graph::graph_replay(bench, sink),
            Suite::MultiGpu => graph::multi_gpu(bench, sink),
            Suite::Transfer => transfer::transfer(bench, sink),
            Suite::Pipelined => transfer::pipelined(bench, sink),
            Suite::Sum => reduce::sum(bench, sink),
            Suite::Argmax => reduce::argmax(bench, sink),
            Suite::Axis => reduce::axis(bench, sink),
            Suite::Transpose => transpose::transpose(bench, sink),
            Suite::Norm => norm::norm(bench, sink),
            Suite::CrossEntropy => cross_entropy::cross_entropy(bench, sink),
            Suite::MatmulHalf => matmul_half::matmul_half(bench, sink),
            Suite::ResidualNorm => llm_blocks::residual_norm(bench, sink),
            Suite::Glu => llm_blocks::glu(bench, sink),
            Suite::Rotary => llm_blocks::rotary(bench, sink),
            Suite::Embedding => llm_blocks::embedding(bench, sink),
            Suite::Sample => sample::sample(bench, sink),
            Suite::MatmulDecode => matmul_decode::matmul_decode(bench, sink),
            Suite::MatmulGrouped => matmul_grouped::matmul_grouped(bench, sink),
            Suite::MatmulFp8 => matmul_fp8::matmul_fp8(bench, sink),
            Suite::Attention => attention::attention(bench, sink),
            Suite::AttentionBwd => attention_bwd::attention_bwd(bench, sink),
            Suite::AttentionMasks => attention_masks::attention_masks(bench, sink),
            Suite::DecodeAttention => decode_attention::decode_attention(bench, sink),
        }
    }
}

/// What every measurement needs: the Gpu, its cudarc context and stream, the event timer.
pub struct Bench {
    pub gpu: Gpu,
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub timer: Timer,
    pub quick: bool,
    /// `--shapes`: the shape names to measure (all when `None`).
    shapes: Option<Vec<String>>,
    /// `--plans`: time every fast-matmul tiling (and every warp-specialised half tile) too.
    pub plans: bool,
    /// `--only-plans`: the forced plans `--plans` times (all when `None`).
    only_plans: Option<Vec<String>>,
    blas: Option<Result<Arc<matmul::Blas>, String>>,
}

impl Bench {
    /// Whether `--only-plans` lets the forced plan named `name` be timed.
    pub fn wants_plan(&self, name: &str) -> bool {
        self.only_plans
            .as_ref()
            .is_none_or(|s| s.iter().any(|x| x == name))
    }

    /// Whether `--shapes` lets the shape named `name` be measured.
    pub fn wants(&self, name: &str) -> bool {
        self.shapes.as_ref().is_none_or(|s| s.iter().any(|x| x == name))
    }

    /// cuBLAS on the Gpu's stream, loaded on first use (an error if the library is missing).
    pub fn blas(&mut self) -> Result<Arc<matmul::Blas>, String> {
        if self.blas.is_none() {
            let loaded = record::catch(|| matmul::Blas::new(&self.stream))
                .map(Arc::new)
                .map_err(|e| e.to_string());
            self.blas = Some(loaded);
        }
        self.blas
            .clone()
            .unwrap_or_else(|| Err("cuBLAS was not loaded".to_string()))
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let gpu = match Gpu::new(args.device) {
        Ok(gpu) => gpu,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            eprintln!("bench: no CUDA device: {e}");
            eprintln!("bench: the benchmark measures a GPU and there is none here; nothing was written.");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("bench: cannot use CUDA device {}: {e}", args.device);
            return ExitCode::from(2);
        }
    };
    match run(&args, gpu) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// [`Flush::Clean`]'s read-only pass: gpukern's sum over 256 MiB of f32 into a device scalar, on
/// the Gpu's stream (no synchronisation), which evicts L2's dirty lines by writing them back.
fn clean_pass(gpu: &Gpu) -> Res<CleanPass> {
    let gpu = gpu.clone();
    let x = gpu.zeros(64 << 20)?;
    let mut out = gpu.zeros(1)?;
    Ok(Box::new(move || {
        Ok(gpu.sum_into_with(&x, &mut out, gpukern::ReduceAlgorithm::default())?)
    }))
}

fn run(args: &Args, gpu: Gpu) -> Res<()> {
    // SAFETY: the benchmark queues everything (gpukern's calls, cuBLAS, copies, timing events)
    // on this one stream and creates no other, so nothing needs cross-stream ordering.
    let (ctx, stream) = unsafe { gpu.cuda_stream() }
        .map(|(c, s)| (c.clone(), s.clone()))
        .ok_or("the Gpu is not a CUDA device")?;
    let meta = Meta {
        gpu: ctx.name()?,
        driver: record::driver_version(),
        git_rev: record::git_rev(),
        date: record::utc_now(),
    };
    let suites = args.kernels.clone().unwrap_or_else(|| Suite::ALL.to_vec());
    let planned = suites.iter().map(|s| s.planned(args.quick, args.plans)).sum();
    let budget = if args.quick { Budget::QUICK } else { Budget::FULL };
    let clean = match Flush::from_env()? {
        Flush::Copy => None,
        Flush::Clean => Some(clean_pass(&gpu)?),
    };
    let timer = Timer::new(&ctx, &stream, budget, clean)?;
    let mut sink = Sink::create(&args.out, meta.clone(), planned, args.budget_s)?;
    sink.note(&format!(
        "bench: {} | driver {} | rev {} | {} measurements{} -> {}",
        gpu.describe(),
        meta.driver,
        meta.git_rev,
        planned,
        if args.quick { " (quick)" } else { "" },
        args.out.display()
    ));
    let mut bench = Bench {
        gpu,
        ctx,
        stream,
        timer,
        quick: args.quick,
        shapes: args.shapes.clone(),
        plans: args.plans,
        only_plans: args.only_plans.clone(),
        blas: None,
    };
    for suite in suites {
        // A suite that cannot go on (e.g. its setup failed) is reported; the next one runs.
        if let Err(e) = record::catch(|| suite.run(&mut bench, &mut sink)) {
            sink.note(&format!("bench: {suite:?} stopped: {e}"));
        }
    }
    let records = sink.finish();
    println!("{}", record::summary(&records));
    let not_timed = records.iter().filter(|r| r.median_ms.is_none()).count();
    println!(
        "{} records written to {} ({} not timed: failed check, error or skipped)",
        records.len(),
        args.out.display(),
        not_timed
    );
    Ok(())
}
