//! Without a driver or a GPU, and with `GPUKERN_DEVICE=cuda` (no simulator fallback), every
//! public function returns the documented error and nothing panics.
//!
//! The only test in its own binary, because `Gpu::global()` reads `GPUKERN_DEVICE` once per
//! process. On a machine with a GPU it checks the other side: `GPUKERN_DEVICE=cuda` gives the GPU.

use gpukern::{Error, Gpu};
use ndarray::{Array1, Array2};

#[test]
fn every_public_function_reports_the_missing_gpu() {
    // SAFETY: set before any other thread of this binary exists (one test, run alone).
    unsafe { std::env::set_var("GPUKERN_DEVICE", "cuda") };
    if Gpu::new(0).is_ok() {
        let gpu = Gpu::global().expect("GPUKERN_DEVICE=cuda with a GPU present");
        assert!(
            !gpu.is_simulator(),
            "GPUKERN_DEVICE=cuda must not fall back to the simulator"
        );
        let m = Array2::<f32>::ones((3, 3));
        assert_eq!(
            gpukern::matmul(&m, &m).expect("matmul on the GPU"),
            Array2::from_elem((3, 3), 3.0)
        );
        return;
    }
    let e = Gpu::new(0).expect_err("checked above");
    // A GPU that is present but failing is a Driver error, and fails this test.
    assert!(
        e.is_no_gpu(),
        "Gpu::new(0) failed with something other than no GPU: {e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("simulator"),
        "the message should say how to run without a GPU: {text}"
    );

    let m = Array2::<f32>::ones((3, 3));
    let mut v = Array1::<f32>::ones(4);
    let results: Vec<(&str, Result<(), Error>)> = vec![
        ("global", Gpu::global().map(|_| ())),
        ("add", gpukern::add(&v, &v).map(|_| ())),
        ("increment_by_one", gpukern::increment_by_one(&mut v)),
        ("matmul", gpukern::matmul(&m, &m).map(|_| ())),
        (
            "matmul_with",
            gpukern::matmul_with(&m, &m, gpukern::MatmulAlgorithm::Naive).map(|_| ()),
        ),
        ("softmax", gpukern::softmax(&m, 1.0).map(|_| ())),
    ];
    for (name, result) in results {
        match result {
            Err(e) if e.is_no_gpu() => {}
            other => panic!("{name}: expected NoDriver or NoDevice, got {other:?}"),
        }
    }
    // The simulator stays available explicitly.
    let sim = Gpu::simulator();
    let x = sim.upload(&[1.0, 2.0]).expect("simulator upload");
    assert_eq!(
        sim.add(&x, &x).and_then(|s| s.to_vec()).expect("simulator add"),
        vec![2.0, 4.0]
    );
}
