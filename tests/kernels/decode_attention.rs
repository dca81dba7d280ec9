//! The decode-attention family against `cpu::decode_attention` (f64): a paged cache filled by
//! `kv_cache_append` (both rungs; whole batches and one sequence at a time, so that sequences
//! differ in length) over a shuffled block table, then each algorithm (the warp rung, the planned
//! split, forced chunk counts) at tiny ragged shapes in the simulator (contexts that are not
//! multiples of the block size, a context of 1, `q_len` 1 and 5, GQA, head dims 64, 128, 256 and
//! 40 (the warp fallback), bf16 and f16), the pools' contents placed exactly where the table
//! says (`decode_attention::append`), the host's checks (`errors::decode_attention`), and on the
//! GPU the bench's shapes (context 4096, 32 heads, 8 kv heads, d 128), where the split rung is
//! also checked against the warp rung, and long contexts checked against the warp rung alone.
//! The streaming tiles rung and the tensor-core rung in two launches and in one (planned and
//! forced chunk counts, one chunk wrapping the ring of stages, two row groups) run in every case;
//! `decode_attention::planted_wrong_value_fails` shows the check failing, for each, on a
//! reference off at one key; `decode_attention::fused_twice_*` launches the one-launch rung twice
//! on one workspace, its counters back to 0 after each launch.

use gpukern::{
    DecodeAlgorithm, DecodeQuery, Gpu, KvAppendAlgorithm, KvCacheShape, KvElement, PagedKvCache, bf16, cpu,
    f16,
};
use libtest_mimic::Trial;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::common::check::*;
use crate::common::random_vec;
use crate::common::trial::{Target, trial};

/// An element type of the tests: its conversions and its tolerance on the output.
pub(crate) trait El: KvElement + Copy {
    fn of(x: f32) -> Self;
    fn to(self) -> f32;
    /// Largest error of an output element (values within [-1, 1]): the output's rounding
    /// (bf16: 2^-9 relative; f16: 2^-12) plus the f32 accumulation's, with a margin.
    const OUT_TOL: f64;
    const NAME: &'static str;
}

impl El for bf16 {
    fn of(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to(self) -> f32 {
        self.to_f32()
    }
    const OUT_TOL: f64 = 8e-3;
    const NAME: &'static str = "bf16";
}

impl El for f16 {
    fn of(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to(self) -> f32 {
        self.to_f32()
    }
    const OUT_TOL: f64 = 1.5e-3;
    const NAME: &'static str = "f16";
}

/// The rows' log-sum-exp: f32 sums of up to a few thousand exponentials (`ex2.approx`, 2^-22)
/// and `lg2.approx`.
const LSE_TOL: f64 = 2e-4;

/// One case: `(batch, heads, kv_heads, head_dim, block_size, q_len, lens)`.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    batch: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    block_size: usize,
    q_len: usize,
    lens: Vec<usize>,
}

fn case(
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    block_size: usize,
    q_len: usize,
    lens: &[usize],
) -> Case {
    Case {
        batch: lens.len(),
        heads,
        kv_heads,
        head_dim,
        block_size,
        q_len,
        lens: lens.to_vec(),
    }
}

impl Case {
    fn name(&self) -> String {
        let lens: Vec<String> = self.lens.iter().map(|l| l.to_string()).collect();
        format!(
            "h{}kv{}d{}bs{}q{}_len{}",
            self.heads,
            self.kv_heads,
            self.head_dim,
            self.block_size,
            self.q_len,
            lens.join("-")
        )
    }
}

/// Simulator cases: tiny and ragged.
fn sim_cases() -> Vec<(Case, bool)> {
    vec![
        // A context of 1 and one of 19 (blocks of 4), GQA 2, q_len 1; bf16.
        (case(4, 2, 64, 4, 1, &[1, 19]), false),
        // q_len 5, GQA 4 (20 rows per kv head: 5 groups of 4), contexts 5 and 37, blocks of 8.
        (case(8, 2, 128, 8, 5, &[5, 37]), false),
        // Head dim 256 (one key per warp step), MHA; both element types.
        (case(2, 2, 256, 4, 1, &[9]), false),
        (case(1, 1, 256, 8, 1, &[3]), true),
        // f16 at head dim 128, GQA 2, q_len 2.
        (case(2, 1, 128, 4, 2, &[6]), true),
        // Head dim 40: no split instance, the warp rung; blocks of 2.
        (case(2, 1, 40, 2, 2, &[7, 3]), false),
        // f16, GQA 4, q_len 3, one block of 16 and a bit.
        (case(4, 1, 64, 16, 3, &[23]), true),
        // GQA 8 (8 rows: one full row group of the tiles rung), several tiles (the ring of 3
        // stages wraps with one chunk), a ragged batch.
        (case(8, 1, 64, 16, 1, &[300, 129]), false),
        // Head dim 256 (2 stages) past two tiles, q_len 2, GQA 4: 8 rows.
        (case(4, 1, 256, 8, 2, &[150]), false),
        // GQA 8, q_len 2: 16 rows, two row groups of the tiles rung; f16, head dim 128.
        (case(8, 1, 128, 4, 2, &[70, 9]), true),
    ]
}

/// CUDA cases: the bench's shapes (batch 1 and 8, context 4096, 32 heads, 8 kv heads, d 128),
/// ragged batches, q_len 4 and 16, head dim 64, f16.
fn cuda_cases() -> Vec<(Case, bool)> {
    vec![
        (case(32, 8, 128, 16, 1, &[4096]), false),
        (case(32, 8, 128, 16, 1, &[4096; 8]), false),
        (
            case(32, 8, 128, 16, 1, &[1, 17, 300, 4095, 4097, 1000, 2, 33]),
            false,
        ),
        (case(32, 8, 128, 16, 4, &[4096, 511, 4, 77]), false),
        (case(32, 8, 128, 16, 16, &[2048, 16]), false),
        (case(16, 16, 64, 32, 1, &[3000, 129]), false),
        (case(16, 16, 64, 32, 1, &[3000, 129]), true),
        (case(8, 2, 256, 16, 2, &[1500]), true),
        (case(8, 2, 256, 16, 2, &[1500]), false),
        (case(32, 8, 128, 16, 1, &[2500, 4096]), true),
    ]
}

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = vec![
        trial(sim, "decode_attention::append", |gpu, rng| {
            append_placement(gpu, rng)
        }),
        trial(cuda, "decode_attention::append", |gpu, rng| {
            append_placement(gpu, rng)
        }),
        trial(sim, "errors::decode_attention", |gpu, _| errors(gpu)),
        trial(cuda, "errors::decode_attention", |gpu, _| errors(gpu)),
        trial(cuda, "decode_attention::long_context", |gpu, rng| {
            long_context(gpu, rng)
        }),
        trial(sim, "decode_attention::planted_wrong_value_fails", |gpu, rng| {
            planted(gpu, rng)
        }),
    ];
    // The one-launch rung's counters: the same launch twice on one workspace (as a graph
    // replays it), MHA at head dim 64 (8 threads share each item's chunks) and GQA with two
    // row groups; on the GPU, the bench's shape too.
    for (target, c, n) in [
        (sim, case(2, 2, 64, 4, 1, &[37, 5, 20]), 4),
        (sim, case(16, 2, 128, 8, 3, &[9, 30]), 3),
        (cuda, case(32, 8, 128, 16, 1, &[4096, 100, 2049]), 0),
        (cuda, case(16, 2, 64, 16, 3, &[3000, 5]), 7),
    ] {
        let name = format!(
            "decode_attention::fused_twice_{}_{}",
            c.name(),
            if n == 0 {
                "planned".to_string()
            } else {
                format!("splits{n}")
            }
        );
        trials.push(trial(target, &name, move |gpu, rng| fused_twice(gpu, rng, &c, n)));
    }
    for (target, cases) in [(sim, sim_cases()), (cuda, cuda_cases())] {
        for (c, half) in cases {
            let name = format!(
                "decode_attention::{}_{}",
                c.name(),
                if half { "f16" } else { "bf16" }
            );
            trials.push(trial(target, &name, move |gpu, rng| {
                if half {
                    attention::<f16>(gpu, rng, &c)
                } else {
                    attention::<bf16>(gpu, rng, &c)
                }
            }));
        }
    }
    trials
}

/// A block table for `batch` sequences of up to `max_blocks` blocks over `num_blocks` blocks,
/// shuffled so that no sequence's blocks are consecutive, the unused entries `-1`.
fn shuffled_table(rng: &mut StdRng, batch: usize, max_blocks: usize, need: &[usize]) -> (Vec<i32>, usize) {
    let num_blocks = need.iter().sum::<usize>() + 3;
    let mut ids: Vec<i32> = (0..num_blocks as i32).collect();
    ids.shuffle(rng);
    let mut table = vec![-1; batch * max_blocks];
    let mut next = ids.into_iter();
    for (b, &n) in need.iter().enumerate() {
        for k in 0..n {
            table[b * max_blocks + k] = next.next().unwrap_or(-1);
        }
    }
    (table, num_blocks)
}

/// A filled cache and each sequence's K and V rows (f32).
type Filled<E> = (PagedKvCache<E>, Vec<Vec<f32>>, Vec<Vec<f32>>);

/// A cache for `c` with each sequence's K and V rows (random, rounded to `E`) appended: whole
/// batch appends of `q_len` tokens at the end where every sequence can take them, one sequence
/// at a time before; alternating the append's rungs. Returns the rows as f32, per sequence.
fn filled<E: El>(gpu: &Gpu, rng: &mut StdRng, c: &Case) -> gpukern::Result<Filled<E>> {
    let row = c.kv_heads * c.head_dim;
    let max_len = *c.lens.iter().max().unwrap_or(&1);
    let max_blocks = max_len.div_ceil(c.block_size) + 1;
    let need: Vec<usize> = c.lens.iter().map(|l| l.div_ceil(c.block_size)).collect();
    let (table, num_blocks) = shuffled_table(rng, c.batch, max_blocks, &need);
    let shape = KvCacheShape {
        num_blocks,
        block_size: c.block_size,
        kv_heads: c.kv_heads,
        head_dim: c.head_dim,
        batch: c.batch,
        max_blocks,
    };
    let mut cache = gpu.paged_kv_cache::<E>(shape, &table)?;
    let round = |x: Vec<f32>| -> Vec<E> { x.into_iter().map(E::of).collect() };
    let k: Vec<Vec<E>> = c.lens.iter().map(|&l| round(random_vec(rng, l * row))).collect();
    let v: Vec<Vec<E>> = c.lens.iter().map(|&l| round(random_vec(rng, l * row))).collect();
    // The last `tail` tokens of every sequence go in together (the decode step's append).
    let tail = c.q_len.min(*c.lens.iter().min().unwrap_or(&1));
    for b in 0..c.batch {
        let head = c.lens[b] - tail;
        // Two pieces where there are at least two tokens: a ragged split of the prompt.
        let cut = head / 3;
        for (from, to) in [(0, cut), (cut, head)] {
            if to > from {
                let kb = gpu.upload(&k[b][from * row..to * row])?;
                let vb = gpu.upload(&v[b][from * row..to * row])?;
                gpu.kv_cache_append_to(&mut cache, b, &kb, &vb, to - from)?;
            }
        }
    }
    for (step, algorithm) in (0..tail).zip(KvAppendAlgorithm::ALL.iter().cycle()) {
        let gather = |x: &Vec<Vec<E>>| -> Vec<E> {
            (0..c.batch)
                .flat_map(|b| {
                    let p = c.lens[b] - tail + step;
                    x[b][p * row..(p + 1) * row].to_vec()
                })
                .collect()
        };
        let kb = gpu.upload(&gather(&k))?;
        let vb = gpu.upload(&gather(&v))?;
        gpu.kv_cache_append_with(&mut cache, &kb, &vb, 1, *algorithm)?;
    }
    let widen = |x: Vec<Vec<E>>| -> Vec<Vec<f32>> {
        x.into_iter()
            .map(|r| r.into_iter().map(E::to).collect())
            .collect()
    };
    Ok((cache, widen(k), widen(v)))
}

/// Fails unless each element is within `tol` of the reference (and not NaN).
fn close(what: &str, got: &[f32], want: &[f64], tol: f64) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    let mut worst = (0usize, 0.0f64);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let e = (f64::from(g) - w).abs();
        let e = if e.is_nan() { f64::INFINITY } else { e };
        if e > worst.1 {
            worst = (i, e);
        }
    }
    if worst.1 > tol {
        let i = worst.0;
        Err(format!(
            "{what}: element {i} got {}, expected {} (error {:.3e} > {tol:.1e})",
            got[i], want[i], worst.1
        )
        .into())
    } else {
        Ok(())
    }
}

/// One case: every algorithm against the f64 reference, output and log-sum-exp.
fn attention<E: El>(gpu: &Gpu, rng: &mut StdRng, c: &Case) -> Check {
    let (cache, k, v) = filled::<E>(gpu, rng, c)?;
    let q_host: Vec<E> = random_vec(rng, c.batch * c.q_len * c.heads * c.head_dim)
        .into_iter()
        .map(|x| E::of(4.0 * x))
        .collect();
    let q32: Vec<f32> = q_host.iter().map(|&x| x.to()).collect();
    let scale = 1.0 / (c.head_dim as f64).sqrt();
    let (want, want_lse) =
        cpu::decode_attention(&q32, &k, &v, (c.q_len, c.heads, c.kv_heads, c.head_dim), scale);
    let q = gpu.upload(&q_host)?;
    let query = DecodeQuery {
        heads: c.heads,
        q_len: c.q_len,
        scale: None,
    };
    let mut failures = Vec::new();
    for algorithm in [
        DecodeAlgorithm::Warp,
        DecodeAlgorithm::Split,
        DecodeAlgorithm::Splits(1),
        DecodeAlgorithm::Splits(3),
        DecodeAlgorithm::Tiles,
        DecodeAlgorithm::TileSplits(1),
        DecodeAlgorithm::TileSplits(3),
        DecodeAlgorithm::Tensor,
        DecodeAlgorithm::TensorSplits(1),
        DecodeAlgorithm::TensorSplits(3),
        DecodeAlgorithm::TensorFused,
        DecodeAlgorithm::TensorFusedSplits(3),
    ] {
        let what = format!("{} {} {}", E::NAME, c.name(), algorithm.name());
        let got = gpu.decode_attention_with(&q, &cache, query, algorithm)?;
        let out: Vec<f32> = got.out.to_vec()?.into_iter().map(E::to).collect();
        if let Err(e) = close(&format!("{what} out"), &out, &want, E::OUT_TOL) {
            failures.push(e.to_string());
        }
        if let Err(e) = close(&format!("{what} lse"), &got.lse.to_vec()?, &want_lse, LSE_TOL) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// The pools after appends hold each token's rows exactly where the block table puts them, and
/// nothing else was written (the rest stays zero).
fn append_placement(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let c = case(2, 2, 16, 4, 2, &[1, 6, 11]);
    let (cache, k, v) = filled::<bf16>(gpu, rng, &c)?;
    let s = cache.shape();
    let row = s.kv_heads * s.head_dim;
    let mut want_k = vec![0.0f32; s.num_blocks * s.block_size * row];
    let mut want_v = want_k.clone();
    for b in 0..c.batch {
        for p in 0..c.lens[b] {
            let block = cache.table()[b * s.max_blocks + p / s.block_size] as usize;
            let at = (block * s.block_size + p % s.block_size) * row;
            want_k[at..at + row].copy_from_slice(&k[b][p * row..(p + 1) * row]);
            want_v[at..at + row].copy_from_slice(&v[b][p * row..(p + 1) * row]);
        }
    }
    let widen = |x: Vec<bf16>| -> Vec<f32> { x.into_iter().map(bf16::to_f32).collect() };
    let got_lens: Vec<i32> = cache.lens_on_device().to_vec()?;
    let want_lens: Vec<i32> = c.lens.iter().map(|&l| l as i32).collect();
    let mut failures = Vec::new();
    if got_lens != want_lens || cache.lens() != want_lens.as_slice() {
        failures.push(format!(
            "lengths {got_lens:?} / {:?}, expected {want_lens:?}",
            cache.lens()
        ));
    }
    if widen(cache.k_pool().to_vec()?) != want_k {
        failures.push("the K pool is not the rows placed through the table".into());
    }
    if widen(cache.v_pool().to_vec()?) != want_v {
        failures.push("the V pool is not the rows placed through the table".into());
    }
    all_passed(failures)
}

/// Long contexts (32k and 128k keys at batch 1, 32 heads, 8 kv heads, d 128) on the GPU: the
/// split rung against the warp rung (the CPU reference would take minutes).
fn long_context(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let mut failures = Vec::new();
    for len in [32768usize, 131072] {
        let c = case(32, 8, 128, 16, 1, &[len]);
        let (cache, _, _) = filled::<bf16>(gpu, rng, &c)?;
        let q_host: Vec<bf16> = random_vec(rng, c.heads * c.head_dim)
            .into_iter()
            .map(|x| bf16::from_f32(4.0 * x))
            .collect();
        let q = gpu.upload(&q_host)?;
        let query = DecodeQuery {
            heads: c.heads,
            q_len: 1,
            scale: None,
        };
        let reference = gpu.decode_attention_with(&q, &cache, query, DecodeAlgorithm::Warp)?;
        let want: Vec<f64> = reference
            .out
            .to_vec()?
            .into_iter()
            .map(|x| f64::from(x.to_f32()))
            .collect();
        let want_lse: Vec<f64> = reference.lse.to_vec()?.into_iter().map(f64::from).collect();
        for algorithm in [
            DecodeAlgorithm::Tensor,
            DecodeAlgorithm::Tiles,
            DecodeAlgorithm::Split,
        ] {
            let got = gpu.decode_attention_with(&q, &cache, query, algorithm)?;
            let out: Vec<f32> = got.out.to_vec()?.into_iter().map(bf16::to_f32).collect();
            let what = format!("context {len} {}", algorithm.name());
            // Two bf16 roundings apart at most, plus the sums' order.
            if let Err(e) = close(&format!("{what} out"), &out, &want, 2.0 * bf16::OUT_TOL) {
                failures.push(e.to_string());
            }
            if let Err(e) = close(
                &format!("{what} lse"),
                &got.lse.to_vec()?,
                &want_lse,
                4.0 * LSE_TOL,
            ) {
                failures.push(e.to_string());
            }
        }
    }
    all_passed(failures)
}

/// The check shown able to fail: the tiles and tensor rungs' outputs pass against the reference, and
/// fails against the reference of a cache whose V row at key 64 (the first key of the second
/// tile, where a ring or mask off by one would go wrong) is 8 larger, as the output of a kernel
/// that read another row there would be.
fn planted(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let c = case(8, 2, 64, 16, 1, &[130]);
    let (cache, k, mut v) = filled::<bf16>(gpu, rng, &c)?;
    let q_host: Vec<bf16> = random_vec(rng, c.heads * c.head_dim)
        .into_iter()
        .map(|x| bf16::from_f32(4.0 * x))
        .collect();
    let q32: Vec<f32> = q_host.iter().map(|x| x.to_f32()).collect();
    let dims = (c.q_len, c.heads, c.kv_heads, c.head_dim);
    let scale = 1.0 / (c.head_dim as f64).sqrt();
    let (want, _) = cpu::decode_attention(&q32, &k, &v, dims, scale);
    let row = c.kv_heads * c.head_dim;
    v[0][64 * row..65 * row].iter_mut().for_each(|x| *x += 8.0);
    let (planted, _) = cpu::decode_attention(&q32, &k, &v, dims, scale);
    let query = DecodeQuery {
        heads: c.heads,
        q_len: 1,
        scale: None,
    };
    let q = gpu.upload(&q_host)?;
    for algorithm in [
        DecodeAlgorithm::TileSplits(1),
        DecodeAlgorithm::TensorSplits(1),
        DecodeAlgorithm::TensorFusedSplits(2),
    ] {
        let got = gpu.decode_attention_with(&q, &cache, query, algorithm)?;
        let out: Vec<f32> = got.out.to_vec()?.into_iter().map(bf16::to_f32).collect();
        let name = algorithm.name();
        close(
            &format!("{name} against the reference"),
            &out,
            &want,
            bf16::OUT_TOL,
        )?;
        if close(
            &format!("{name} against the planted reference"),
            &out,
            &planted,
            bf16::OUT_TOL,
        )
        .is_ok()
        {
            return Err(format!("{name}: a V row off by 8 at key 64 passes the check").into());
        }
    }
    Ok(())
}

/// The one-launch rung through a workspace ([`DecodeAlgorithm::TensorFusedSplits`]`(n)`, or the
/// planned [`DecodeAlgorithm::TensorFused`] for `n = 0`), launched twice as a replayed graph
/// launches it, with other queries each time and the outputs set to NaN before: each launch's
/// output and log-sum-exp against the reference (a launch that found its counters other than 0
/// leaves rows unwritten), and the counters 0 after each.
fn fused_twice(gpu: &Gpu, rng: &mut StdRng, c: &Case, n: usize) -> Check {
    let (cache, k, v) = filled::<bf16>(gpu, rng, c)?;
    let query = DecodeQuery {
        heads: c.heads,
        q_len: c.q_len,
        scale: None,
    };
    let algorithm = if n == 0 {
        DecodeAlgorithm::TensorFused
    } else {
        DecodeAlgorithm::TensorFusedSplits(n)
    };
    let mut workspace = gpu.decode_workspace_with(&cache, query, algorithm)?;
    let groups = (c.heads / c.kv_heads * c.q_len).div_ceil(16);
    let words = workspace.counters().len();
    if words != c.batch * c.kv_heads * groups {
        return Err(format!("{words} counters, expected one per row group").into());
    }
    let rows = c.batch * c.q_len * c.heads;
    let mut out = gpu.zeros_of::<bf16>(rows * c.head_dim)?;
    let mut lse = gpu.zeros_of::<f32>(rows)?;
    let scale = 1.0 / (c.head_dim as f64).sqrt();
    let mut failures = Vec::new();
    for launch in 0..2 {
        let q_host: Vec<bf16> = random_vec(rng, rows * c.head_dim)
            .into_iter()
            .map(|x| bf16::from_f32(4.0 * x))
            .collect();
        let q32: Vec<f32> = q_host.iter().map(|x| x.to_f32()).collect();
        let (want, want_lse) =
            cpu::decode_attention(&q32, &k, &v, (c.q_len, c.heads, c.kv_heads, c.head_dim), scale);
        out.copy_from_host(&vec![bf16::NAN; rows * c.head_dim])?;
        lse.copy_from_host(&vec![f32::NAN; rows])?;
        gpu.decode_attention_into(&gpu.upload(&q_host)?, &cache, &mut workspace, &mut out, &mut lse)?;
        let got: Vec<f32> = out.to_vec()?.into_iter().map(bf16::to_f32).collect();
        let what = format!("{} {} launch {launch}", c.name(), algorithm.name());
        if let Err(e) = close(&format!("{what} out"), &got, &want, bf16::OUT_TOL) {
            failures.push(e.to_string());
        }
        if let Err(e) = close(&format!("{what} lse"), &lse.to_vec()?, &want_lse, LSE_TOL) {
            failures.push(e.to_string());
        }
        let left: Vec<u32> = workspace.counters().to_vec()?;
        if left.iter().any(|&w| w != 0) {
            failures.push(format!("{what}: counters left {left:?}"));
        }
    }
    all_passed(failures)
}

/// The host's checks: each malformed call refused with the reason, before any launch.
fn errors(gpu: &Gpu) -> Check {
    let shape = KvCacheShape {
        num_blocks: 4,
        block_size: 4,
        kv_heads: 2,
        head_dim: 8,
        batch: 2,
        max_blocks: 2,
    };
    let table = [0, 1, 2, -1];
    let failures = std::cell::RefCell::new(Vec::new());
    let expect = |what: &str, r: gpukern::Result<()>, needle: &str| match r {
        Err(e) if e.to_string().contains(needle) => {}
        Err(e) => failures
            .borrow_mut()
            .push(format!("{what}: error {e} lacks {needle:?}")),
        Ok(()) => failures.borrow_mut().push(format!("{what}: accepted")),
    };
    let bad_shape = |f: fn(&mut KvCacheShape)| {
        let mut s = shape;
        f(&mut s);
        gpu.paged_kv_cache::<bf16>(s, &vec![0; s.batch * s.max_blocks])
            .map(|_| ())
    };
    expect("block size 3", bad_shape(|s| s.block_size = 3), "power of two");
    expect("head dim 12", bad_shape(|s| s.head_dim = 12), "multiple of 8");
    expect("head dim 264", bad_shape(|s| s.head_dim = 264), "multiple of 8");
    expect("no blocks", bad_shape(|s| s.num_blocks = 0), "empty");
    expect(
        "table id 4",
        gpu.paged_kv_cache::<bf16>(shape, &[0, 1, 4, -1]).map(|_| ()),
        "outside -1..4",
    );
    expect(
        "table id -2",
        gpu.paged_kv_cache::<bf16>(shape, &[0, 1, -2, -1]).map(|_| ()),
        "outside -1..4",
    );
    expect(
        "table length",
        gpu.paged_kv_cache::<bf16>(shape, &[0, 1, 2]).map(|_| ()),
        "block table",
    );
    let mut cache = gpu.paged_kv_cache::<bf16>(shape, &table)?;
    let rows = |n: usize| gpu.zeros_of::<bf16>(n * 2 * 8);
    // Sequence 1 has one block (4 tokens): 5 tokens need a second, which is -1.
    expect(
        "missing block",
        gpu.kv_cache_append(&mut cache, &rows(2 * 5)?, &rows(2 * 5)?, 5),
        "no block",
    );
    expect(
        "past capacity",
        gpu.kv_cache_append(&mut cache, &rows(2 * 9)?, &rows(2 * 9)?, 9),
        "past its 8",
    );
    expect(
        "rows size",
        gpu.kv_cache_append(&mut cache, &rows(3)?, &rows(3)?, 1),
        "k_new",
    );
    expect(
        "sequence 2",
        gpu.kv_cache_append_to(&mut cache, 2, &rows(1)?, &rows(1)?, 1),
        "sequence 2",
    );
    if cache.lens() != [0, 0] {
        failures
            .borrow_mut()
            .push(format!("refused appends changed the lengths: {:?}", cache.lens()));
    }
    gpu.kv_cache_append(&mut cache, &rows(2 * 2)?, &rows(2 * 2)?, 2)?;
    let q = |q_len: usize, heads: usize| gpu.zeros_of::<bf16>(2 * q_len * heads * 8);
    let query = |heads, q_len| DecodeQuery {
        heads,
        q_len,
        scale: None,
    };
    let attend = |q_len: usize, heads: usize, scale: Option<f32>| -> gpukern::Result<()> {
        let qq = q(q_len, heads)?;
        gpu.decode_attention(
            &qq,
            &cache,
            DecodeQuery {
                scale,
                ..query(heads, q_len)
            },
        )
        .map(|_| ())
    };
    expect("heads 3", attend(1, 3, None), "multiple of 2 kv heads");
    expect("q_len 0", attend(0, 2, None), "outside 1..=16");
    expect("q_len 17", attend(17, 2, None), "outside 1..=16");
    expect("q_len 3 > len 2", attend(3, 2, None), "fewer than its 3 queries");
    expect("scale NaN", attend(1, 2, Some(f32::NAN)), "not finite");
    expect(
        "q size",
        gpu.decode_attention(&q(1, 4)?, &cache, query(2, 1)).map(|_| ()),
        "q is [batch, q_len, heads, head_dim]",
    );
    attend(2, 4, None)?;
    all_passed(failures.into_inner())
}

/// Unused in some feature sets.
#[allow(dead_code)]
fn _uses(rng: &mut StdRng) -> f32 {
    rng.random()
}
