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

/// Which kernel draws the tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SampleAlgorithm {
    /// `sample_search_*`: each filter's threshold by bisection over the logits' order keys,
    /// one pass over the row per step (the tutorial rung).
    #[default]
    Search,
}

impl SampleAlgorithm {
    /// Every algorithm, for tests and the bench.
    pub const ALL: [SampleAlgorithm; 1] = [SampleAlgorithm::Search];

    /// The one spelling of the algorithm: the bench's impl label and the kernel's name part.
    pub fn name(self) -> &'static str {
        match self {
            SampleAlgorithm::Search => "search",
        }
    }
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
    pub(crate) algorithm: SampleAlgorithm,
}

impl SamplePlan {
    /// The plan for rows of `cols` logits with `options`, or the option that is out of range.
    pub(crate) fn choose(
        options: &SampleOptions,
        cols: usize,
        algorithm: SampleAlgorithm,
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
        Ok(SamplePlan {
            inv_t,
            top_k: if options.top_k >= cols { 0 } else { options.top_k },
            top_p: p,
            algorithm,
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
        SamplePlan::choose(&options, cols, SampleAlgorithm::Search)
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
}
