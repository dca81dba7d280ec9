//! `cpu::rel_error`, the relative error every comparison with the reference uses.

use gpukern::cpu;

use crate::common::{random_vec, rng_for};

#[test]
fn rel_error_basics() {
    let mut rng = rng_for("rel_error_basics");
    let r = random_vec(&mut rng, 50);
    assert_eq!(cpu::rel_error(&r, &r), 0.0);
    assert_eq!(cpu::rel_error(&[], &[]), 0.0);
    assert_eq!(cpu::rel_error(&r[..49], &r), f64::INFINITY);
    // ||(0, 0.5)|| / ||(3, 4)|| = 0.5 / 5.
    assert!((cpu::rel_error(&[3.0, 4.5], &[3.0, 4.0]) - 0.1).abs() < 1e-12);
    // Scaling both by the same factor leaves it unchanged (a power of two keeps it exact).
    let o: Vec<f32> = r.iter().map(|v| v * 1.001).collect();
    let scale = |v: &[f32]| v.iter().map(|x| x * 1024.0).collect::<Vec<_>>();
    assert_eq!(cpu::rel_error(&scale(&o), &scale(&r)), cpu::rel_error(&o, &r));
    // A zero reference: the absolute norm.
    assert_eq!(cpu::rel_error(&[3.0, 4.0], &[0.0, 0.0]), 5.0);
    let mut with_nan = r.clone();
    with_nan[7] = f32::NAN;
    assert!(cpu::rel_error(&with_nan, &r).is_nan());
}
