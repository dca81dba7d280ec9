//! The CPU references of the elementwise operations.

use gpukern::{Error, cpu};

use crate::common::{random_vec, rng_for};

#[test]
fn cpu_add_and_increment() {
    let mut rng = rng_for("cpu_add_and_increment");
    let (a, b) = (random_vec(&mut rng, 100), random_vec(&mut rng, 100));
    let sum = cpu::add(&a, &b).unwrap();
    let inc = cpu::increment_by_one(&a);
    for i in 0..100 {
        assert_eq!(sum[i], a[i] + b[i]);
        assert_eq!(inc[i], a[i] + 1.0);
    }
    match cpu::add(&a, &b[..99]) {
        Err(e @ Error::ShapeMismatch { .. }) => assert!(e.to_string().contains("[100] and [99]")),
        other => panic!("expected a shape mismatch, got {other:?}"),
    }
}
