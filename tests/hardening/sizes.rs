//! Sizes at the limits: allocations no host `Vec` could hold, empty and thin shapes, and a
//! grid past its limit.

use gpukern::{Error, MatmulAlgorithm, cpu};
use libtest_mimic::Failed;
use ndarray::Array2;

use crate::{Backend, fail};

/// Sizes whose bytes overflow, or that no host `Vec<f32>` could hold, are `TooLarge` before
/// anything is allocated, on every allocation path; one element less gets past the size check
/// (and fails as out of memory instead). The device keeps working after each.
pub(crate) fn impossible_sizes(backend: Backend, _seed: u64) -> Result<(), Failed> {
    use gpukern::buffer::MAX_ELEMENTS;
    let gpu = backend.gpu()?;
    let mut failures = Vec::new();
    let mut expect = |what: &str, result: Result<(), Error>, too_large: bool| match (result, too_large) {
        (Err(Error::TooLarge { .. }), true) => {}
        // The other side of the boundary: past the size check, refused by the allocator.
        (Err(e), false) if !matches!(e, Error::TooLarge { .. }) => {}
        (other, _) => failures.push(format!(
            "{what}: expected {}, got {other:?}",
            if too_large {
                "TooLarge"
            } else {
                "an allocation failure other than TooLarge"
            }
        )),
    };
    // The cases: 2^62 + 2^31 floats are 2^64 + 2^33 bytes, 8 GiB once wrapped.
    expect(
        "zeros(2^62 + 2^31)",
        gpu.zeros((1 << 62) + (1 << 31)).map(drop),
        true,
    );
    expect(
        "zeros(MAX_ELEMENTS + 1)",
        gpu.zeros(MAX_ELEMENTS + 1).map(drop),
        true,
    );
    expect("zeros(usize::MAX)", gpu.zeros(usize::MAX).map(drop), true);
    expect("zeros(MAX_ELEMENTS)", gpu.zeros(MAX_ELEMENTS).map(drop), false);
    expect(
        "zeros_matrix(2^31, 2^31)",
        gpu.zeros_matrix(1 << 31, 1 << 31).map(drop),
        true,
    );
    expect(
        "zeros_matrix(usize::MAX, 2)",
        gpu.zeros_matrix(usize::MAX, 2).map(drop),
        true,
    );
    expect(
        "zeros_matrix(MAX_ELEMENTS, 1)",
        gpu.zeros_matrix(MAX_ELEMENTS, 1).map(drop),
        false,
    );
    // A (2^31 x 0) by (0 x 2^31) product: empty operands, a 2^62-element result.
    let a = gpu
        .upload_matrix(&Array2::<f32>::zeros((1 << 31, 0)))
        .map_err(fail)?;
    let b = gpu
        .upload_matrix(&Array2::<f32>::zeros((0, 1 << 31)))
        .map_err(fail)?;
    for algorithm in MatmulAlgorithm::ALL {
        expect(
            &format!("matmul_with(2^31 x 0, 0 x 2^31, {})", algorithm.name()),
            gpu.matmul_with(&a, &b, algorithm).map(drop),
            true,
        );
    }
    let x = gpu.upload(&[1.0, 2.0]).map_err(fail)?;
    let sum = gpu.add(&x, &x).and_then(|s| s.to_vec()).map_err(fail)?;
    if sum != [2.0, 4.0] {
        failures.push(format!("add after the refused allocations gave {sum:?}"));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

/// Empty, 1xN, Nx1, k = 0, and a launch past the grid's limit.
pub(crate) fn shape_edges(backend: Backend, _seed: u64) -> Result<(), Failed> {
    let gpu = backend.gpu()?;
    for (m, k, n) in [
        (0, 5, 3),
        (3, 5, 0),
        (4, 0, 6),
        (1, 9, 1),
        (1, 1, 9),
        (9, 1, 1),
        (0, 0, 0),
    ] {
        let a = Array2::from_shape_fn((m, k), |(i, j)| (i * 3 + j) as f32 * 0.25 - 1.0);
        let b = Array2::from_shape_fn((k, n), |(i, j)| (i + 2 * j) as f32 * 0.5 - 2.0);
        let reference = cpu::matmul(&a, &b).map_err(fail)?;
        for algorithm in MatmulAlgorithm::ALL {
            let c = gpu.matmul_with(
                &gpu.upload_matrix(&a).map_err(fail)?,
                &gpu.upload_matrix(&b).map_err(fail)?,
                algorithm,
            );
            let c = c.and_then(|c| c.to_array()).map_err(fail)?;
            if c != reference {
                return Err(format!("{m}x{k}x{n} {algorithm:?}: {c:?} != {reference:?}").into());
            }
        }
    }
    // More rows than the tiled kernel's grid can cover (65535 blocks of 32 rows in y): refused
    // before any work, with the limit in the message.
    let rows = 65_535 * 32 + 1;
    let a = gpu
        .upload_matrix(&Array2::<f32>::zeros((rows, 0)))
        .map_err(fail)?;
    let b = gpu.upload_matrix(&Array2::<f32>::zeros((0, 1))).map_err(fail)?;
    match gpu.matmul_with(&a, &b, MatmulAlgorithm::Tiled) {
        Err(Error::TooLarge { detail, .. }) if detail.contains("65535") => Ok(()),
        other => Err(format!(
            "{rows} rows: expected TooLarge naming 65535, got {:?}",
            other.map(|_| ())
        )
        .into()),
    }
}
