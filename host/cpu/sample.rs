//! The sampling family's reference: the same rules as `kernels_gpu::sample`, written the
//! textbook way (sort the row, cut the prefix), in f64.

use gpukern_device::random;
use kernels_gpu::sample::{NEG_INF_KEY, POS_INF_KEY, order_key};

use crate::ops::sample::SampleOptions;

/// The token of each row of the row-major `rows x cols` logits `x` under `options` (checked by
/// the caller as [`crate::Gpu::sample`] checks them), with the draw's uniform number nudged by
/// `nudge` (0 for the draw itself; tests ask at `u ± nudge` to allow for the device's f32 sums
/// near a boundary between two tokens).
pub fn sample_rows(x: &[f32], cols: usize, options: &SampleOptions, nudge: f64) -> Vec<i32> {
    x.chunks(cols.max(1))
        .enumerate()
        .map(|(r, row)| sample_row(row, r, options, nudge))
        .collect()
}

/// A row whose device token the reference does not accept (see [`sample_rows_rejected`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleRejection {
    /// The row.
    pub row: usize,
    /// The device's token (`None`: it gave too few).
    pub got: Option<i32>,
    /// The reference's token.
    pub want: i32,
    /// The reference's tokens at `u - nudge` and `u + nudge`.
    pub span: (i32, i32),
}

/// The rows of `x` whose token in `got` the reference does not accept: a token is accepted when
/// it is [`sample_rows`]'s, or lies between its tokens at `u - nudge` and `u + nudge` (the
/// token only grows with `u`, and the device's f32 sums may put a draw near a boundary on
/// either side of it; a row of a million logits puts many tokens in that span). The one
/// acceptance rule of the sampling trials and the bench's check.
pub fn sample_rows_rejected(
    got: &[i32],
    x: &[f32],
    cols: usize,
    options: &SampleOptions,
    nudge: f64,
) -> Vec<SampleRejection> {
    let want = sample_rows(x, cols, options, 0.0);
    let below = sample_rows(x, cols, options, -nudge);
    let above = sample_rows(x, cols, options, nudge);
    (0..want.len())
        .filter_map(|row| {
            let span = (below[row], above[row]);
            let inside = |g: i32| g == want[row] || (span.0.min(span.1)..=span.0.max(span.1)).contains(&g);
            let got = got.get(row).copied();
            (!got.is_some_and(inside)).then_some(SampleRejection {
                row,
                got,
                want: want[row],
                span,
            })
        })
        .collect()
}

/// One row's token (see [`sample_rows`]).
fn sample_row(row: &[f32], r: usize, options: &SampleOptions, nudge: f64) -> i32 {
    let keys: Vec<u32> = row.iter().map(|&v| order_key(v)).collect();
    let Some(max_key) = keys.iter().copied().max() else {
        return -1;
    };
    let first = keys.iter().position(|&k| k == max_key).unwrap_or(0) as i32;
    if max_key <= NEG_INF_KEY {
        return -1;
    }
    if options.temperature == 0.0 || max_key == POS_INF_KEY {
        return first;
    }
    let max = f64::from(row[first as usize]);
    let t = f64::from(options.temperature);
    let weight = |i: usize| {
        if keys[i] > NEG_INF_KEY {
            ((f64::from(row[i]) - max) / t).exp()
        } else {
            0.0
        }
    };
    // Keys in decreasing order: the k-th is top-k's floor.
    let mut sorted: Vec<usize> = (0..row.len()).filter(|&i| keys[i] > NEG_INF_KEY).collect();
    sorted.sort_by(|&a, &b| keys[b].cmp(&keys[a]));
    let mut floor = NEG_INF_KEY + 1;
    if options.top_k > 0 && options.top_k < row.len() {
        floor = sorted.get(options.top_k - 1).map_or(floor, |&i| keys[i]);
    }
    if options.top_p < 1.0 {
        let kept: Vec<usize> = sorted.iter().copied().filter(|&i| keys[i] >= floor).collect();
        let total: f64 = kept.iter().map(|&i| weight(i)).sum();
        let goal = f64::from(options.top_p) * total;
        // Whole groups of equal keys, most probable first, until their mass reaches the goal.
        let mut mass = 0.0;
        let mut g = 0;
        while g < kept.len() {
            let key = keys[kept[g]];
            while g < kept.len() && keys[kept[g]] == key {
                mass += weight(kept[g]);
                g += 1;
            }
            if mass >= goal {
                floor = key;
                break;
            }
        }
    }
    let kept = |i: usize| keys[i] >= floor && keys[i] > NEG_INF_KEY;
    let total: f64 = (0..row.len()).filter(|&i| kept(i)).map(weight).sum();
    let word = random::philox4x32_10(
        [r as u32, options.offset as u32, (options.offset >> 32) as u32, 0],
        [options.seed as u32, (options.seed >> 32) as u32],
    )[0];
    let u = (f64::from(random::unit_f32(word)) + nudge).clamp(0.0, 1.0 - f64::EPSILON);
    let target = u * total;
    let mut acc = 0.0;
    let mut last = -1;
    for i in (0..row.len()).filter(|&i| kept(i)) {
        let w = weight(i);
        if w > 0.0 {
            last = i as i32;
            acc += w;
            if acc > target {
                return last;
            }
        }
    }
    last
}
