//! Decode attention over a paged bf16 KV cache (`gpu.decode_attention_with`), the tensor-core
//! rung (`gpukern:tensor`, the default; and `gpukern:tensor-<n>` at half and twice its planned
//! chunk count, to tune the plan), the streaming tiles rung (`gpukern:tiles`), the split rung (`gpukern:split`, FlashDecoding's warps
//! and combine) and the tutorial warp rung (`gpukern:warp`, contexts up to 8192 only: it reads
//! K and V once per query row), at the suite's shapes (batch 1 and 8, contexts 4096 to 131072,
//! 32 heads, 8 kv heads, head dim 128, one query per sequence).
//!
//! Minimum traffic: the K and V rows of every sequence's context read once (`4 * batch *
//! context * kv_heads * head_dim` bytes in bf16); the queries, the output and the log-sum-exp
//! are a few KiB next to them and are not counted: the GB/s of a record is K/V bytes per
//! second, comparable with the copy rate. Each shape also times a device-to-device copy that
//! moves the same bytes (`impl` `copy`, half read and half written), what a copy reaches at that
//! size: at a few tens of MB a call's fixed costs weigh against the bytes.
//!
//! A call allocates its output, its log-sum-exp and (split) its partials, stream-ordered on
//! the H200, inside the timed region as a user's call would have them. `gpukern:tensor-into` is
//! the decoder's call instead (`gpu.decode_attention_into`: the default plan's workspace and
//! the outputs made once, outside the timing; no allocation per call), and
//! `gpukern:tensor-fused-into` the same call on the one-launch tensor rung (the combine inside
//! the streaming kernel; simulator-checked, its first timing is this row's). Caches are rotated
//! (`sets_for`) so that the K/V of batch 1 (16 MiB) is read from DRAM, not L2.

use gpukern::ops::decode_attention::{decode_splits, tensor_chunks, tile_chunks};
use gpukern::{DecodeAlgorithm, DecodeQuery, Gpu, KvCacheShape, PagedKvCache, bf16, cpu};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::record::{Check, Record, Res, Sink};

/// Tokens per block of the bench's caches.
const BLOCK_SIZE: usize = 16;
/// Relative error (norm) that passes: the output rounded to bf16 (2^-9) with a margin.
const TOL: f64 = 1e-2;

/// One shape: `(batch, heads, kv_heads, head_dim, context, q_len)`.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub context: usize,
    pub q_len: usize,
}

impl Shape {
    fn name(&self) -> String {
        format!(
            "b{}h{}kv{}d{}ctx{}q{}",
            self.batch, self.heads, self.kv_heads, self.head_dim, self.context, self.q_len
        )
    }

    fn vars(&self) -> [(&'static str, usize); 6] {
        [
            ("batch", self.batch),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("context", self.context),
            ("q_len", self.q_len),
        ]
    }
}

/// The suite's shapes, and with `plans` (full runs) its `plans` shapes too: one kv head over a
/// context 8 times as long as the suite's longest, the same bytes of K and V with each page's
/// keys of the head contiguous (a head-major page's layout), to tell what the token-major pages'
/// 256-byte runs cost.
pub fn shapes(quick: bool, plans: bool) -> Vec<Shape> {
    let mut all = crate::suite::shapes("decode_attention", quick);
    if plans && !quick {
        all.extend(crate::suite::extra_shapes("decode_attention", "plans"));
    }
    all.into_iter()
        .map(|s| Shape {
            batch: s[0],
            heads: s[1],
            kv_heads: s[2],
            head_dim: s[3],
            context: s[4],
            q_len: s[5],
        })
        .collect()
}

/// The algorithms measured at every shape (the tuning variants come from [`algorithms`]).
const ALGORITHMS: [DecodeAlgorithm; 4] = [
    DecodeAlgorithm::Tensor,
    DecodeAlgorithm::Tiles,
    DecodeAlgorithm::Split,
    DecodeAlgorithm::Warp,
];

/// The longest context the warp rung is measured at (it reads K and V once per query row).
const WARP_MAX_CONTEXT: usize = 8192;

/// The planned chunks of the tiles rung at `s` on a device of `sms` multiprocessors.
fn planned_tile_splits(s: &Shape, sms: usize) -> usize {
    let rows = s.heads / s.kv_heads * s.q_len;
    tile_chunks(s.batch, s.kv_heads, rows, s.context, s.head_dim, sms).0
}

/// The planned chunks of the tensor rung at `s` on a device of `sms` multiprocessors.
fn planned_tensor_splits(s: &Shape, sms: usize) -> usize {
    let rows = s.heads / s.kv_heads * s.q_len;
    tensor_chunks(s.batch, s.kv_heads, rows, s.context, s.head_dim, sms).0
}

/// What is measured at `s`: [`ALGORITHMS`] (the warp rung up to [`WARP_MAX_CONTEXT`]), then the
/// tensor rung forced to half and twice its planned chunks (where those differ from the plan).
fn algorithms(s: &Shape, sms: usize) -> Vec<DecodeAlgorithm> {
    let mut all: Vec<DecodeAlgorithm> = ALGORITHMS
        .into_iter()
        .filter(|&a| a != DecodeAlgorithm::Warp || s.context <= WARP_MAX_CONTEXT)
        .collect();
    let n = planned_tensor_splits(s, sms);
    for forced in [n / 2, 2 * n] {
        if forced >= 1 && forced != n {
            all.push(DecodeAlgorithm::TensorSplits(forced));
        }
    }
    all
}

/// The algorithms timed through `gpu.decode_attention_into` (a workspace made once, the
/// decoder's call), as `gpukern:<name>-into`: the default (two launches) and the one-launch
/// tensor rung, side by side in one call.
const INTO_ALGORITHMS: [DecodeAlgorithm; 2] = [DecodeAlgorithm::Tensor, DecodeAlgorithm::TensorFused];

/// Measurements [`decode_attention`] makes (on an H200's 132 multiprocessors): the `-into`
/// rows, a copy of the same bytes, and the algorithms.
pub fn planned(quick: bool, plans: bool) -> usize {
    shapes(quick, plans)
        .iter()
        .map(|s| algorithms(s, 132).len() + INTO_ALGORITHMS.len() + 1)
        .sum()
}

/// K and V bytes of one call.
pub fn traffic(s: &Shape) -> f64 {
    crate::suite::bytes("decode_attention", &s.vars())
}

/// A cache of `s` (every sequence `context` tokens, blocks shuffled over the pool) filled from
/// `k` and `v` (`[batch, context, kv_heads, head_dim]`) with one append.
fn cache(gpu: &Gpu, s: &Shape, k: &[bf16], v: &[bf16], seed: u64) -> Res<PagedKvCache<bf16>> {
    let max_blocks = s.context.div_ceil(BLOCK_SIZE);
    let num_blocks = s.batch * max_blocks;
    let mut ids: Vec<i32> = (0..num_blocks as i32).collect();
    ids.shuffle(&mut StdRng::seed_from_u64(seed));
    let shape = KvCacheShape {
        num_blocks,
        block_size: BLOCK_SIZE,
        kv_heads: s.kv_heads,
        head_dim: s.head_dim,
        batch: s.batch,
        max_blocks,
    };
    let mut c = gpu.paged_kv_cache::<bf16>(shape, &ids)?;
    gpu.kv_cache_append(&mut c, &gpu.upload(k)?, &gpu.upload(v)?, s.context)?;
    Ok(c)
}

/// Operands of one shape: `sets` caches of the same rows, the queries, and the f64 reference.
struct Prepared {
    caches: Vec<PagedKvCache<bf16>>,
    q: gpukern::DeviceVec<bf16>,
    reference: Vec<f32>,
}

fn prepare(gpu: &Gpu, s: &Shape, sets: usize) -> Res<Prepared> {
    let row = s.kv_heads * s.head_dim;
    let round = |x: Vec<f32>| -> Vec<bf16> { x.into_iter().map(bf16::from_f32).collect() };
    let k = round(random_vec(s.batch * s.context * row, -1.0, 1.0));
    let v = round(random_vec(s.batch * s.context * row, -1.0, 1.0));
    let q = round(random_vec(s.batch * s.q_len * s.heads * s.head_dim, -4.0, 4.0));
    let mut caches = Vec::with_capacity(sets);
    for i in 0..sets.max(1) {
        caches.push(cache(gpu, s, &k, &v, i as u64)?);
    }
    let per_seq = |x: &[bf16]| -> Vec<Vec<f32>> {
        x.chunks(s.context * row)
            .map(|c| c.iter().map(|x| x.to_f32()).collect())
            .collect()
    };
    let q32: Vec<f32> = q.iter().map(|x| x.to_f32()).collect();
    let (out, _) = cpu::decode_attention(
        &q32,
        &per_seq(&k),
        &per_seq(&v),
        (s.q_len, s.heads, s.kv_heads, s.head_dim),
        1.0 / (s.head_dim as f64).sqrt(),
    );
    Ok(Prepared {
        caches,
        q: gpu.upload(&q)?,
        reference: out.into_iter().map(|x| x as f32).collect(),
    })
}

fn query(s: &Shape) -> DecodeQuery {
    DecodeQuery {
        heads: s.heads,
        q_len: s.q_len,
        scale: None,
    }
}

/// Every shape, both rungs.
pub fn decode_attention(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for s in shapes(b.quick, b.plans) {
        if !b.wants(&s.name()) {
            continue;
        }
        let bytes = traffic(&s);
        let sets = sets_for(bytes as usize);
        let mut prepared: Option<Prepared> = None;
        let sms = b.gpu.multiprocessors()?;
        for algorithm in INTO_ALGORITHMS {
            into_row(b, sink, &s, (sets, sms), algorithm, &mut prepared)?;
        }
        crate::memory::copy_of_traffic(b, sink, "decode_attention", &s.name(), bytes)?;
        for algorithm in algorithms(&s, sms) {
            let mut base = base_record(&s, &algorithm.name(), "gpu.decode_attention_with");
            let rows = s.heads / s.kv_heads * s.q_len;
            match algorithm {
                DecodeAlgorithm::Split => {
                    base = base.with("splits", decode_splits(s.batch, s.kv_heads, rows, s.context, sms));
                }
                DecodeAlgorithm::Tiles => base = base.with("splits", planned_tile_splits(&s, sms)),
                DecodeAlgorithm::TileSplits(n) | DecodeAlgorithm::TensorSplits(n) => {
                    base = base.with("splits", n)
                }
                DecodeAlgorithm::Tensor => base = base.with("splits", planned_tensor_splits(&s, sms)),
                _ => {}
            }
            sink.item(base.clone(), || {
                let gpu = &b.gpu;
                if prepared.is_none() {
                    prepared = Some(prepare(gpu, &s, sets)?);
                }
                let Some(p) = prepared.as_ref() else {
                    return Err("decode-attention operands were not prepared".into());
                };
                let got = gpu.decode_attention_with(&p.q, &p.caches[0], query(&s), algorithm)?;
                let out: Vec<f32> = got.out.to_vec()?.into_iter().map(|x| x.to_f32()).collect();
                let check = Check::new(&out, &p.reference, TOL, "cpu_f64");
                let record = base.checked(&check).with("sets", sets);
                if !check.passed() {
                    return Ok(record);
                }
                let stats = b.timer.measure(|i| {
                    gpu.decode_attention_with(&p.q, &p.caches[i % sets], query(&s), algorithm)?;
                    Ok(())
                })?;
                Ok(record.timed(&stats, Some(bytes), None))
            })?;
        }
    }
    Ok(())
}

/// The record of `gpukern:<variant>` at `s` through `call`, with the shape's keys.
fn base_record(s: &Shape, variant: &str, call: &str) -> Record {
    let mut base = Record::new("decode_attention", format!("gpukern:{variant}"), s.name())
        .with("call", call)
        .with("dtype", "bf16")
        .with("block_size", BLOCK_SIZE);
    for (key, value) in s.vars() {
        base = base.with(key, value);
    }
    base
}

/// `gpukern:<algorithm>-into` at `s` (`tensor-into`, the default plan; `tensor-fused-into`, the
/// one-launch tensor rung, simulator-checked and not yet timed before this row): the plan of
/// `algorithm` through `gpu.decode_attention_into`, its workspace and outputs made before the
/// timing (the decode step's call, no allocation). Both plans cut the context alike.
fn into_row(
    b: &mut Bench,
    sink: &mut Sink,
    s: &Shape,
    (sets, sms): (usize, usize),
    algorithm: DecodeAlgorithm,
    prepared: &mut Option<Prepared>,
) -> Res<()> {
    let bytes = traffic(s);
    let variant = format!("{}-into", algorithm.name());
    let base =
        base_record(s, &variant, "gpu.decode_attention_into").with("splits", planned_tensor_splits(s, sms));
    sink.item(base.clone(), || {
        let gpu = &b.gpu;
        if prepared.is_none() {
            *prepared = Some(prepare(gpu, s, sets)?);
        }
        let Some(p) = prepared.as_ref() else {
            return Err("decode-attention operands were not prepared".into());
        };
        let mut workspace = gpu.decode_workspace_with(&p.caches[0], query(s), algorithm)?;
        let rows = s.batch * s.q_len * s.heads;
        let mut out = gpu.zeros_of::<bf16>(rows * s.head_dim)?;
        let mut lse = gpu.zeros_of::<f32>(rows)?;
        gpu.decode_attention_into(&p.q, &p.caches[0], &mut workspace, &mut out, &mut lse)?;
        let got: Vec<f32> = out.to_vec()?.into_iter().map(|x| x.to_f32()).collect();
        let check = Check::new(&got, &p.reference, TOL, "cpu_f64");
        let record = base.checked(&check).with("sets", sets);
        if !check.passed() {
            return Ok(record);
        }
        let stats = b.timer.measure(|i| {
            gpu.decode_attention_into(&p.q, &p.caches[i % sets], &mut workspace, &mut out, &mut lse)?;
            Ok(())
        })?;
        Ok(record.timed(&stats, Some(bytes), None))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_traffic() {
        let full = shapes(false, false);
        assert_eq!(full.len(), 7);
        assert!(
            full.iter()
                .all(|s| s.heads == 32 && s.kv_heads == 8 && s.head_dim == 128 && s.q_len == 1)
        );
        let contexts: Vec<usize> = full.iter().map(|s| s.context).collect();
        assert_eq!(contexts, [4096, 4096, 8192, 8192, 32768, 32768, 131072]);
        assert_eq!(traffic(&full[0]), (4 * 4096 * 8 * 128) as f64);
        // Batch 1 at 4096: tensor (32 chunks of 128 keys) with tensor-16 and tensor-64, tiles,
        // split, warp; at 131072 (33 chunks): no warp.
        let names = |s: &Shape| -> Vec<String> { algorithms(s, 132).iter().map(|a| a.name()).collect() };
        assert_eq!(
            names(&full[0]),
            ["tensor", "tiles", "split", "warp", "tensor-16", "tensor-64"]
        );
        assert_eq!(
            names(&full[6]),
            ["tensor", "tiles", "split", "tensor-16", "tensor-66"]
        );
    }

    /// The prepare-and-check path on the simulator at a tiny shape, both rungs; a wrong
    /// reference (another query) must fail the check.
    #[test]
    fn checks_pass_on_the_simulator_and_can_fail() {
        let gpu = Gpu::simulator();
        let s = Shape {
            batch: 2,
            heads: 4,
            kv_heads: 2,
            head_dim: 64,
            context: 37,
            q_len: 1,
        };
        let p = prepare(&gpu, &s, 2).unwrap();
        for algorithm in ALGORITHMS.into_iter().chain([
            DecodeAlgorithm::TileSplits(2),
            DecodeAlgorithm::TensorSplits(2),
            DecodeAlgorithm::TensorFused,
            DecodeAlgorithm::TensorFusedSplits(2),
        ]) {
            for c in &p.caches {
                let got = gpu.decode_attention_with(&p.q, c, query(&s), algorithm).unwrap();
                let out: Vec<f32> = got
                    .out
                    .to_vec()
                    .unwrap()
                    .into_iter()
                    .map(|x| x.to_f32())
                    .collect();
                let check = Check::new(&out, &p.reference, TOL, "cpu_f64");
                assert!(check.passed(), "{algorithm:?}: {}", check.rel_err);
                let mut wrong = p.reference.clone();
                wrong.rotate_left(s.head_dim);
                assert!(!Check::new(&out, &wrong, TOL, "cpu_f64").passed());
            }
        }
    }
}
