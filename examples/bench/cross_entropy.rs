//! Cross-entropy of f32 logits with one class label per row: the per-row losses
//! (`gpu.cross_entropy_into_with`, PyTorch's `reduction='none'`) and their mean
//! (`gpu.cross_entropy_mean_with`, `reduction='mean'`), with every `CrossEntropyAlgorithm`.
//!
//! Minimum traffic: the logits read once (4 bytes per element) plus 12 bytes per row (an i64
//! label read, an f32 loss written); the mean writes one float instead of a loss per row.
//!
//! Neither call is allocation-free: `cross_entropy_into` allocates its partial statistics (two
//! floats per block of the first step) on every call, and `cross_entropy_mean` also its
//! per-row losses and its one-float result; on the H200 these are stream-ordered allocations
//! (`cuMemAllocAsync`), inside the timed region as a user's call would have them.

use gpukern::ops::cross_entropy::cross_entropy_chunks;
use gpukern::{ClassLabels, CrossEntropyAlgorithm, DeviceMatrix, DeviceVec, Gpu, cpu};
use ndarray::ArrayView2;
use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::memory::F32_TOL;
use crate::record::{Check, Record, Res, Sink};

/// Logits are uniform in `[-RANGE, RANGE)` (as softmax's inputs).
const RANGE: f32 = 5.0;

/// `(rows, cols)` measured: `--quick` keeps a small one; 8192 x 2^18 (8 GiB of logits) comes
/// last, so that it is the one skipped when the time budget runs out.
pub fn shapes(quick: bool) -> Vec<(usize, usize)> {
    crate::suite::shapes2("cross_entropy", quick)
}

/// The two reductions; `kernel` of their records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// One loss per row.
    None,
    /// The mean of the rows' losses.
    Mean,
}

impl Reduction {
    pub const ALL: [Reduction; 2] = [Reduction::None, Reduction::Mean];

    pub fn kernel(self) -> &'static str {
        match self {
            Reduction::None => "cross_entropy",
            Reduction::Mean => "cross_entropy_mean",
        }
    }

    /// PyTorch's name of the reduction.
    fn torch_name(self) -> &'static str {
        match self {
            Reduction::None => "none",
            Reduction::Mean => "mean",
        }
    }
}

/// Measurements [`cross_entropy`] makes: every shape, reduction and algorithm.
pub fn planned(quick: bool) -> usize {
    shapes(quick).len() * Reduction::ALL.len() * CrossEntropyAlgorithm::ALL.len()
}

/// Minimum bytes of one call: the logits and the labels read once, the losses (or the mean)
/// written once.
pub fn traffic(reduction: Reduction, rows: usize, cols: usize) -> f64 {
    let kernel = match reduction {
        Reduction::None => "cross_entropy",
        Reduction::Mean => "cross_entropy_mean",
    };
    crate::suite::bytes(kernel, &[("rows", rows), ("cols", cols)])
}

/// `rows` labels uniform in `0..cols`, from a fresh seed.
pub fn random_labels(rows: usize, cols: usize) -> Vec<i64> {
    let mut rng = StdRng::seed_from_u64(rand::rng().random());
    (0..rows).map(|_| rng.random_range(0..cols as i64)).collect()
}

/// The f64 reference losses of every row ([`cpu::cross_entropy_rows`]), rows spread over the
/// CPU's cores.
pub fn reference_losses(x: &[f32], cols: usize, labels: &[i64]) -> Vec<f32> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = labels.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = labels
            .chunks(per)
            .enumerate()
            .map(|(i, labels)| {
                let x = &x[i * per * cols..][..labels.len() * cols];
                s.spawn(move || cpu::cross_entropy_rows(x, cols, labels))
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|p| p.join().unwrap_or_default())
            .collect()
    })
}

/// The mean of `losses`, in f64.
fn mean(losses: &[f32]) -> f32 {
    (losses.iter().map(|&l| f64::from(l)).sum::<f64>() / losses.len() as f64) as f32
}

/// One set of operands: logits, labels, the output (NaN until written).
pub struct Operands {
    pub x: DeviceMatrix,
    pub labels: ClassLabels,
    pub loss: DeviceVec,
}

/// The device result of one call on `ops` with `algorithm`: the losses written into
/// `ops.loss`, or a new one-element vector holding the mean.
pub fn run(
    gpu: &Gpu,
    reduction: Reduction,
    algorithm: CrossEntropyAlgorithm,
    ops: &mut Operands,
) -> gpukern::Result<Option<DeviceVec>> {
    match reduction {
        Reduction::None => gpu
            .cross_entropy_into_with(&ops.x, &ops.labels, &mut ops.loss, algorithm)
            .map(|()| None),
        Reduction::Mean => gpu
            .cross_entropy_mean_with(&ops.x, &ops.labels, algorithm)
            .map(Some),
    }
}

/// Fresh random logits and labels (`sets` copies on the device) and the f64 CPU reference's
/// per-row losses.
pub fn prepare(gpu: &Gpu, (rows, cols): (usize, usize), sets: usize) -> Res<(Vec<Operands>, Vec<f32>)> {
    let x = random_vec(rows * cols, -RANGE, RANGE);
    let labels = random_labels(rows, cols);
    let nan = vec![f32::NAN; rows];
    let mut bufs = Vec::with_capacity(sets.max(1));
    for _ in 0..sets.max(1) {
        bufs.push(Operands {
            x: gpu.upload_matrix(&ArrayView2::from_shape((rows, cols), &x)?)?,
            labels: gpu.upload_labels(&labels, cols)?,
            loss: gpu.upload(&nan)?,
        });
    }
    Ok((bufs, reference_losses(&x, cols, &labels)))
}

/// One call with `algorithm` on `ops` (its losses reset to NaN first, so that a loss the call
/// does not write fails) and its check against `reference` (every row: the output is one float
/// per row).
pub fn check(
    gpu: &Gpu,
    reduction: Reduction,
    algorithm: CrossEntropyAlgorithm,
    ops: &mut Operands,
    reference: &[f32],
) -> Res<Check> {
    ops.loss = gpu.upload(&vec![f32::NAN; reference.len()])?;
    let out = run(gpu, reduction, algorithm, ops)?;
    Ok(match out {
        None => Check::new(&ops.loss.to_vec()?, reference, F32_TOL, "cpu_f64"),
        Some(m) => Check::new(&m.to_vec()?, &[mean(reference)], F32_TOL, "cpu_f64"),
    })
}

/// Every shape, per-row losses and their mean, every algorithm (`fused`, the default, and the
/// tuning candidates `warp-8k`, `warp-32k`, `warp-row`).
pub fn cross_entropy(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for (rows, cols) in shapes(b.quick) {
        if !b.wants(&format!("{rows}x{cols}")) {
            continue;
        }
        let sets = sets_for(traffic(Reduction::None, rows, cols) as usize);
        // Made on the first item that needs them, shared by the shape's other items.
        let mut prepared: Option<(Vec<Operands>, Vec<f32>)> = None;
        for reduction in Reduction::ALL {
            for algorithm in CrossEntropyAlgorithm::ALL {
                let (chunks, _) = cross_entropy_chunks(rows, cols, b.gpu.multiprocessors()?);
                let call = match reduction {
                    Reduction::None => "gpu.cross_entropy_into_with",
                    Reduction::Mean => "gpu.cross_entropy_mean_with",
                };
                let mut base = Record::new(
                    reduction.kernel(),
                    format!("gpukern:{}", algorithm.name()),
                    format!("{rows}x{cols}"),
                )
                .with("rows", rows)
                .with("cols", cols)
                .with("reduction", reduction.torch_name())
                .with("call", call);
                if algorithm == CrossEntropyAlgorithm::Blocks {
                    base = base.with("chunks_per_row", chunks);
                }
                sink.item(base.clone(), || {
                    let bytes = traffic(reduction, rows, cols);
                    let gpu = &b.gpu;
                    if prepared.is_none() {
                        prepared = Some(prepare(gpu, (rows, cols), sets)?);
                    }
                    let Some((bufs, reference)) = prepared.as_mut() else {
                        return Err("cross-entropy operands were not prepared".into());
                    };
                    let check = check(gpu, reduction, algorithm, &mut bufs[0], reference)?;
                    let record = base.checked(&check).with("sets", sets);
                    if !check.passed() {
                        return Ok(record);
                    }
                    let stats = b.timer.measure(|i| {
                        run(gpu, reduction, algorithm, &mut bufs[i % sets])?;
                        Ok(())
                    })?;
                    Ok(record.timed(&stats, Some(bytes), None))
                })?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_traffic() {
        assert_eq!(planned(true), 2 * CrossEntropyAlgorithm::ALL.len());
        assert_eq!(shapes(false).last(), Some(&(8192, 262144)));
        assert!(!shapes(true).contains(&(8192, 262144)));
        assert_eq!(traffic(Reduction::None, 2, 3), (24 + 16 + 8) as f64);
        assert_eq!(traffic(Reduction::Mean, 2, 3), (24 + 16 + 4) as f64);
    }

    #[test]
    fn threaded_reference_matches_the_cpu_module() {
        let (rows, cols) = (37, 50);
        let x = random_vec(rows * cols, -RANGE, RANGE);
        let labels = random_labels(rows, cols);
        assert_eq!(
            reference_losses(&x, cols, &labels),
            cpu::cross_entropy_rows(&x, cols, &labels)
        );
    }

    /// The prepare-and-check path on the simulator, both reductions, every algorithm, a ragged
    /// row and one that is split into chunks; a wrong label must fail the check.
    #[test]
    fn checks_pass_on_the_simulator_and_can_fail() {
        let gpu = Gpu::simulator();
        for shape in [(3, 1001), (2, 20000)] {
            let (mut bufs, reference) = prepare(&gpu, shape, 2).unwrap();
            for reduction in Reduction::ALL {
                for algorithm in CrossEntropyAlgorithm::ALL {
                    let c = check(&gpu, reduction, algorithm, &mut bufs[0], &reference).unwrap();
                    assert!(c.passed(), "{reduction:?} {algorithm:?} {shape:?}: {}", c.rel_err);
                }
            }
        }
        let (rows, cols) = (4, 1000);
        let x = random_vec(rows * cols, -RANGE, RANGE);
        let labels = random_labels(rows, cols);
        let mut ops = Operands {
            x: gpu
                .upload_matrix(&ArrayView2::from_shape((rows, cols), &x).unwrap())
                .unwrap(),
            labels: gpu.upload_labels(&labels, cols).unwrap(),
            loss: gpu.upload(&vec![f32::NAN; rows]).unwrap(),
        };
        run(&gpu, Reduction::None, CrossEntropyAlgorithm::default(), &mut ops).unwrap();
        let got = ops.loss.to_vec().unwrap();
        assert!(Check::new(&got, &reference_losses(&x, cols, &labels), F32_TOL, "cpu_f64").passed());
        let shifted: Vec<i64> = labels.iter().map(|&l| (l + 1) % cols as i64).collect();
        assert!(!Check::new(&got, &reference_losses(&x, cols, &shifted), F32_TOL, "cpu_f64").passed());
    }
}
