//! Softmax's documented rules at its edges: `t = 0`, infinities, NaN, extreme values, and the
//! inverse temperatures it refuses.

use gpukern::{Error, cpu};
use libtest_mimic::Failed;
use ndarray::Array2;

use crate::{Backend, fail, softmax_close};

/// The documented rules at softmax's edges, row by row in one matrix.
pub(crate) fn softmax_edges(backend: Backend, _seed: u64) -> Result<(), Failed> {
    let gpu = backend.gpu()?;
    let (inf, nan, max) = (f32::INFINITY, f32::NAN, f32::MAX);
    // One launch per inverse temperature: `(name, row, expected)`. The NaN row shares its launch
    // with a clean row to show that the NaN stays in its own row.
    type Row = (&'static str, Vec<f32>, Vec<f32>);
    let one = |name, x, expected| vec![(name, x, expected)];
    let launches: Vec<(f32, Vec<Row>)> = vec![
        (
            0.0,
            one("t = 0 is uniform", vec![1.0, -5.0, 3.0, 9.0], vec![0.25; 4]),
        ),
        (
            0.0,
            one(
                "t = 0 is uniform with infinities",
                vec![inf, -inf, 1.0, 2.0],
                vec![0.25; 4],
            ),
        ),
        (
            1.0,
            one(
                "+inf entries share the mass",
                vec![inf, 1.0, inf, -3.0],
                vec![0.5, 0.0, 0.5, 0.0],
            ),
        ),
        (
            1.0,
            one(
                "-inf entries get nothing",
                vec![-inf, 0.0, -inf, 0.0],
                vec![0.0, 0.5, 0.0, 0.5],
            ),
        ),
        (1.0, one("all -inf is uniform", vec![-inf; 4], vec![0.25; 4])),
        (
            -1e4,
            one(
                "negative t favours the smallest",
                vec![1.0, 0.0, 2.0, 3.0],
                vec![0.0, 1.0, 0.0, 0.0],
            ),
        ),
        (
            -1.0,
            one(
                "negative t with -inf",
                vec![-inf, 0.0, 5.0, -inf],
                vec![0.5, 0.0, 0.0, 0.5],
            ),
        ),
        (
            1e4,
            one(
                "large t is one-hot",
                vec![0.1, 0.3, 0.2, 0.0],
                vec![0.0, 1.0, 0.0, 0.0],
            ),
        ),
        (
            2.0,
            one(
                "near f32::MAX, t = 2",
                vec![max, -max, max, 0.0],
                vec![0.5, 0.0, 0.5, 0.0],
            ),
        ),
        (
            1.0,
            one(
                "near f32::MAX, t = 1",
                vec![max, max * 0.5, -max, max],
                vec![0.5, 0.0, 0.0, 0.5],
            ),
        ),
        (
            1.0,
            vec![
                ("NaN poisons its row", vec![1.0, nan, 2.0, 3.0], vec![nan; 4]),
                ("the row after a NaN row is fine", vec![0.0; 4], vec![0.25; 4]),
            ],
        ),
    ];
    for (t, rows) in launches {
        let x = Array2::from_shape_vec((rows.len(), 4), rows.iter().flat_map(|r| r.1.clone()).collect())
            .map_err(|e| Failed::from(e.to_string()))?;
        let y = gpu
            .softmax(&gpu.upload_matrix(&x).map_err(fail)?, t)
            .map_err(fail)?
            .to_array()
            .map_err(fail)?;
        let reference = cpu::softmax_rows(&x, t);
        for ((name, _, expected), (row, cpu_row)) in
            rows.iter().zip(y.rows().into_iter().zip(reference.rows()))
        {
            let got: Vec<f32> = row.to_vec();
            softmax_close(&got, expected).map_err(|e| format!("{name}: kernel {got:?}: {e}"))?;
            softmax_close(&cpu_row.to_vec(), expected).map_err(|e| format!("{name}: CPU reference: {e}"))?;
        }
    }
    for t in [f32::NAN, f32::INFINITY, -f32::INFINITY] {
        let x = gpu.upload_matrix(&Array2::<f32>::ones((2, 3))).map_err(fail)?;
        match gpu.softmax(&x, t) {
            Err(Error::InvalidArgument { .. }) => {}
            other => {
                return Err(format!("t = {t}: expected InvalidArgument, got {:?}", other.map(|_| ())).into());
            }
        }
    }
    Ok(())
}
