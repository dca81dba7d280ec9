//! The plan of an attention call: which rung runs it, chosen once per call from the head dim
//! and the operands' alignment (a pure function, unit-tested without a `Gpu`).
//!
//! The rules, in order:
//! 1. [`AttentionAlgorithm::Rows`] asked for: the rows rung.
//! 2. On a GPU with `wgmma` (sm_90a), head dim 64, 128 or 256 ([`WGMMA_HEAD_DIMS`]), aligned
//!    operands as in rule 3, and tensor maps the driver encodes for `Q`, `K` and `V` (`[batch, seq,
//!    heads, head_dim]` nested as such, strides of whole 16 bytes, at least one key) and a
//!    positive scale (its softmax takes the row maxima of the unscaled scores): the Hopper rung
//!    with its consumers' ping-pong, `attention_wgmma_pingpong_d<D>` (at head dim 64 without a
//!    mask three consumers, `attention_wgmma_three_d64`: [`THREE_CONSUMERS_HEAD_DIM`]; causal from
//!    [`THREE_CONSUMERS_CAUSAL_MIN_KEYS`] keys, `attention_wgmma_three_causal_d64`), on a
//!    persistent grid where every block tile has the same work (no mask, or the soft cap alone)
//!    and, at every
//!    head dim, causal up to [`CAUSAL_PERSISTENT_MAX_KEYS`] keys (the kernel's walk snakes so
//!    that the static shares of long and short tiles even out); a block per tile where the mask
//!    makes them uneven otherwise (causal past that, window, ALiBi, documents). At head dim 256
//!    (64-key tiles) one tile at a time instead, every mask (its ping-pong runs no mask but the
//!    causal one): 583.5 TFLOP/s against the ping-pong's 422.4 at `8x2048x8x256` in
//!    `bench/experiments/third-wave/10582d5-attention-d256.jsonl`. In
//!    `bench/experiments/third-wave/e0302b7-attention.jsonl` the ping-pong beat one tile at a
//!    time (`attention_wgmma_d<D>`) at every shape, the persistent grid beat a block per tile at
//!    every shape without the mask (471.6 against 425.5 TFLOP/s at `16x1024x16x128`) and lost
//!    with it (379.5 against 534.7 at `1x16384x16x128`: each block's static share of causal
//!    tiles; before the snake walk). Its tensor-core products are `wgmma` (Hopper's full-rate
//!    instruction, where `mma.sync` is not) and each block reuses a KV tile for 128 query rows.
//! 3. Head dim 64 or 128 ([`FLASH_HEAD_DIMS`]) with 16-byte aligned operands (every buffer, every
//!    offset and stride a multiple of 8 elements): the fused rung, `attention_flash_d<D>`. It
//!    reads `K` and `V` once per 64 query rows where the rows rung reads them once per row,
//!    and multiplies on the tensor cores.
//! 4. Anything else: the rows rung (head dims 8..=256 in steps of 8, any strides). Head dim 256
//!    without `wgmma` goes there too: a fused `mma.sync` kernel would hold 128 f32 output
//!    accumulators and 64 `Q` registers per thread besides the scores, past the 255 registers
//!    ptxas allows without spilling (the Hopper rung reads `Q` from shared memory and takes
//!    64-key tiles there).
//!
//! [`AttentionAlgorithm::Flash`] asked for where rule 3 does not hold, or
//! [`AttentionAlgorithm::Wgmma`] where rule 2 does not, is an error that says what the rung
//! supports.

use kernels_gpu::attention::wgmma::WGMMA_HEAD_DIMS;
use kernels_gpu::attention::{FLASH_HEAD_DIMS, HEAD_DIM_MULTIPLE, MAX_HEAD_DIM};

/// The operation's name in errors.
pub(crate) const OP: &str = "attention";

/// What the plan needs to know about the call besides its head dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Every operand 16-byte aligned, offsets and strides multiples of 8 elements.
    pub(crate) aligned: bool,
    /// The GPU runs the sm_90a module (`wgmma`).
    pub(crate) wgmma: bool,
    /// The driver encodes the three operands' 4-D tensor maps (and there is a key).
    pub(crate) tensor_maps: bool,
    /// The scale is above zero.
    pub(crate) positive_scale: bool,
    /// Every block tile has the same work (no mask, or a soft cap without the causal mask).
    pub(crate) uniform: bool,
    /// The mask is none or the causal one (the one-tile `wgmma` schedule runs no other at head
    /// dims 64 and 128, the ping-pong none at 256).
    pub(crate) plain: bool,
    /// The persistent walk snakes for the mask and its rows see intervals of keys that move right
    /// from one row to the next: none or causal, or a custom mask whose type says so
    /// ([`MaskKernels`](super::MaskKernels)); such masks run on the walk up to
    /// [`CAUSAL_PERSISTENT_MAX_KEYS`] keys, as the causal one does.
    pub(crate) walks: bool,
    /// Keys per sequence (`kv_len`).
    pub(crate) kv_len: usize,
}

/// The most keys at which the causal mask runs on the persistent walk (its walk snakes,
/// `kernels_gpu::attention::wgmma`'s `Work::walk`); past it a block per tile. On the H100 the
/// persistent walk gained at 1024 to 4096 keys and lost at 16384, where the blocks' static
/// shares drift apart over a head's 8 MiB of `K` and `V` (causal, TFLOP/s, the snake's default
/// against the earlier default of a block per tile: 413.9 and 415.8 against 375.6 and 373.0 at
/// 16x1024x16x128, 588.3 and 588.3 against 549.2 and 548.7 at 4x4096x16x128, 334.8-337.7
/// against 306.1-308.6 at 8x2048x32x64; at 1x16384x16x128 the snake's persistent rung 444.0 and
/// 445.5 against a block per tile's 607.0 and 617.4,
/// `bench/experiments/third-wave/add87d8-fwd-snake-ab-{heldq,snake}-{1,2}.jsonl`).
/// Between 4096 and 16384 keys not measured. Head dim 256's one-tile schedule takes the same
/// walk: 545.9 against 487.9 at 8x2048x8x256 causal, 616.0 against 555.9 at 4x4096x8x256
/// (`bench/experiments/third-wave/b999aa7-fwd-d256-walk.jsonl`, the default against
/// `gpukern:wgmma`, a block per tile).
pub(crate) const CAUSAL_PERSISTENT_MAX_KEYS: usize = 4096;

/// The head dim whose calls without a mask run three consumer warpgroups under `Auto`
/// (`attention_wgmma_three_*`, `kernels_gpu::attention::wgmma::PingPongThree`): a KV tile's
/// products at head dim 64 take half the time of 128's while the softmax does not shrink, so
/// two consumers' products cover a third's softmax where one did not. On the H100, TFLOP/s,
/// three against two consumers (both on the persistent walk, one binary,
/// `bench/experiments/third-wave/69f9bbf-fwd-three-seq-1.jsonl`): 334.0 against 323.1 at
/// `32x512x32x64`, 392.6 against 377.8 at `16x1024x32x64`, 460.3 against 398.0 at
/// `8x2048x32x64`, 485.7 against 415.4 at `4x4096x32x64`, 511.9 against 427.5 at
/// `1x16384x32x64`. With the causal mask from [`THREE_CONSUMERS_CAUSAL_MIN_KEYS`] keys.
pub(crate) const THREE_CONSUMERS_HEAD_DIM: usize = 64;

/// The fewest keys at which the causal mask runs three consumer warpgroups at
/// [`THREE_CONSUMERS_HEAD_DIM`] (`attention_wgmma_three_causal_*`); below, two. With the causal
/// mask a head's block tiles differ in length, and at few keys its few 192-row tiles left the
/// walk uneven. On the H100, TFLOP/s, causal, three consumers against two (both on the
/// persistent walk, one binary each run, two runs,
/// `bench/experiments/third-wave/c373024-fwd-three-causal-ab-causal-{1,2}.jsonl`, the plan's
/// choice and `gpukern:wgmma-persistent`): 185.2 and 184.5 against 218.8 and 218.9 at
/// `32x512x32x64`, 253.3 and 252.0 against 290.4 and 290.5 at `16x1024x32x64`, 360.8 and 360.6
/// against 346.6 and 346.5 at `8x2048x32x64`, 423.3 and 423.5 against 381.6 and 382.5 at
/// `4x4096x32x64` (that binary counted the walk in 32 bits, since dropped). In the kernels as
/// merged (`bench/experiments/third-wave/b3e31ce-fwd-three-causal-ab-final-{1,2}.jsonl`, the
/// same pair): 359.3 and 358.4 against 345.8 and 347.4 at `8x2048x32x64`, 421.4 and 419.0
/// against 381.2 and 381.5 at `4x4096x32x64`. With the two `Q` buffers of head dim 64
/// (`kernels_gpu::attention::wgmma::wgmma_q_buffers`) three consumers from 512 keys again lost
/// below 2048: 212.1 and 210.8 against 233.2 and 234.2 at `32x512x32x64`, 269.8 and 267.0
/// against 301.4 and 300.3 at `16x1024x32x64`
/// (`bench/experiments/third-wave/c157047-fwd-q2-ab-{three,final}-{1,2}.jsonl`).
pub(crate) const THREE_CONSUMERS_CAUSAL_MIN_KEYS: usize = 2048;

/// What one attention call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttentionPlan {
    /// `attention_rows_*`: a warp per query row (the tutorial rung), any supported head dim
    /// and strides.
    Rows,
    /// `attention_flash_d<head_dim>_*`: the fused `mma.sync` rung.
    Flash {
        /// 64 or 128.
        head_dim: usize,
    },
    /// `attention_wgmma_d<head_dim>_*` (or `attention_wgmma_pingpong_d<head_dim>_*`): the
    /// Hopper rung.
    Wgmma {
        /// 64, 128 or 256.
        head_dim: usize,
        /// The consumers' ping-pong schedule (`kernels_gpu::attention::wgmma::PingPong`)
        /// rather than one tile at a time.
        ping_pong: bool,
        /// A block per multiprocessor walking the block tiles, rather than a block per tile.
        persistent: bool,
        /// Consumer warpgroups: 2 (`attention_wgmma_*`, 128 query rows a block), or 3
        /// (`attention_wgmma_three_*`, 192 rows: head dim 64 without a mask or causal from
        /// [`THREE_CONSUMERS_CAUSAL_MIN_KEYS`] keys, the plan's choice there).
        consumers: usize,
    },
}

impl AttentionPlan {
    /// The plan of `algorithm` for a checked call (head dim in `8..=256`, a multiple of 8) with
    /// the facts `f`. `Err` says why the rung asked for does not apply.
    pub(crate) fn choose(
        algorithm: AttentionAlgorithm,
        head_dim: usize,
        f: Facts,
    ) -> Result<AttentionPlan, String> {
        debug_assert!(head_dim % HEAD_DIM_MULTIPLE == 0 && head_dim <= MAX_HEAD_DIM);
        let aligned = f.aligned;
        let fused = FLASH_HEAD_DIMS.contains(&head_dim) && aligned;
        let hopper =
            WGMMA_HEAD_DIMS.contains(&head_dim) && aligned && f.wgmma && f.tensor_maps && f.positive_scale;
        // Head dim 256 (64-key tiles): the one-tile schedule runs every mask and is the default;
        // the ping-pong runs no mask but the causal one. At 64 and 128 the other way round.
        let wide = head_dim == 256;
        match algorithm {
            AttentionAlgorithm::Rows => Ok(AttentionPlan::Rows),
            AttentionAlgorithm::Wgmma if hopper && !f.plain && !wide => Err(
                "the one-tile wgmma schedule runs no mask but the causal one at head dims 64 and 128: \
                 ask for WgmmaPingPong (or Auto)"
                    .to_string(),
            ),
            AttentionAlgorithm::WgmmaPingPong | AttentionAlgorithm::WgmmaPersistent
                if hopper && !f.plain && wide =>
            {
                Err(
                    "the wgmma ping-pong schedule runs no mask but the causal one at head dim 256: \
                     ask for Wgmma (or Auto)"
                        .to_string(),
                )
            }
            AttentionAlgorithm::Wgmma if hopper => Ok(AttentionPlan::Wgmma {
                head_dim,
                ping_pong: false,
                persistent: false,
                consumers: 2,
            }),
            AttentionAlgorithm::Auto | AttentionAlgorithm::WgmmaFused if hopper => Ok(AttentionPlan::Wgmma {
                head_dim,
                ping_pong: !wide,
                // The causal mask's block tiles differ in length: the kernel's walk snakes
                // (`Work::walk`) so that the static share stays even, up to
                // `CAUSAL_PERSISTENT_MAX_KEYS`.
                persistent: f.uniform || (f.walks && f.kv_len <= CAUSAL_PERSISTENT_MAX_KEYS),
                consumers: if head_dim == THREE_CONSUMERS_HEAD_DIM
                    && f.plain
                    && (f.uniform || f.kv_len >= THREE_CONSUMERS_CAUSAL_MIN_KEYS)
                {
                    3
                } else {
                    2
                },
            }),
            AttentionAlgorithm::WgmmaPingPong if hopper => Ok(AttentionPlan::Wgmma {
                head_dim,
                ping_pong: true,
                persistent: false,
                consumers: 2,
            }),
            AttentionAlgorithm::WgmmaPersistent if hopper => Ok(AttentionPlan::Wgmma {
                head_dim,
                ping_pong: true,
                persistent: true,
                consumers: 2,
            }),
            AttentionAlgorithm::Wgmma
            | AttentionAlgorithm::WgmmaPingPong
            | AttentionAlgorithm::WgmmaPersistent
            | AttentionAlgorithm::WgmmaFused => Err(format!(
                "the wgmma rung takes a GPU with wgmma (compute capability 9.0){}, head dims \
                 {WGMMA_HEAD_DIMS:?}, 16-byte aligned operands and strides nested as [batch, seq, \
                 heads, head_dim] (the copy engine's tensor maps), at least one key and a positive \
                 scale; not head dim {head_dim}{}{}{}",
                if f.wgmma { "" } else { " (this one has none)" },
                if aligned { "" } else { " with these strides" },
                if f.tensor_maps {
                    ""
                } else {
                    " with these tensor maps"
                },
                if f.positive_scale {
                    ""
                } else {
                    " with a scale at or below zero"
                },
            )),
            AttentionAlgorithm::Auto if fused => Ok(AttentionPlan::Flash { head_dim }),
            AttentionAlgorithm::Auto => Ok(AttentionPlan::Rows),
            AttentionAlgorithm::Flash if fused => Ok(AttentionPlan::Flash { head_dim }),
            AttentionAlgorithm::Flash => Err(format!(
                "the fused rung takes head dims {FLASH_HEAD_DIMS:?} with 16-byte aligned operands \
                 (offsets and strides multiples of 8 elements), not head dim {head_dim}{}",
                if aligned { "" } else { " with these strides" }
            )),
        }
    }
}

/// Which rung computes an attention call. All give the same output up to rounding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AttentionAlgorithm {
    /// The plan's choice (the module documentation's rules): the Hopper rung where it applies
    /// (persistent without a mask, and up to 4096 keys causal or with a custom mask whose type
    /// says `CONTIGUOUS`), else the fused rung where it
    /// applies, else the rows rung.
    #[default]
    Auto,
    /// A warp per query row (`attention_rows_*`), the tutorial rung: every shape, no 16-bit
    /// rounding of the probabilities; the reference the fused rung is checked against.
    Rows,
    /// The fused `mma.sync` rung (`attention_flash_d64_*`, `attention_flash_d128_*`): head dims
    /// 64 and 128, 16-byte aligned operands; an error elsewhere.
    Flash,
    /// The Hopper rung one tile at a time (`attention_wgmma_d<D>_*`): a GPU with `wgmma`, head
    /// dims 64, 128 and 256, 16-byte aligned operands whose tensor maps the driver encodes; at
    /// 64 and 128 no mask but the causal one, at 256 every mask (`attention_wgmma_general_d256_*`,
    /// and the plan's choice there); an error elsewhere. In the backward this and the two
    /// schedules below ask for the backward's Hopper rung (`attention_bwd_wgmma_*`, head dims 64
    /// and 128).
    Wgmma,
    /// The Hopper rung with FlashAttention-3's ping-pong schedule of its two consumer
    /// warpgroups (`attention_wgmma_pingpong_[causal_|general_]d<D>_*`): where
    /// [`AttentionAlgorithm::Wgmma`] applies, at head dim 256 with no mask but the causal one;
    /// an error elsewhere.
    WgmmaPingPong,
    /// [`AttentionAlgorithm::WgmmaPingPong`] on a persistent grid (a block per multiprocessor,
    /// each walking several block tiles, the next tile's copies under this one's last products):
    /// where [`AttentionAlgorithm::Wgmma`] applies; an error elsewhere.
    WgmmaPersistent,
    /// The backward's one-kernel Hopper rung, FlashAttention-3's (`attention_bwd_wgmma_fused_*`
    /// and `attention_bwd_wgmma_dq_convert_*`): `dK` and `dV` per 128-key block as
    /// [`AttentionAlgorithm::Wgmma`]'s backward, and `dQ` added by those blocks into an f32
    /// buffer by atomic reductions, so five products per tile where the two-kernel rung runs
    /// seven, and the bits of `dq` may differ from run to run. Where the backward's wgmma rung
    /// applies and the call is not [`deterministic`](super::AttentionOptions::deterministic); an
    /// error elsewhere. `Auto`'s backward at head dim 128 when not deterministic (427.1 against
    /// 388.8 TFLOP/s at 4 x 4096 x 16 x 128, `bench/experiments/third-wave/858a660-attention-bwd-gpukern.jsonl`). In the forward
    /// it names no schedule of its own: the plan's Hopper choice (as `Auto` where the Hopper rung
    /// applies), an error where it does not, so that one set of options serves both passes.
    WgmmaFused,
}

impl AttentionAlgorithm {
    /// Every algorithm.
    pub const ALL: [AttentionAlgorithm; 7] = [
        AttentionAlgorithm::Auto,
        AttentionAlgorithm::Rows,
        AttentionAlgorithm::Flash,
        AttentionAlgorithm::Wgmma,
        AttentionAlgorithm::WgmmaPingPong,
        AttentionAlgorithm::WgmmaPersistent,
        AttentionAlgorithm::WgmmaFused,
    ];

    /// A short name: `auto`, `rows`, `flash`, `wgmma`, `wgmma-pingpong`, `wgmma-persistent`,
    /// `wgmma-fused`; the bench's `impl` is `gpukern:<name>`.
    pub fn name(self) -> &'static str {
        match self {
            AttentionAlgorithm::Auto => "auto",
            AttentionAlgorithm::Rows => "rows",
            AttentionAlgorithm::Flash => "flash",
            AttentionAlgorithm::Wgmma => "wgmma",
            AttentionAlgorithm::WgmmaPingPong => "wgmma-pingpong",
            AttentionAlgorithm::WgmmaPersistent => "wgmma-persistent",
            AttentionAlgorithm::WgmmaFused => "wgmma-fused",
        }
    }
}

/// The sizes of a checked attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Batch.
    pub batch: usize,
    /// Query rows per batch and head.
    pub q_len: usize,
    /// Keys (and values) per batch and head.
    pub kv_len: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (dividing `heads`).
    pub kv_heads: usize,
    /// Elements per head.
    pub head_dim: usize,
}

impl AttentionShape {
    /// Query rows of the whole call: `batch * heads * q_len`, the log-sum-exp's length.
    pub fn rows(&self) -> usize {
        self.batch * self.heads * self.q_len
    }

    /// Elements of the output: `batch * q_len * heads * head_dim`.
    pub fn out_len(&self) -> usize {
        self.rows() * self.head_dim
    }

    /// The forward pass's flops as FlashAttention counts them: `4 batch heads q_len kv_len
    /// head_dim` (two products), halved with the causal mask.
    pub fn flops(&self, causal: bool) -> f64 {
        let f = 4.0 * (self.rows() as f64) * (self.kv_len as f64) * (self.head_dim as f64);
        if causal { f / 2.0 } else { f }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every head dim the host accepts has a rung: the fused one at 64 and 128 when aligned,
    /// the rows one elsewhere (on each side of 64 and 128, at 256, and unaligned).
    /// Facts of a GPU without `wgmma`.
    fn pre_hopper(aligned: bool) -> Facts {
        Facts {
            aligned,
            wgmma: false,
            tensor_maps: true,
            positive_scale: true,
            uniform: true,
            plain: true,
            walks: true,
            kv_len: 1024,
        }
    }

    #[test]
    fn each_head_dim_and_alignment_has_its_rung() {
        let auto = |d, aligned| AttentionPlan::choose(AttentionAlgorithm::Auto, d, pre_hopper(aligned));
        for d in (HEAD_DIM_MULTIPLE..=MAX_HEAD_DIM).step_by(HEAD_DIM_MULTIPLE) {
            let want = if d == 64 || d == 128 {
                AttentionPlan::Flash { head_dim: d }
            } else {
                AttentionPlan::Rows
            };
            assert_eq!(auto(d, true), Ok(want), "head dim {d}");
            assert_eq!(auto(d, false), Ok(AttentionPlan::Rows), "head dim {d}, unaligned");
            assert_eq!(
                AttentionPlan::choose(AttentionAlgorithm::Rows, d, pre_hopper(true)),
                Ok(AttentionPlan::Rows)
            );
        }
    }

    /// The fused rung asked for: taken where it applies, an error naming what it supports
    /// elsewhere.
    #[test]
    fn flash_on_request_or_an_error() {
        let flash = |d, aligned| AttentionPlan::choose(AttentionAlgorithm::Flash, d, pre_hopper(aligned));
        assert_eq!(flash(64, true), Ok(AttentionPlan::Flash { head_dim: 64 }));
        assert_eq!(flash(128, true), Ok(AttentionPlan::Flash { head_dim: 128 }));
        for (d, aligned) in [
            (56, true),
            (72, true),
            (120, true),
            (136, true),
            (256, true),
            (64, false),
        ] {
            let err = flash(d, aligned).expect_err("not fused");
            assert!(err.contains("[64, 128]"), "{err}");
        }
    }

    /// On a GPU with `wgmma` the Hopper rung takes head dims 64, 128 and 256 when the operands
    /// are aligned and their tensor maps encode; one fact missing sends the call to the fused
    /// `mma.sync` rung (or the rows rung: always at 256), and asking for the wgmma rung then is
    /// an error.
    #[test]
    fn wgmma_where_every_fact_holds() {
        let all = Facts {
            aligned: true,
            wgmma: true,
            tensor_maps: true,
            positive_scale: true,
            uniform: true,
            plain: true,
            walks: true,
            kv_len: 1024,
        };
        let choose = |alg, d, f| AttentionPlan::choose(alg, d, f);
        for d in (HEAD_DIM_MULTIPLE..=MAX_HEAD_DIM).step_by(HEAD_DIM_MULTIPLE) {
            let want = match d {
                64 | 128 | 256 => AttentionPlan::Wgmma {
                    head_dim: d,
                    ping_pong: d != 256,
                    persistent: true,
                    consumers: if d == 64 { 3 } else { 2 },
                },
                _ => AttentionPlan::Rows,
            };
            assert_eq!(choose(AttentionAlgorithm::Auto, d, all), Ok(want), "head dim {d}");
        }
        for (d, f) in [
            (64, Facts { wgmma: false, ..all }),
            (256, Facts { wgmma: false, ..all }),
            (
                256,
                Facts {
                    tensor_maps: false,
                    ..all
                },
            ),
            (
                128,
                Facts {
                    aligned: false,
                    ..all
                },
            ),
            (
                128,
                Facts {
                    tensor_maps: false,
                    ..all
                },
            ),
            (
                64,
                Facts {
                    tensor_maps: false,
                    ..all
                },
            ),
            (
                128,
                Facts {
                    positive_scale: false,
                    ..all
                },
            ),
        ] {
            let fallback = if f.aligned && d != 256 {
                AttentionPlan::Flash { head_dim: d }
            } else {
                AttentionPlan::Rows
            };
            assert_eq!(choose(AttentionAlgorithm::Auto, d, f), Ok(fallback), "{d} {f:?}");
            for alg in [
                AttentionAlgorithm::Wgmma,
                AttentionAlgorithm::WgmmaPingPong,
                AttentionAlgorithm::WgmmaPersistent,
            ] {
                let err = choose(alg, d, f).expect_err("not wgmma");
                assert!(err.contains("[64, 128, 256]"), "{err}");
            }
        }
        for d in [56, 72, 120, 136, 248] {
            assert!(choose(AttentionAlgorithm::Wgmma, d, all).is_err(), "head dim {d}");
            assert!(
                choose(AttentionAlgorithm::WgmmaPingPong, d, all).is_err(),
                "head dim {d}"
            );
        }
        assert_eq!(
            choose(AttentionAlgorithm::Wgmma, 128, all),
            Ok(AttentionPlan::Wgmma {
                head_dim: 128,
                ping_pong: false,
                persistent: false,
                consumers: 2,
            })
        );
        assert_eq!(
            choose(AttentionAlgorithm::Wgmma, 256, all),
            Ok(AttentionPlan::Wgmma {
                head_dim: 256,
                ping_pong: false,
                persistent: false,
                consumers: 2,
            })
        );
        assert_eq!(
            choose(AttentionAlgorithm::WgmmaPingPong, 64, all),
            Ok(AttentionPlan::Wgmma {
                head_dim: 64,
                ping_pong: true,
                persistent: false,
                consumers: 2,
            })
        );
        // A mask other than causal: the ping-pong (the one-tile schedule runs none), and an
        // error for the one-tile schedule asked for.
        let masked = Facts {
            uniform: false,
            plain: false,
            walks: false,
            ..all
        };
        assert!(matches!(
            choose(AttentionAlgorithm::Auto, 128, masked),
            Ok(AttentionPlan::Wgmma { ping_pong: true, .. })
        ));
        assert!(choose(AttentionAlgorithm::Wgmma, 128, masked).is_err());
        // Head dim 256: one tile at a time, every mask; the ping-pong with a mask an error.
        assert_eq!(
            choose(AttentionAlgorithm::Auto, 256, masked),
            Ok(AttentionPlan::Wgmma {
                head_dim: 256,
                ping_pong: false,
                persistent: false,
                consumers: 2,
            })
        );
        assert_eq!(
            choose(AttentionAlgorithm::Wgmma, 256, masked),
            choose(AttentionAlgorithm::Auto, 256, masked)
        );
        for alg in [
            AttentionAlgorithm::WgmmaPingPong,
            AttentionAlgorithm::WgmmaPersistent,
        ] {
            let err = choose(alg, 256, masked).expect_err("no ping-pong General at 256");
            assert!(err.contains("head dim 256"), "{err}");
        }
        assert_eq!(
            choose(AttentionAlgorithm::Auto, 256, all),
            Ok(AttentionPlan::Wgmma {
                head_dim: 256,
                ping_pong: false,
                persistent: true,
                consumers: 2,
            })
        );
        // A mask other than causal whose walk snakes (a custom mask saying so): the walk up to
        // `CAUSAL_PERSISTENT_MAX_KEYS` keys as the causal mask, a block per tile past it, at every
        // head dim; the plain schedules otherwise as for the other masks.
        for (kv_len, persistent) in [
            (CAUSAL_PERSISTENT_MAX_KEYS, true),
            (CAUSAL_PERSISTENT_MAX_KEYS + 1, false),
        ] {
            let walking = Facts {
                walks: true,
                kv_len,
                ..masked
            };
            for (d, ping_pong) in [(64, true), (128, true), (256, false)] {
                assert_eq!(
                    choose(AttentionAlgorithm::Auto, d, walking),
                    Ok(AttentionPlan::Wgmma {
                        head_dim: d,
                        ping_pong,
                        persistent,
                        consumers: 2,
                    }),
                    "head dim {d}, {kv_len} keys"
                );
            }
            assert!(choose(AttentionAlgorithm::Wgmma, 128, walking).is_err());
        }
        // Causal: the persistent walk too (its walk snakes; at head dim 256 one tile at a time).
        let causal = Facts {
            uniform: false,
            ..all
        };
        for d in [64, 128] {
            assert_eq!(
                choose(AttentionAlgorithm::Auto, d, causal),
                Ok(AttentionPlan::Wgmma {
                    head_dim: d,
                    ping_pong: true,
                    persistent: true,
                    consumers: 2,
                })
            );
        }
        // At head dim 64, causal, three consumers from `THREE_CONSUMERS_CAUSAL_MIN_KEYS` keys:
        // on the walk, and a block per tile past `CAUSAL_PERSISTENT_MAX_KEYS`.
        for (kv_len, consumers, persistent) in [
            (THREE_CONSUMERS_CAUSAL_MIN_KEYS - 1, 2, true),
            (THREE_CONSUMERS_CAUSAL_MIN_KEYS, 3, true),
            (CAUSAL_PERSISTENT_MAX_KEYS + 1, 3, false),
        ] {
            assert_eq!(
                choose(AttentionAlgorithm::Auto, 64, Facts { kv_len, ..causal }),
                Ok(AttentionPlan::Wgmma {
                    head_dim: 64,
                    ping_pong: true,
                    persistent,
                    consumers,
                })
            );
        }
        // At `CAUSAL_PERSISTENT_MAX_KEYS` keys the walk, one key past it, causal, a block per tile.
        assert_eq!(
            choose(
                AttentionAlgorithm::Auto,
                128,
                Facts {
                    kv_len: CAUSAL_PERSISTENT_MAX_KEYS,
                    ..causal
                }
            ),
            Ok(AttentionPlan::Wgmma {
                head_dim: 128,
                ping_pong: true,
                persistent: true,
                consumers: 2,
            })
        );
        assert_eq!(
            choose(
                AttentionAlgorithm::Auto,
                128,
                Facts {
                    kv_len: CAUSAL_PERSISTENT_MAX_KEYS + 1,
                    ..causal
                }
            ),
            Ok(AttentionPlan::Wgmma {
                head_dim: 128,
                ping_pong: true,
                persistent: false,
                consumers: 2,
            })
        );
        // Without a mask the walk at any length.
        assert_eq!(
            choose(
                AttentionAlgorithm::Auto,
                128,
                Facts {
                    kv_len: 4 * CAUSAL_PERSISTENT_MAX_KEYS,
                    ..all
                }
            ),
            Ok(AttentionPlan::Wgmma {
                head_dim: 128,
                ping_pong: true,
                persistent: true,
                consumers: 2,
            })
        );
        assert_eq!(
            choose(AttentionAlgorithm::Auto, 256, causal),
            Ok(AttentionPlan::Wgmma {
                head_dim: 256,
                ping_pong: false,
                persistent: true,
                consumers: 2,
            })
        );
        assert_eq!(
            choose(AttentionAlgorithm::WgmmaPersistent, 128, all),
            Ok(AttentionPlan::Wgmma {
                head_dim: 128,
                ping_pong: true,
                persistent: true,
                consumers: 2,
            })
        );
        // Three consumers only for `Auto` at head dim 64 without a mask or with the causal one
        // (above): the ping-pong and the persistent walk asked for run two, as do the other masks
        // (the soft cap alone among them).
        for alg in [
            AttentionAlgorithm::WgmmaPingPong,
            AttentionAlgorithm::WgmmaPersistent,
        ] {
            assert!(matches!(
                choose(alg, 64, all),
                Ok(AttentionPlan::Wgmma { consumers: 2, .. })
            ));
        }
        assert!(matches!(
            choose(AttentionAlgorithm::Auto, 64, Facts { plain: false, ..all }),
            Ok(AttentionPlan::Wgmma { consumers: 2, .. })
        ));
        assert_eq!(
            choose(AttentionAlgorithm::Flash, 128, all),
            Ok(AttentionPlan::Flash { head_dim: 128 })
        );
    }

    /// `WgmmaFused` names a backward schedule: in the forward it is `Auto`'s Hopper choice
    /// where the Hopper rung applies, and an error where it does not (as the other wgmma names).
    #[test]
    fn wgmma_fused_is_the_forward_plans_hopper_choice() {
        let all = Facts {
            aligned: true,
            wgmma: true,
            tensor_maps: true,
            positive_scale: true,
            uniform: true,
            plain: true,
            walks: true,
            kv_len: 1024,
        };
        for d in [64, 128, 256] {
            for f in [
                all,
                Facts {
                    uniform: false,
                    ..all
                },
            ] {
                assert_eq!(
                    AttentionPlan::choose(AttentionAlgorithm::WgmmaFused, d, f),
                    AttentionPlan::choose(AttentionAlgorithm::Auto, d, f),
                    "head dim {d}"
                );
            }
            let err = AttentionPlan::choose(AttentionAlgorithm::WgmmaFused, d, pre_hopper(true))
                .expect_err("no wgmma");
            assert!(err.contains("[64, 128, 256]"), "{err}");
        }
        assert!(AttentionPlan::choose(AttentionAlgorithm::WgmmaFused, 72, all).is_err());
    }
}
