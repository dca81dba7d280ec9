//! The element-wise kernels (`add`, `increment_by_one`) launched through the simulator with the
//! launch their doc comments give, against an f64 computation, on ragged lengths.

mod common;

use common::{assert_close, elementwise_config, random};
use kernels_gpu::add;
use kernels_gpu::sim::Launch;

#[test]
fn add_matches_f64() {
    for n in [1, 7, 33, 257] {
        let (a, b) = (random(1, n), random(2, n));
        let mut c = vec![0.0f32; n];
        let mut launch = Launch::new("add", elementwise_config(n));
        let (pa, pb, pc) = (
            launch.input("a", &a),
            launch.input("b", &b),
            launch.output("c", &mut c),
        );
        // SAFETY: the three buffers hold `n` floats and are registered on the launch.
        unsafe { launch.run(|| add::add(pa, pb, pc, n)) }.unwrap();
        let want: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| x as f64 + y as f64).collect();
        let scale: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| (x.abs() + y.abs()) as f64)
            .collect();
        assert_close(&format!("add n={n}"), &c, &want, &scale, 1e-5);
    }
}

#[test]
fn increment_by_one_matches_f64() {
    for n in [1, 7, 33, 257] {
        let x0 = random(3, n);
        let mut x = x0.clone();
        let mut launch = Launch::new("increment_by_one", elementwise_config(n));
        let px = launch.output("x", &mut x);
        // SAFETY: `x` holds `n` floats and is registered on the launch.
        unsafe { launch.run(|| add::increment_by_one(px, n)) }.unwrap();
        let want: Vec<f64> = x0.iter().map(|&v| v as f64 + 1.0).collect();
        let scale: Vec<f64> = x0.iter().map(|&v| v.abs() as f64 + 1.0).collect();
        assert_close(&format!("increment_by_one n={n}"), &x, &want, &scale, 1e-5);
    }
}
