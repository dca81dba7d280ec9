//! The CPU softmax: every row a distribution, invariant under a shift.

use gpukern::cpu;
use rand::Rng;

use crate::common::{random_matrix, random_vec, rng_for, seed_hint};

/// A softmax row's sum in f64 of its f32 outputs: each output is rounded once (2^-24 relative),
/// so the sum is within ~1e-7 of 1.
const SUM_TOL: f64 = 1e-6;

#[test]
fn cpu_softmax_rows_are_distributions() {
    let mut rng = rng_for("cpu_softmax_rows_are_distributions");
    for _ in 0..30 {
        let (rows, cols) = (rng.random_range(1..8), rng.random_range(1..300));
        let x = random_matrix(&mut rng, rows, cols);
        for t in [1.0f32, 0.5, 0.0, -2.5, 10.0] {
            let y = cpu::softmax_rows(&x, t);
            assert_eq!(y.dim(), x.dim());
            for (r, (xr, yr)) in x.rows().into_iter().zip(y.rows()).enumerate() {
                let what = format!("{rows}x{cols}, t = {t}, row {r} ({})", seed_hint());
                assert_eq!(
                    yr.to_vec(),
                    cpu::softmax(&xr.to_vec(), t),
                    "{what}: rows differ from softmax"
                );
                let sum: f64 = yr.iter().map(|&v| f64::from(v)).sum();
                assert!((sum - 1.0).abs() <= SUM_TOL, "{what}: sums to {sum}");
                assert!(yr.iter().all(|&v| v > 0.0 && v <= 1.0), "{what}: {yr}");
                // The largest output sits at the largest t * x.
                let argmax = |v: &[f64]| (0..v.len()).max_by(|&i, &j| v[i].total_cmp(&v[j])).unwrap();
                let tx: Vec<f64> = xr.iter().map(|&v| f64::from(t) * f64::from(v)).collect();
                let yv: Vec<f64> = yr.iter().map(|&v| f64::from(v)).collect();
                if t != 0.0 {
                    assert_eq!(argmax(&yv), argmax(&tx), "{what}: argmax moved");
                } else {
                    let uniform = (1.0 / cols as f64) as f32;
                    assert!(yr.iter().all(|&v| v == uniform), "{what}: t = 0 is not uniform");
                }
            }
        }
    }
}

#[test]
fn cpu_softmax_is_shift_invariant() {
    let mut rng = rng_for("cpu_softmax_is_shift_invariant");
    let x = random_vec(&mut rng, 200);
    // 0.5 is a power of two, so x + 0.5 is exact for x in [-1, 1).
    let shifted: Vec<f32> = x.iter().map(|v| v + 0.5).collect();
    for t in [1.0f32, -3.0, 10.0] {
        let err = cpu::rel_error(&cpu::softmax(&shifted, t), &cpu::softmax(&x, t));
        assert!(
            err < 1e-6,
            "t = {t}: shifting the input changed the softmax by {err:e}"
        );
    }
    assert!(cpu::softmax(&[], 1.0).is_empty());
}
