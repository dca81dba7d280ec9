//! What a run of the decoder gives: the prompts it drew, its tokens and timings printed, its
//! check against the CPU reference, its logits dumped for torch, its bench records.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use gpukern::Gpu;
use serde_json::json;

use crate::common::BoxError;
use crate::config::Config;
use crate::provenance::{driver_version, git_rev, utc_now};
use crate::reference::{Reference, roundings};

/// `batch x len` prompt tokens drawn from `seed` (the same prompts for the same seed here and
/// in `bench/peers_llama.py`, which reads them from the dumped tokens).
pub fn prompt(seed: u64, batch: usize, len: usize, vocab: usize) -> Vec<i32> {
    let mut x = seed ^ 0x7072_6F6D_7074;
    (0..batch * len)
        .map(|_| {
            // A 64-bit LCG (Knuth's MMIX constants); the high bits pick the token.
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) % vocab as u64) as i32
        })
        .collect()
}

/// The timings of a run.
pub struct Timing {
    /// Median wall time of a prefill (to the first tokens on the host), ms.
    pub prefill_ms: f64,
    /// Prefills timed.
    pub reps: usize,
    /// Median wall time of a decode step (inputs copied up, the graph replayed, the tokens
    /// read back), ms; `None` without a decode step.
    pub step_ms: Option<f64>,
    /// Decode steps timed.
    pub steps: usize,
    /// Mean time of the step's graph replayed back to back, without the host's work between
    /// steps, ms.
    pub replay_ms: Option<f64>,
}

/// A finished run.
pub struct Run {
    /// The new tokens, `[step][sequence]`: step 0 from the prefill's logits.
    pub tokens: Vec<Vec<i32>>,
    /// Each step's logits, `[step][sequence * vocab]` (kept for a check or a dump).
    pub logits: Vec<Vec<f32>>,
    /// The timings.
    pub timing: Timing,
    /// Tokens of the vocabulary.
    pub vocab: usize,
}

impl Run {
    /// Prints the rates and the tokens.
    pub fn print(&self, batch: usize, len: usize) {
        let t = &self.timing;
        println!(
            "prefill of {batch} x {len} tokens: {:.3} ms, {:.0} tokens/s (median of {})",
            t.prefill_ms,
            (batch * len) as f64 / (t.prefill_ms * 1e-3),
            t.reps
        );
        if let Some(ms) = t.step_ms {
            println!(
                "decode: {ms:.3} ms/token per sequence step, {:.0} tokens/s over the batch (median of {} graph replays)",
                batch as f64 / (ms * 1e-3),
                t.steps
            );
        }
        if let Some(ms) = t.replay_ms {
            println!("  of which the graph replayed alone, back to back: {ms:.3} ms");
        }
        for b in 0..batch {
            let seq: Vec<i32> = self.tokens.iter().map(|step| step[b]).collect();
            println!("  sequence {b}: {seq:?}");
        }
    }

    /// Checks every step's logits against the CPU reference fed the same tokens: the largest
    /// error against the tolerance `R 2^-8 rms(logits)` (R bf16 roundings between a token and
    /// its logits, [`roundings`]: the two sides round the same values at the same points, so a
    /// difference starts only where their f32 sums (in other orders, or the fused attention's
    /// probabilities rounded to bf16) round to neighbouring bf16, one unit in the last place
    /// (2^-8 relative) per rounding, the weights scaled for a gain of about 1); and, when
    /// `greedy`, that each token is the reference's argmax or within twice the measured error
    /// of it. (A decode step after a one-token prompt matches the reference to f32 rounding; the
    /// error comes from such neighbours, which the blocks after them amplify.)
    pub fn check(
        &self,
        reference: &Reference,
        c: &Config,
        prompt: &[i32],
        (batch, len): (usize, usize),
        greedy: bool,
    ) -> Result<(), BoxError> {
        let v = self.vocab;
        let (mut sum_sq, mut count) = (0f64, 0usize);
        // The largest error of each step (step 0: the prefill's logits); NaN stays NaN.
        let mut step_err = vec![0f64; self.logits.len()];
        let mut references = vec![Vec::new(); self.logits.len()];
        for b in 0..batch {
            let mut seq = reference.sequence();
            let mut logits = Vec::new();
            for p in 0..len {
                logits = reference.forward(&mut seq, prompt[b * len + p] as usize, p);
            }
            for (step, expect) in references.iter_mut().enumerate() {
                if step > 0 {
                    let token = self.tokens[step - 1][b] as usize;
                    logits = reference.forward(&mut seq, token, len + step - 1);
                }
                let got = &self.logits[step][b * v..(b + 1) * v];
                for (g, r) in got.iter().zip(&logits) {
                    let e = f64::from((g - r).abs());
                    if e.is_nan() || e > step_err[step] {
                        step_err[step] = if step_err[step].is_nan() { f64::NAN } else { e };
                    }
                    sum_sq += f64::from(r * r);
                    count += 1;
                }
                expect.push(logits.clone());
            }
        }
        let rms = (sum_sq / count.max(1) as f64).sqrt();
        let worst = |errs: &[f64]| {
            errs.iter().copied().fold(0f64, |m, e| {
                if e.is_nan() || m.is_nan() {
                    f64::NAN
                } else {
                    m.max(e)
                }
            })
        };
        let max_err = worst(&step_err);
        let decode_err = worst(step_err.get(1..).unwrap_or_default());
        let tol = roundings(c) as f64 * 2f64.powi(-8) * rms;
        println!(
            "CPU reference: largest logit error {max_err:.3e} (the prefill's {:.3e}, the decode \
             steps' {decode_err:.3e}) against a tolerance of {tol:.3e} ({} bf16 roundings x 2^-8 x \
             rms logit {rms:.3})",
            step_err[0],
            roundings(c)
        );
        if max_err.is_nan() || max_err > tol {
            return Err(
                format!("the logits differ from the CPU reference by {max_err:.3e} > {tol:.3e}").into(),
            );
        }
        if !greedy {
            return Ok(());
        }
        let (mut agree, mut total) = (0, 0);
        for (step, expect) in references.iter().enumerate() {
            for (b, r) in expect.iter().enumerate() {
                let best = (0..v).fold(0, |m, i| if r[i] > r[m] { i } else { m });
                let token = self.tokens[step][b] as usize;
                total += 1;
                if token == best {
                    agree += 1;
                } else if f64::from(r[best] - r[token]) > 2.0 * max_err {
                    return Err(format!(
                        "step {step}, sequence {b}: token {token}, the reference's argmax is {best} \
                         by a margin of {:.3e}",
                        r[best] - r[token]
                    )
                    .into());
                }
            }
        }
        println!(
            "greedy tokens: {agree} of {total} agree with the reference's argmax (the others within twice the logit error)"
        );
        Ok(())
    }

    /// Writes every step's logits to `path` (`.npy`, f32 `[steps, batch, vocab]`) and the
    /// prompts and tokens to `path` + `.json`.
    pub fn dump(
        &self,
        path: &Path,
        c: &Config,
        prompt: &[i32],
        (batch, len): (usize, usize),
    ) -> Result<(), BoxError> {
        let header = format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {batch}, {}), }}",
            self.logits.len(),
            self.vocab
        );
        let mut header = header.into_bytes();
        // The header padded with spaces to a multiple of 64 bytes, ending in a newline.
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(b' ');
        }
        header.push(b'\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend((header.len() as u16).to_le_bytes());
        bytes.extend(header);
        for step in &self.logits {
            bytes.extend(step.iter().flat_map(|x| x.to_le_bytes()));
        }
        std::fs::write(path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))?;
        let tokens = json!({
            "config": c.name,
            "batch": batch,
            "prompt_len": len,
            "prompt": prompt.chunks(len).collect::<Vec<_>>(),
            "tokens": self.tokens,
        });
        let json_path = format!("{}.json", path.display());
        std::fs::write(&json_path, tokens.to_string()).map_err(|e| format!("writing {json_path}: {e}"))?;
        println!(
            "logits written to {} and the tokens to {json_path}",
            path.display()
        );
        Ok(())
    }

    /// Appends the `decoder_prefill` and (with a decode step) `decoder_decode` records.
    pub fn record(
        &self,
        path: &Path,
        gpu: &Gpu,
        c: &Config,
        (batch, len, new): (usize, usize, usize),
    ) -> Result<(), BoxError> {
        let t = &self.timing;
        let shape = format!("{}:b{batch}:p{len}", c.name);
        let base = json!({
            "impl": "gpukern",
            "shape": shape,
            "dtype": "bf16",
            "gbps": null,
            "tflops": null,
            "rel_err": null,
            "config": c.name,
            "batch": batch,
            "prompt_len": len,
            "new_tokens": new,
            "layers": c.layers,
            "gpu": gpu.describe().split(" (").next().unwrap_or_default(),
            "driver": driver_version(),
            "git_rev": git_rev(),
            "date": utc_now(),
            "timer": "wall_clock",
        });
        let mut lines = Vec::new();
        let mut prefill = base.clone();
        prefill["kernel"] = json!("decoder_prefill");
        prefill["median_ms"] = json!(t.prefill_ms);
        prefill["tokens_per_s"] = json!((batch * len) as f64 / (t.prefill_ms * 1e-3));
        prefill["reps"] = json!(t.reps);
        prefill["includes"] = json!("embedding to the first sampled tokens on the host");
        lines.push(prefill);
        if let Some(ms) = t.step_ms {
            let mut decode = base;
            decode["kernel"] = json!("decoder_decode");
            decode["median_ms"] = json!(ms);
            decode["tokens_per_s"] = json!(batch as f64 / (ms * 1e-3));
            decode["context"] = json!(len);
            decode["reps"] = json!(t.steps);
            decode["graph"] = json!(true);
            decode["replay_ms"] = json!(t.replay_ms);
            decode["includes"] = json!("inputs copied up, the graph replayed, the tokens read back");
            lines.push(decode);
        }
        if let Some(folder) = path.parent().filter(|f| !f.as_os_str().is_empty()) {
            std::fs::create_dir_all(folder).map_err(|e| format!("creating {}: {e}", folder.display()))?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("opening {}: {e}", path.display()))?;
        for line in lines {
            writeln!(file, "{line}")?;
        }
        Ok(())
    }
}
