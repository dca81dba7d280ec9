//! The free functions through `Gpu::global()`: views, and many threads at once.

use gpukern::{Error, Gpu, cpu};
use libtest_mimic::Failed;
use ndarray::{Array2, s};

use crate::{MATMUL_REL_TOL, fail, softmax_close};

/// Free functions on transposed and sliced views, through the global default.
pub(crate) fn views(_seed: u64) -> Result<(), Failed> {
    let a = Array2::from_shape_fn((13, 21), |(i, j)| ((i * 7 + j * 5) % 11) as f32 - 5.0);
    let b = Array2::from_shape_fn((13, 17), |(i, j)| ((i * 3 + j) % 7) as f32 * 0.5);
    let at = a.t(); // 21 x 13, not contiguous
    let c = gpukern::matmul(&at, &b).map_err(fail)?;
    let close = |x: &Array2<f32>, y: &Array2<f32>| {
        cpu::rel_error(
            &x.iter().copied().collect::<Vec<_>>(),
            &y.iter().copied().collect::<Vec<_>>(),
        )
    };
    let err = close(&c, &cpu::matmul(&at, &b).map_err(fail)?);
    if err > MATMUL_REL_TOL {
        return Err(format!("transposed view: rel error {err}").into());
    }
    let sliced = a.slice(s![1..12;2, ..;3]); // 6 x 7, strided
    let y = gpukern::softmax(&sliced, 0.7).map_err(fail)?;
    softmax_close(
        &y.iter().copied().collect::<Vec<_>>(),
        &cpu::softmax_rows(&sliced, 0.7)
            .iter()
            .copied()
            .collect::<Vec<_>>(),
    )?;
    let sum = gpukern::add(&sliced, &sliced).map_err(fail)?;
    if sum != sliced.mapv(|v| v + v) {
        return Err("add on a sliced view".into());
    }
    let mut m = a.clone();
    gpukern::increment_by_one(&mut m.slice_mut(s![.., ..;2])).map_err(fail)?;
    let expected = Array2::from_shape_fn(a.dim(), |(i, j)| a[(i, j)] + if j % 2 == 0 { 1.0 } else { 0.0 });
    if m != expected {
        return Err("increment_by_one on a strided mutable view".into());
    }
    match gpukern::add(&a, &b) {
        Err(Error::ShapeMismatch { lhs, rhs, .. }) if lhs == vec![13, 21] && rhs == vec![13, 17] => Ok(()),
        other => Err(format!("add of 13x21 and 13x17: {:?}", other.map(|_| ())).into()),
    }
}

/// Many threads calling matmul, softmax and add through the shared default, every result checked.
pub(crate) fn concurrency(_seed: u64) -> Result<(), Failed> {
    let gpu = Gpu::global().map_err(fail)?;
    let (threads, calls) = if gpu.is_simulator() { (8, 6) } else { (8, 400) };
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> Result<(), String> {
                    for call in 0..calls {
                        // Every call gets inputs that differ per thread and call, so a result
                        // crossing over from another thread would not match.
                        let tag = (t * 1000 + call) as f32;
                        let (m, k, n) = (5 + t, 7 + call % 5, 3 + t % 4);
                        let a = Array2::from_shape_fn((m, k), |(i, j)| tag * 1e-3 + (i + j) as f32 * 0.1);
                        let b =
                            Array2::from_shape_fn((k, n), |(i, j)| (i * n + j) as f32 * 0.01 - tag * 1e-4);
                        let c = gpukern::matmul(&a, &b).map_err(|e| e.to_string())?;
                        let r = cpu::matmul(&a, &b).map_err(|e| e.to_string())?;
                        let err = cpu::rel_error(
                            &c.iter().copied().collect::<Vec<_>>(),
                            &r.iter().copied().collect::<Vec<_>>(),
                        );
                        if err > MATMUL_REL_TOL {
                            return Err(format!("thread {t} call {call}: matmul rel error {err}"));
                        }
                        let y = gpukern::softmax(&a, 0.5).map_err(|e| e.to_string())?;
                        softmax_close(
                            &y.iter().copied().collect::<Vec<_>>(),
                            &cpu::softmax_rows(&a, 0.5).iter().copied().collect::<Vec<_>>(),
                        )
                        .map_err(|e| format!("thread {t} call {call}: softmax {e}"))?;
                        let s = gpukern::add(&a, &a).map_err(|e| e.to_string())?;
                        if s != a.mapv(|v| v + v) {
                            return Err(format!("thread {t} call {call}: add"));
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())).err())
            .collect()
    });
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}
