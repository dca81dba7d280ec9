//! The decoder on the device, through gpukern's public API only: the weights uploaded, the
//! prefill of a batch of prompts (the GEMMs, prefill attention, the KV cache filled), and the
//! decode step on preallocated buffers, captured once in a CUDA graph and replayed.

use gpukern::{AttentionOptions, AttentionTensor};
use gpukern::{
    DecodeQuery, DecodeWorkspace, DeviceMatrix, DeviceVec, Gpu, Graph, GraphBuffers, KvCacheShape,
    PagedKvCache, RotaryFrequencies, RotaryLayout, RotaryPositions, SampleOptions, TokenIds, bf16,
};
use ndarray::Array2;

use crate::common::BoxError;
use crate::config::{Config, KV_BLOCK};
use crate::weights::Weights;

/// One block's weights on the device: each projection as `nn.Linear` stores it (`out x in`,
/// what [`Gpu::matmul_decode_into`] takes) and transposed (`in x out`, [`Gpu::matmul_to`]'s `B`,
/// for the prefill); the gate and up projections stacked into one `2 mlp x hidden` matrix, so
/// that one product gives the `[gate | up]` rows SwiGLU reads.
struct Layer {
    attn_norm: DeviceVec<bf16>,
    mlp_norm: DeviceVec<bf16>,
    /// `[q, k, v, o, gate_up, down]`, `out x in`.
    rows: [DeviceMatrix<bf16>; 6],
    /// The same, `in x out`.
    cols: [DeviceMatrix<bf16>; 6],
}

/// Indices into [`Layer::rows`] and [`Layer::cols`].
const Q: usize = 0;
const K: usize = 1;
const V: usize = 2;
const O: usize = 3;
const GATE_UP: usize = 4;
const DOWN: usize = 5;

/// The model on the device.
pub struct Model {
    c: Config,
    embed: DeviceMatrix<bf16>,
    layers: Vec<Layer>,
    norm: DeviceVec<bf16>,
    lm_head: DeviceMatrix<bf16>,
    freqs: RotaryFrequencies,
}

/// An `rows x cols` row-major matrix transposed.
fn transposed(v: &[bf16], rows: usize, cols: usize) -> Vec<bf16> {
    let mut t = vec![bf16::ZERO; v.len()];
    for r in 0..rows {
        for (c, &x) in v[r * cols..(r + 1) * cols].iter().enumerate() {
            t[c * rows + r] = x;
        }
    }
    t
}

/// Uploads an `rows x cols` matrix.
fn matrix(gpu: &Gpu, v: Vec<bf16>, rows: usize, cols: usize) -> Result<DeviceMatrix<bf16>, BoxError> {
    Ok(gpu.upload_matrix(&Array2::from_shape_vec((rows, cols), v)?)?)
}

impl Model {
    /// Uploads `w` (configuration `c`).
    pub fn upload(gpu: &Gpu, c: Config, w: &Weights) -> Result<Model, BoxError> {
        let (h, q, kv, m) = (c.hidden, c.q_dim(), c.kv_dim(), c.mlp);
        let mut layers = Vec::with_capacity(c.layers);
        for l in &w.layers {
            let gate_up = [l.w_gate.as_slice(), &l.w_up].concat();
            let shapes = [
                (&l.wq[..], q, h),
                (&l.wk, kv, h),
                (&l.wv, kv, h),
                (&l.wo, h, q),
                (&gate_up, 2 * m, h),
                (&l.w_down, h, m),
            ];
            let mut rows = Vec::with_capacity(6);
            let mut cols = Vec::with_capacity(6);
            for (v, out, inp) in shapes {
                rows.push(matrix(gpu, v.to_vec(), out, inp)?);
                cols.push(matrix(gpu, transposed(v, out, inp), inp, out)?);
            }
            let six = |v: Vec<DeviceMatrix<bf16>>| -> Result<[DeviceMatrix<bf16>; 6], BoxError> {
                v.try_into().map_err(|_| "six projections".into())
            };
            layers.push(Layer {
                attn_norm: gpu.upload(&l.attn_norm)?,
                mlp_norm: gpu.upload(&l.mlp_norm)?,
                rows: six(rows)?,
                cols: six(cols)?,
            });
        }
        Ok(Model {
            c,
            embed: matrix(gpu, w.embed.clone(), c.vocab, h)?,
            layers,
            norm: gpu.upload(&w.norm)?,
            lm_head: matrix(gpu, w.lm_head.clone(), c.vocab, h)?,
            freqs: gpu.rotary_frequencies(c.head_dim, c.rope_theta)?,
        })
    }

    /// Tokens of the vocabulary.
    pub fn vocab(&self) -> usize {
        self.c.vocab
    }

    /// The norm weight that follows block `i`: the next block's input norm, or the final norm.
    fn next_norm(&self, i: usize) -> &DeviceVec<bf16> {
        self.layers.get(i + 1).map_or(&self.norm, |l| &l.attn_norm)
    }

    /// One paged KV cache per block for `batch` sequences of up to `context` tokens, each
    /// sequence's blocks contiguous in the pools.
    pub fn kv_caches(
        &self,
        gpu: &Gpu,
        batch: usize,
        context: usize,
    ) -> Result<Vec<PagedKvCache<bf16>>, BoxError> {
        let max_blocks = context.div_ceil(KV_BLOCK);
        let shape = KvCacheShape {
            num_blocks: batch * max_blocks,
            block_size: KV_BLOCK,
            kv_heads: self.c.kv_heads,
            head_dim: self.c.head_dim,
            batch,
            max_blocks,
        };
        let table: Vec<i32> = (0..(batch * max_blocks) as i32).collect();
        (0..self.c.layers)
            .map(|_| Ok(gpu.paged_kv_cache(shape, &table)?))
            .collect()
    }

    /// The buffers of a prefill of `batch` prompts of `len` tokens (allocated once, outside
    /// the timed prefill, as a serving loop keeps them).
    pub fn prefill_buffers(
        &self,
        gpu: &Gpu,
        (batch, len): (usize, usize),
    ) -> Result<PrefillBuffers, BoxError> {
        let c = &self.c;
        let t = batch * len;
        let positions: Vec<i32> = (0..t).map(|i| (i % len) as i32).collect();
        let last: Vec<i32> = (0..batch).map(|b| (b * len + len - 1) as i32).collect();
        let zeros = |cols: usize| gpu.zeros_matrix_of::<bf16>(t, cols);
        Ok(PrefillBuffers {
            batch,
            len,
            ids: gpu.upload_token_ids(&vec![0; t], c.vocab)?,
            positions: gpu.upload_positions(&positions)?,
            last: gpu.upload_token_ids(&last, t)?,
            h: zeros(c.hidden)?,
            h2: zeros(c.hidden)?,
            x: zeros(c.hidden)?,
            q: zeros(c.q_dim())?,
            k: zeros(c.kv_dim())?,
            v: zeros(c.kv_dim())?,
            attn: zeros(c.q_dim())?,
            lse: gpu.zeros_of(t * c.heads)?,
            o: zeros(c.hidden)?,
            gu: zeros(2 * c.mlp)?,
            act: zeros(c.mlp)?,
            down: zeros(c.hidden)?,
            rows: gpu.zeros_matrix_of(batch, c.hidden)?,
            logits: gpu.zeros_matrix_of(batch, c.vocab)?,
        })
    }

    /// The prefill of the prompts `prompt` (`[batch, len]`, the buffers' sizes): every block
    /// over all the tokens at once (GEMMs on tensor cores, causal prefill attention), the keys
    /// and values appended to `caches`; leaves the logits (f32, `batch x vocab`) of each
    /// prompt's last token in `b.logits`.
    pub fn prefill(
        &self,
        gpu: &Gpu,
        b: &mut PrefillBuffers,
        prompt: &[i32],
        caches: &mut [PagedKvCache<bf16>],
    ) -> Result<(), BoxError> {
        let c = &self.c;
        let (batch, len) = (b.batch, b.len);
        b.ids.update(prompt)?;
        gpu.embedding_into(&self.embed, &b.ids, &mut b.h)?;
        gpu.rms_norm_into(&b.h, &self.layers[0].attn_norm, c.eps, &mut b.x)?;
        let causal = AttentionOptions {
            causal: true,
            ..AttentionOptions::default()
        };
        for (i, (l, cache)) in self.layers.iter().zip(caches.iter_mut()).enumerate() {
            gpu.matmul_to(&b.x, &l.cols[Q], &mut b.q)?;
            gpu.matmul_to(&b.x, &l.cols[K], &mut b.k)?;
            gpu.matmul_to(&b.x, &l.cols[V], &mut b.v)?;
            gpu.rotary(
                &mut b.q,
                &mut b.k,
                &b.positions,
                &self.freqs,
                RotaryLayout::HalfSplit,
            )?;
            gpu.kv_cache_append(cache, b.k.as_vec(), b.v.as_vec(), len)?;
            let qt = AttentionTensor::contiguous(b.q.as_vec(), [batch, len, c.heads, c.head_dim])?;
            let kt = AttentionTensor::contiguous(b.k.as_vec(), [batch, len, c.kv_heads, c.head_dim])?;
            let vt = AttentionTensor::contiguous(b.v.as_vec(), [batch, len, c.kv_heads, c.head_dim])?;
            gpu.attention_into(&qt, &kt, &vt, &causal, b.attn.as_vec_mut(), &mut b.lse)?;
            gpu.matmul_to(&b.attn, &l.cols[O], &mut b.o)?;
            gpu.residual_rms_norm_into(&b.o, &b.h, &l.mlp_norm, c.eps, (&mut b.h2, &mut b.x))?;
            gpu.matmul_to(&b.x, &l.cols[GATE_UP], &mut b.gu)?;
            gpu.swiglu_into(&b.gu, &mut b.act)?;
            gpu.matmul_to(&b.act, &l.cols[DOWN], &mut b.down)?;
            gpu.residual_rms_norm_into(&b.down, &b.h2, self.next_norm(i), c.eps, (&mut b.h, &mut b.x))?;
        }
        // The LM head on each prompt's last row only, gathered by the embedding op.
        gpu.embedding_into(&b.x, &b.last, &mut b.rows)?;
        gpu.matmul_decode_to(&b.rows, &self.lm_head, &mut b.logits)?;
        Ok(())
    }

    /// The buffers of a decode step for `batch` sequences whose caches are `caches` (moved in:
    /// the graph holds them), the first input tokens `tokens` at positions `positions`.
    pub fn step_state(
        &self,
        gpu: &Gpu,
        caches: Vec<PagedKvCache<bf16>>,
        tokens: &[i32],
        positions: &[i32],
    ) -> Result<StepState, BoxError> {
        let c = &self.c;
        let batch = tokens.len();
        let zeros = |cols: usize| gpu.zeros_matrix_of::<bf16>(batch, cols);
        let query = DecodeQuery {
            heads: c.heads,
            q_len: 1,
            scale: None,
        };
        let first = caches.first().ok_or("a model of no layers")?;
        let attention = gpu.decode_workspace(first, query)?;
        let mut products = 0;
        for (n, k) in [
            (c.q_dim(), c.hidden),
            (c.kv_dim(), c.hidden),
            (c.hidden, c.q_dim()),
            (2 * c.mlp, c.hidden),
            (c.hidden, c.mlp),
            (c.vocab, c.hidden),
        ] {
            products = products.max(gpu.matmul_decode_workspace_len(batch, n, k)?);
        }
        Ok(StepState {
            ids: gpu.upload_token_ids(tokens, c.vocab)?,
            positions: gpu.upload_positions(positions)?,
            caches,
            attention,
            products: gpu.zeros_of(products.max(1))?,
            h: zeros(c.hidden)?,
            h2: zeros(c.hidden)?,
            x: zeros(c.hidden)?,
            q: zeros(c.q_dim())?,
            k: zeros(c.kv_dim())?,
            v: zeros(c.kv_dim())?,
            attn: zeros(c.q_dim())?,
            lse: gpu.zeros_of(batch * c.heads)?,
            o: zeros(c.hidden)?,
            gu: zeros(2 * c.mlp)?,
            act: zeros(c.mlp)?,
            down: zeros(c.hidden)?,
            logits: gpu.zeros_matrix_of(batch, c.vocab)?,
            tokens: gpu.zeros_of(batch)?,
        })
    }

    /// One decode step on `s`: every block for one new token per sequence (decode GEMVs on
    /// tensor cores, the token's K and V written at the reserved positions, decode attention on
    /// the device's lengths), the logits, and, when `greedy`, the next tokens (argmax). No
    /// allocation and no copy: what [`Model::capture_step`] captures.
    pub fn step(&self, g: &Gpu, s: &mut StepState, greedy: bool) -> gpukern::Result<()> {
        let c = &self.c;
        g.embedding_into(&self.embed, &s.ids, &mut s.h)?;
        g.rms_norm_into(&s.h, &self.layers[0].attn_norm, c.eps, &mut s.x)?;
        for (i, (l, cache)) in self.layers.iter().zip(s.caches.iter_mut()).enumerate() {
            g.matmul_decode_into(&s.x, &l.rows[Q], &mut s.q, &mut s.products)?;
            g.matmul_decode_into(&s.x, &l.rows[K], &mut s.k, &mut s.products)?;
            g.matmul_decode_into(&s.x, &l.rows[V], &mut s.v, &mut s.products)?;
            g.rotary(
                &mut s.q,
                &mut s.k,
                &s.positions,
                &self.freqs,
                RotaryLayout::HalfSplit,
            )?;
            g.kv_cache_write(cache, s.k.as_vec(), s.v.as_vec())?;
            g.decode_attention_into(
                s.q.as_vec(),
                cache,
                &mut s.attention,
                s.attn.as_vec_mut(),
                &mut s.lse,
            )?;
            g.matmul_decode_into(&s.attn, &l.rows[O], &mut s.o, &mut s.products)?;
            g.residual_rms_norm_into(&s.o, &s.h, &l.mlp_norm, c.eps, (&mut s.h2, &mut s.x))?;
            g.matmul_decode_into(&s.x, &l.rows[GATE_UP], &mut s.gu, &mut s.products)?;
            g.swiglu_into(&s.gu, &mut s.act)?;
            g.matmul_decode_into(&s.act, &l.rows[DOWN], &mut s.down, &mut s.products)?;
            g.residual_rms_norm_into(&s.down, &s.h2, self.next_norm(i), c.eps, (&mut s.h, &mut s.x))?;
        }
        g.matmul_decode_into(&s.x, &self.lm_head, &mut s.logits, &mut s.products)?;
        if greedy {
            g.sample_into(&s.logits, &SampleOptions::greedy(), &mut s.tokens)?;
        }
        Ok(())
    }

    /// [`Model::step`] captured once into a graph that holds `state`.
    pub fn capture_step<'a>(
        &'a self,
        gpu: &Gpu,
        state: StepState,
        greedy: bool,
    ) -> gpukern::Result<Graph<'a, StepState>> {
        gpu.capture_with(state, move |g, s| self.step(g, s, greedy))
    }
}

/// The activations of a prefill, `batch * len` rows each, with the token ids and positions.
pub struct PrefillBuffers {
    batch: usize,
    len: usize,
    ids: TokenIds<i32>,
    positions: RotaryPositions<i32>,
    /// Each prompt's last row among the `batch * len`.
    last: TokenIds<i32>,
    h: DeviceMatrix<bf16>,
    h2: DeviceMatrix<bf16>,
    x: DeviceMatrix<bf16>,
    q: DeviceMatrix<bf16>,
    k: DeviceMatrix<bf16>,
    v: DeviceMatrix<bf16>,
    attn: DeviceMatrix<bf16>,
    lse: DeviceVec<f32>,
    o: DeviceMatrix<bf16>,
    gu: DeviceMatrix<bf16>,
    act: DeviceMatrix<bf16>,
    down: DeviceMatrix<bf16>,
    rows: DeviceMatrix<bf16>,
    /// The logits of each prompt's last token, `batch x vocab`, f32.
    pub logits: DeviceMatrix<f32>,
}

/// Everything a decode step reads and writes besides the weights: the inputs updated between
/// replays (token ids, positions, the caches' reservations), the activations, the workspaces,
/// the logits and the next tokens.
pub struct StepState {
    /// The step's input tokens, `[batch]`.
    pub ids: TokenIds<i32>,
    /// Their positions, `[batch]`.
    pub positions: RotaryPositions<i32>,
    /// A KV cache per block.
    pub caches: Vec<PagedKvCache<bf16>>,
    attention: DecodeWorkspace,
    products: DeviceVec<f32>,
    h: DeviceMatrix<bf16>,
    h2: DeviceMatrix<bf16>,
    x: DeviceMatrix<bf16>,
    q: DeviceMatrix<bf16>,
    k: DeviceMatrix<bf16>,
    v: DeviceMatrix<bf16>,
    attn: DeviceMatrix<bf16>,
    lse: DeviceVec<f32>,
    o: DeviceMatrix<bf16>,
    gu: DeviceMatrix<bf16>,
    act: DeviceMatrix<bf16>,
    down: DeviceMatrix<bf16>,
    /// The step's logits, `batch x vocab`, f32.
    pub logits: DeviceMatrix<f32>,
    /// The next tokens (written by the step when greedy), `[batch]`.
    pub tokens: DeviceVec<i32>,
}

impl GraphBuffers for StepState {
    fn addresses(&self, out: &mut Vec<(usize, usize)>) {
        self.ids.addresses(out);
        self.positions.addresses(out);
        self.caches.addresses(out);
        self.attention.addresses(out);
        self.products.addresses(out);
        for m in [
            &self.h, &self.h2, &self.x, &self.q, &self.k, &self.v, &self.attn, &self.o, &self.gu, &self.act,
            &self.down,
        ] {
            m.addresses(out);
        }
        self.lse.addresses(out);
        self.logits.addresses(out);
        self.tokens.addresses(out);
    }
}
