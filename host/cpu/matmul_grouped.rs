//! The reference of the grouped (mixture-of-experts) product: `Y_e = X_e W_e^T` per expert, in
//! f64 of the bf16 inputs, and the experts' rows as the kernel reads its offsets.

use std::ops::Range;

use half::bf16;
use ndarray::{Array2, ArrayView2, ArrayView3, s};

use crate::error::{Error, Result};

/// The rows of each expert for `offsets` (cumulative end rows, `torch._grouped_mm`'s `offs`)
/// over `rows` rows, as the grouped kernel reads them: each end clamped to `rows`, and an end
/// below the one before taken as the one before (`end_e = max(end_(e-1), min(offsets[e],
/// rows))`, from 0). For monotone offsets within `rows`, expert `e` owns `offsets[e - 1] ..
/// offsets[e]`; in every case the ranges are disjoint and inside `0..rows`.
pub fn grouped_expert_rows(offsets: &[u32], rows: usize) -> Vec<Range<usize>> {
    let mut start = 0;
    offsets
        .iter()
        .map(|&o| {
            let end = (o as usize).min(rows).max(start);
            let r = start..end;
            start = end;
            r
        })
        .collect()
}

/// `Y_e = X_e W_e^T` for every expert `e` ([`grouped_expert_rows`] of `offsets`): `x` is `rows x
/// k`, `w` is `E x n x k` (`E = offsets.len()`), in f64 of the bf16 inputs, unrounded. Returns
/// `(y, abs)`: `y` is `rows x n`, zeros in the rows no expert owns; `abs` the same product of the
/// inputs' absolute values (the scale of the sums' rounding errors).
///
/// Errors: [`Error::ShapeMismatch`] unless `x` and `w` have the same `k` and `w` one weight per
/// offset.
pub fn matmul_grouped_f64(
    x: &ArrayView2<bf16>,
    w: &ArrayView3<bf16>,
    offsets: &[u32],
) -> Result<(Array2<f64>, Array2<f64>)> {
    let (rows, k) = x.dim();
    let (experts, n, wk) = w.dim();
    if wk != k || experts != offsets.len() {
        return Err(Error::ShapeMismatch {
            op: "cpu::matmul_grouped_f64",
            lhs: vec![rows, k, offsets.len()],
            rhs: vec![experts, n, wk],
            rule: "X is rows x k, W is E x n x k, one offset per expert",
        });
    }
    crate::buffer::checked_len("cpu::matmul_grouped_f64", &[rows, n, 2])?;
    let mut y = Array2::<f64>::zeros((rows, n));
    let mut abs = Array2::<f64>::zeros((rows, n));
    for (e, range) in grouped_expert_rows(offsets, rows).into_iter().enumerate() {
        if range.is_empty() {
            continue;
        }
        let xe = x.slice(s![range.clone(), ..]).mapv(|v| v.to_f64());
        let we = w.slice(s![e, .., ..]).mapv(|v| v.to_f64());
        y.slice_mut(s![range.clone(), ..]).assign(&xe.dot(&we.t()));
        abs.slice_mut(s![range, ..])
            .assign(&xe.mapv(f64::abs).dot(&we.mapv(f64::abs).t()));
    }
    Ok((y, abs))
}

#[cfg(test)]
mod tests {
    use super::grouped_expert_rows;

    /// Monotone offsets give torch's ranges; ends past the rows are clamped; an end that goes
    /// backwards gives an empty expert and the next starts where the last non-empty one ended.
    #[test]
    fn expert_rows() {
        assert_eq!(grouped_expert_rows(&[2, 2, 5], 5), vec![0..2, 2..2, 2..5]);
        assert_eq!(grouped_expert_rows(&[3, 9], 5), vec![0..3, 3..5]);
        assert_eq!(grouped_expert_rows(&[4, 1, 6], 8), vec![0..4, 4..4, 4..6]);
        assert_eq!(grouped_expert_rows(&[], 8), Vec::<std::ops::Range<usize>>::new());
    }
}
