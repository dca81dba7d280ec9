//! The plan of a sampling call: the options checked and turned into the kernel's arguments once,
//! and the kernel that runs them.

use crate::error::{Error, Result};

/// The operation's name in errors.
pub(crate) const OP: &str = "sample";

/// How the next token of each row is drawn (see `kernels_gpu::sample` for every rule).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleOptions {
    /// The logits are divided by it before the softmax; `0.0` is greedy (the first index of the
    /// row's largest logit). Finite and not negative.
    pub temperature: f32,
    /// Keep the tokens whose logit is at least the `top_k`-th largest (ties kept); `0` (or at
    /// least the row's length) keeps every token.
    pub top_k: usize,
    /// Keep the fewest most probable tokens whose mass reaches `top_p` of the kept mass (ties
    /// kept); in `(0, 1]`, `1.0` keeps every token.
    pub top_p: f32,
    /// The generator's key: the same seed, offset and logits give the same tokens, on the GPU
    /// and in the simulator.
    pub seed: u64,
    /// The generator's counter, with the row: a decode loop passes its step here, so that each
    /// step draws new numbers under one seed.
    pub offset: u64,
}

impl Default for SampleOptions {
    /// Temperature 1, no filter, seed 0, offset 0.
    fn default() -> Self {
        SampleOptions {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
            offset: 0,
        }
    }
}

impl SampleOptions {
    /// Greedy decoding: temperature 0.
    pub fn greedy() -> Self {
        SampleOptions {
            temperature: 0.0,
            ..SampleOptions::default()
        }
    }
}

/// Which rung draws the tokens (each draws the same token for a seed, up to f32 rounding at a
/// boundary between two tokens: `kernels_gpu::sample`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SampleAlgorithm {
    /// `sample_search_*`: each filter's threshold by bisection over the logits' order keys,
    /// one pass over the row per step (the tutorial rung).
    Search,
    /// The fast rung: greedy rows and rows without filters split over a thread-block cluster
    /// and read once (`sample_cluster_*`, sm_90); filtered rows (and every row before sm_90)
    /// one block per row, each threshold by a radix select of at most three passes
    /// (`sample_radix_*`). The default: 4.1-15.2x the tutorial rung at the bench shapes on the
    /// H200 (0.1676 against 2.5528 ms at 64 x 128256,
    /// `bench/experiments/third-wave/e28ef33-sample.jsonl`).
    #[default]
    Radix,
}

impl SampleAlgorithm {
    /// Every algorithm, for tests and the bench.
    pub const ALL: [SampleAlgorithm; 2] = [SampleAlgorithm::Search, SampleAlgorithm::Radix];

    /// The one spelling of the algorithm: the bench's impl label and the kernel's name part.
    pub fn name(self) -> &'static str {
        match self {
            SampleAlgorithm::Search => "search",
            SampleAlgorithm::Radix => "radix",
        }
    }
}

/// Rows per call below which a cluster row takes more than one block: the cluster kernel aims at
/// about this many blocks (two per multiprocessor of an H200). A constant, not the device's
/// count, so that the cluster's size (which orders the draw's sums) and so the token is the same
/// on every sm_90 GPU and in the simulator.
pub(crate) const CLUSTER_TARGET_BLOCKS: usize = 256;

/// Fewest columns in one block's share of a cluster row (8 KiB of f32: 4 loads per thread of
/// 512, below which another block costs more than it reads).
pub(crate) const CLUSTER_MIN_SHARE: usize = 2048;

/// The kernel a plan launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SampleKernel {
    /// `sample_search_*`, one block per row.
    Search,
    /// `sample_radix_*`, one block per row.
    Radix,
    /// `sample_cluster_*`, a cluster of `blocks` blocks per row.
    Cluster {
        /// Blocks per cluster, 1 to `SAMPLE_CLUSTER_MAX_BLOCKS`.
        blocks: u32,
    },
}

/// The cluster kernel's blocks per row for `rows x cols`: the power of two nearest above
/// `CLUSTER_TARGET_BLOCKS / rows`, at most `max_blocks`, halved while a share would fall below
/// `CLUSTER_MIN_SHARE` columns.
pub(crate) fn cluster_blocks((rows, cols): (usize, usize), max_blocks: u32) -> u32 {
    let mut blocks = CLUSTER_TARGET_BLOCKS
        .div_ceil(rows.max(1))
        .next_power_of_two()
        .min(max_blocks.max(1) as usize);
    while blocks > 1 && cols / blocks < CLUSTER_MIN_SHARE {
        blocks /= 2;
    }
    blocks as u32
}

/// The kernel's arguments for one call, from checked options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SamplePlan {
    /// `1 / temperature`; infinite for greedy rows.
    pub(crate) inv_t: f32,
    /// The top-k count, 0 when it keeps every token (`top_k == 0` or `top_k >= cols`).
    pub(crate) top_k: usize,
    /// The top-p fraction, 1 when it keeps every token.
    pub(crate) top_p: f32,
    /// The kernel.
    pub(crate) kernel: SampleKernel,
}

impl SamplePlan {
    /// The plan for `rows x cols` logits with `options` on a device with thread-block clusters
    /// or without (`clusters`), or the option that is out of range. The rules, in order: the
    /// tutorial rung when asked for; rows without top-k or top-p (greedy ones too) on the cluster
    /// kernel where there are clusters (one read of the row: the greedy and `t1` rows of
    /// `bench/experiments/new-families/`); the rest on the radix kernel.
    pub(crate) fn choose(
        options: &SampleOptions,
        (rows, cols): (usize, usize),
        algorithm: SampleAlgorithm,
        clusters: bool,
    ) -> Result<SamplePlan> {
        let t = options.temperature;
        if !(t.is_finite() && t >= 0.0) {
            return Err(invalid(format!(
                "temperature {t}: must be finite and not negative"
            )));
        }
        let p = options.top_p;
        if !(p > 0.0 && p <= 1.0) {
            return Err(invalid(format!("top_p {p}: must lie in (0, 1]")));
        }
        let inv_t = if t == 0.0 { f32::INFINITY } else { 1.0 / t };
        if t > 0.0 && !inv_t.is_finite() {
            return Err(invalid(format!(
                "temperature {t}: too small (1 / t overflows f32)"
            )));
        }
        let top_k = if options.top_k >= cols { 0 } else { options.top_k };
        let kernel = match algorithm {
            SampleAlgorithm::Search => SampleKernel::Search,
            SampleAlgorithm::Radix if clusters && top_k == 0 && p == 1.0 => SampleKernel::Cluster {
                blocks: cluster_blocks((rows, cols), kernels_gpu::sample::SAMPLE_CLUSTER_MAX_BLOCKS),
            },
            SampleAlgorithm::Radix => SampleKernel::Radix,
        };
        Ok(SamplePlan {
            inv_t,
            top_k,
            top_p: p,
            kernel,
        })
    }
}

/// An option out of range.
fn invalid(detail: String) -> Error {
    Error::InvalidArgument { op: OP, detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(options: SampleOptions, cols: usize) -> Result<SamplePlan> {
        SamplePlan::choose(&options, (1, cols), SampleAlgorithm::Search, true)
    }

    #[test]
    fn temperature_zero_is_greedy_and_others_invert() {
        assert_eq!(plan(SampleOptions::greedy(), 10).unwrap().inv_t, f32::INFINITY);
        assert_eq!(
            plan(
                SampleOptions {
                    temperature: 0.5,
                    ..Default::default()
                },
                10
            )
            .unwrap()
            .inv_t,
            2.0
        );
        assert_eq!(plan(SampleOptions::default(), 10).unwrap().inv_t, 1.0);
    }

    #[test]
    fn bad_options_are_refused() {
        for t in [-1.0, f32::NAN, f32::INFINITY, 1e-39] {
            assert!(
                plan(
                    SampleOptions {
                        temperature: t,
                        ..Default::default()
                    },
                    10
                )
                .is_err(),
                "t = {t}"
            );
        }
        for p in [0.0, -0.5, 1.0001, f32::NAN] {
            assert!(
                plan(
                    SampleOptions {
                        top_p: p,
                        ..Default::default()
                    },
                    10
                )
                .is_err(),
                "p = {p}"
            );
        }
        assert!(
            plan(
                SampleOptions {
                    top_p: f32::MIN_POSITIVE,
                    ..Default::default()
                },
                10
            )
            .is_ok()
        );
    }

    /// Top-k on each side of the row's length: below it filters, at or past it keeps all.
    #[test]
    fn top_k_at_or_past_the_row_keeps_every_token() {
        let k = |top_k| {
            plan(
                SampleOptions {
                    top_k,
                    ..Default::default()
                },
                10,
            )
            .unwrap()
            .top_k
        };
        assert_eq!(k(0), 0);
        assert_eq!(k(1), 1);
        assert_eq!(k(9), 9);
        assert_eq!(k(10), 0);
        assert_eq!(k(11), 0);
    }

    /// The fast rung: clusters for greedy and unfiltered rows where there are clusters, the
    /// radix kernel for filtered rows and before sm_90; the tutorial rung only when asked for.
    #[test]
    fn the_fast_rung_takes_clusters_for_unfiltered_rows_only() {
        let radix = |options: SampleOptions, clusters| {
            SamplePlan::choose(&options, (1, 32000), SampleAlgorithm::Radix, clusters)
                .unwrap()
                .kernel
        };
        let cluster8 = SampleKernel::Cluster { blocks: 8 };
        assert_eq!(radix(SampleOptions::greedy(), true), cluster8);
        assert_eq!(radix(SampleOptions::default(), true), cluster8);
        // Top-k past the row keeps everything: unfiltered.
        assert_eq!(
            radix(
                SampleOptions {
                    top_k: 40000,
                    ..Default::default()
                },
                true
            ),
            cluster8
        );
        assert_eq!(
            radix(
                SampleOptions {
                    top_k: 50,
                    ..Default::default()
                },
                true
            ),
            SampleKernel::Radix
        );
        assert_eq!(
            radix(
                SampleOptions {
                    top_p: 0.9,
                    ..Default::default()
                },
                true
            ),
            SampleKernel::Radix
        );
        assert_eq!(radix(SampleOptions::greedy(), false), SampleKernel::Radix);
        assert_eq!(
            SamplePlan::choose(
                &SampleOptions::greedy(),
                (1, 32000),
                SampleAlgorithm::Search,
                true
            )
            .unwrap()
            .kernel,
            SampleKernel::Search
        );
    }

    /// The bench's shapes: 8 blocks for one row of 32000, 4 for 64 rows, 1 from 256 rows on;
    /// short rows take fewer blocks (each share at least `CLUSTER_MIN_SHARE` columns).
    #[test]
    fn cluster_size_follows_the_rows_and_the_row_length() {
        assert_eq!(cluster_blocks((1, 32000), 8), 8);
        assert_eq!(cluster_blocks((8, 32000), 8), 8);
        assert_eq!(cluster_blocks((64, 32000), 8), 4);
        assert_eq!(cluster_blocks((64, 128256), 8), 4);
        assert_eq!(cluster_blocks((100, 128256), 8), 4);
        assert_eq!(cluster_blocks((256, 128256), 8), 1);
        assert_eq!(cluster_blocks((1, 5000), 8), 2);
        assert_eq!(cluster_blocks((1, 7), 8), 1);
        assert_eq!(cluster_blocks((0, 7), 8), 1);
    }
}
