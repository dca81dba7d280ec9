//! A Llama-style decoder in bf16 written only with gpukern's public API: token embedding, blocks
//! of (RMSNorm, Q/K/V projections, RoPE on q and k, attention with a paged KV cache, output
//! projection, residual add fused into the next RMSNorm, SwiGLU MLP, residual), the final norm,
//! the LM head and sampling.
//!
//! The prompts (`--batch` of `--prompt-len` tokens, drawn from `--seed`) run through a prefill:
//! tensor-core GEMMs over all their tokens, causal prefill attention, the KV caches filled. Then
//! a decode loop of one token per sequence: the decode step (GEMVs, the new key and value
//! written at positions reserved on the host, decode attention reading the lengths on the
//! device, the logits and a greedy pick) is captured once in a CUDA graph and replayed, with no
//! allocation in the step; between replays only the next tokens, their positions and the
//! caches' reservations are copied up. It prints the prefill tokens/s, the decode ms/token and
//! the tokens.
//!
//! `--config tiny` (the default) checks itself against a CPU reference decoder (f32 on the same
//! bf16 weights, rounded where the device stores bf16, `examples/llama/reference.rs`): the
//! largest logit error against a tolerance derived from the bf16 roundings, and whether the
//! greedy tokens agree. It runs in the CPU simulator when there is no GPU.
//! `--config llama3-8b-4layer` is Llama 3 8B's layer shape (hidden 4096, 32 heads, 8 kv heads,
//! head dim 128, MLP 14336) with 4 layers and a vocabulary of 32000.
//!
//! Run: `cargo run --release --example llama [-- --config tiny|llama3-8b-4layer --batch B
//! --prompt-len P --new-tokens N --seed S --temperature T --weights PATH --write-weights PATH
//! --dump-logits PATH --record PATH --reps R]`

mod common;
#[path = "llama/config.rs"]
mod config;
#[path = "llama/model.rs"]
mod model;
#[path = "llama/output.rs"]
mod output;
#[path = "bench/provenance.rs"]
mod provenance;
#[path = "llama/reference.rs"]
mod reference;
#[path = "llama/weights.rs"]
mod weights;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use common::{Args, BoxError};
use gpukern::{Gpu, SampleOptions};

use config::Config;
use model::Model;
use output::{Run, Timing};
use reference::Reference;
use weights::Weights;

/// Prompts and new tokens of the default run: seconds in the simulator.
const BATCH: usize = 2;
const PROMPT_LEN: usize = 12;
const NEW_TOKENS: usize = 6;
/// Timed prefills on a GPU (each on fresh caches; the simulator times one).
const REPS: usize = 3;
/// Back-to-back graph replays timed after the decode loop (on a GPU).
const REPLAYS: usize = 20;

fn main() -> ExitCode {
    common::run(llama)
}

fn llama() -> Result<(), BoxError> {
    let args = Args::parse(
        "llama: a Llama-style decoder on gpukern's kernels (prefill, then a decode loop replayed as a CUDA graph)",
        &[
            (
                "config",
                "tiny (default; checked against the CPU reference) or llama3-8b-4layer",
            ),
            ("batch", "sequences (default 2)"),
            ("prompt-len", "tokens of each prompt (default 12)"),
            ("new-tokens", "tokens generated per sequence (default 6)"),
            ("seed", "seed of the weights and the prompts (default 0)"),
            ("temperature", "sampling temperature (default 0: greedy)"),
            (
                "weights",
                "read the weights from this safetensors file instead of generating them",
            ),
            (
                "write-weights",
                "write the weights to this safetensors file (torch's names)",
            ),
            (
                "dump-logits",
                "write every step's logits (.npy) and the tokens (.json) for bench/peers_llama.py",
            ),
            (
                "record",
                "append the decoder_prefill and decoder_decode records (JSON Lines) to this file",
            ),
            (
                "reps",
                "timed prefills, the median is reported (default 3; 1 in the simulator)",
            ),
        ],
    )?;
    let gpu = common::device()?;
    let c = Config::named(args.string("config").unwrap_or("tiny"))?;
    let batch = args.usize("batch")?.unwrap_or(BATCH);
    let len = args.usize("prompt-len")?.unwrap_or(PROMPT_LEN);
    let new = args.usize("new-tokens")?.unwrap_or(NEW_TOKENS);
    let seed: u64 = args.parsed("seed")?.unwrap_or(0);
    let temperature: f32 = args.parsed("temperature")?.unwrap_or(0.0);
    let reps = args.reps(gpu, REPS)?;
    let check = c == Config::TINY;
    let dump: Option<PathBuf> = args.parsed("dump-logits")?;
    println!(
        "{}: hidden {}, {} heads ({} kv) of {}, MLP {}, {} layers, vocabulary {}; batch {batch}, prompt {len}, {new} new tokens",
        c.name, c.hidden, c.heads, c.kv_heads, c.head_dim, c.mlp, c.layers, c.vocab
    );

    let weights = match args.parsed::<PathBuf>("weights")? {
        Some(path) => Weights::read(&c, &path)?,
        None => Weights::generate(&c, seed),
    };
    if let Some(path) = args.parsed::<PathBuf>("write-weights")? {
        weights.write(&c, &path)?;
        println!("wrote the weights to {}", path.display());
    }
    let model = Model::upload(gpu, c, &weights)?;
    let prompt = output::prompt(seed, batch, len, c.vocab);
    let options = SampleOptions {
        temperature,
        seed,
        ..SampleOptions::default()
    };
    let keep_logits = check || dump.is_some();
    let run = generate(
        gpu,
        &model,
        &prompt,
        (batch, len, new),
        &options,
        keep_logits,
        reps,
    )?;

    run.print(batch, len);
    if let Some(path) = &dump {
        run.dump(path, &c, &prompt, (batch, len))?;
    }
    if let Some(path) = args.parsed::<PathBuf>("record")? {
        run.record(&path, gpu, &c, (batch, len, new))?;
        println!("records appended to {}", path.display());
    }
    if check {
        let reference = Reference::new(c, &weights);
        run.check(&reference, &c, &prompt, (batch, len), temperature == 0.0)?;
    } else {
        println!("(no CPU check at this size: compare with torch, bench/peers_llama.py --check)");
    }
    if gpu.is_simulator() {
        println!("(simulator times measure the CPU running each GPU thread, not a GPU)");
    }
    Ok(())
}

/// The prefill (timed `reps` times on fresh caches) and the decode loop (a graph replayed per
/// step); the tokens, the timings and, when `keep_logits`, every step's logits.
fn generate(
    gpu: &Gpu,
    model: &Model,
    prompt: &[i32],
    (batch, len, new): (usize, usize, usize),
    options: &SampleOptions,
    keep_logits: bool,
    reps: usize,
) -> Result<Run, BoxError> {
    let greedy = options.temperature == 0.0;
    let mut prefill_ms = Vec::with_capacity(reps);
    let mut buffers = model.prefill_buffers(gpu, (batch, len))?;
    let mut prefilled = None;
    for _ in 0..reps.max(1) {
        let mut caches = model.kv_caches(gpu, batch, len + new)?;
        let mut first = gpu.zeros_of::<i32>(batch)?;
        gpu.synchronize()?;
        let start = Instant::now();
        model.prefill(gpu, &mut buffers, prompt, &mut caches)?;
        gpu.sample_into(&buffers.logits, options, &mut first)?;
        let first = first.to_vec()?;
        prefill_ms.push(start.elapsed().as_secs_f64() * 1e3);
        prefilled = Some((caches, first));
    }
    let (caches, first) = prefilled.ok_or("no prefill ran")?;
    let logits = buffers.logits;
    let mut logs = Vec::new();
    if keep_logits {
        logs.push(logits.as_vec().to_vec()?);
    }
    let mut tokens = vec![first];

    // The decode step's inputs for its first replay, then the capture.
    let mut state = model.step_state(gpu, caches, &tokens[0], &vec![len as i32; batch])?;
    reserve(gpu, &mut state.caches)?;
    let mut graph = model.capture_step(gpu, state, greedy)?;
    let mut step_ms = Vec::with_capacity(new.saturating_sub(1));
    for step in 1..new {
        let start = Instant::now();
        if step > 1 {
            let s = graph.buffers_mut();
            s.ids.update(&tokens[step - 1])?;
            s.positions.update(&vec![(len + step - 1) as i32; batch])?;
            reserve(gpu, &mut s.caches)?;
        }
        graph.launch()?;
        let s = graph.buffers_mut();
        if !greedy {
            let options = SampleOptions {
                offset: step as u64,
                ..*options
            };
            gpu.sample_into(&s.logits, &options, &mut s.tokens)?;
        }
        let next = s.tokens.to_vec()?;
        step_ms.push(start.elapsed().as_secs_f64() * 1e3);
        if keep_logits {
            logs.push(s.logits.as_vec().to_vec()?);
        }
        tokens.push(next);
    }
    // The replay alone, back to back (the same step again: its key and value rewritten at the
    // same reserved positions), for the share of a step spent on the host between replays.
    let replay_ms = if step_ms.is_empty() {
        None
    } else {
        let replays = if gpu.is_simulator() { 1 } else { REPLAYS };
        gpu.synchronize()?;
        let start = Instant::now();
        for _ in 0..replays {
            graph.launch()?;
        }
        gpu.synchronize()?;
        Some(start.elapsed().as_secs_f64() * 1e3 / replays as f64)
    };
    Ok(Run {
        tokens,
        logits: logs,
        timing: Timing {
            prefill_ms: common::median(prefill_ms),
            reps: reps.max(1),
            step_ms: (!step_ms.is_empty()).then(|| common::median(step_ms.clone())),
            steps: step_ms.len(),
            replay_ms,
        },
        vocab: model.vocab(),
    })
}

/// One more token reserved in every block's cache: on the first from the host, on the others
/// copied from it on the device (the blocks' caches hold the same lengths).
fn reserve(gpu: &Gpu, caches: &mut [gpukern::PagedKvCache<gpukern::bf16>]) -> gpukern::Result<()> {
    let Some((first, rest)) = caches.split_first_mut() else {
        return Ok(());
    };
    gpu.kv_cache_reserve(first, 1)?;
    rest.iter_mut()
        .try_for_each(|cache| gpu.kv_cache_reserve_as(cache, first))
}
