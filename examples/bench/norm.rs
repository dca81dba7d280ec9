//! RMSNorm and LayerNorm over the rows of a matrix, f32 and bf16: `gpu.rms_norm_into_with` and
//! `gpu.layer_norm_into_with` (no allocation in the timed region), every `NormAlgorithm` whose
//! own kernel takes the shape (the tuning candidates `rows-16`, `rows-32`, `rows-64`, `warp`,
//! `warp-keep` next to the default `in-registers`; with `--plans` also the candidates
//! [`PLAN_ONLY`]), and per shape and element type a device-to-device copy of the same bytes
//! (`impl` `copy`: what a copy reaches at this size, beside the 1 GiB copy ceiling).
//!
//! Minimum traffic: read x once and write y once (8 bytes per element in f32, 4 in bf16), plus
//! the weight (and LayerNorm's bias) once.

use gpukern::{DeviceMatrix, DeviceVec, Gpu, NormAlgorithm, NormElement, bf16, cpu};
use ndarray::ArrayView2;

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::memory::{F32_TOL, timed_copy};
use crate::record::{Check, Record, Res, Sink};

/// `eps` of every call (PyTorch's `layer_norm` default; the peers pass the same to `rms_norm`).
pub const EPS: f32 = 1e-5;
/// Inputs are uniform in `[X_LO, X_HI)`: rows of mean 1, so LayerNorm's centring matters.
const X_LO: f32 = -1.0;
const X_HI: f32 = 3.0;
/// Largest relative error a bf16 output may show: one rounding to 8 significant bits is at
/// most 2^-9 relative, so the error norm of a right kernel stays well below this.
pub const BF16_TOL: f64 = 1e-2;
/// Matrices of more elements are checked on [`CHECK_ROWS`] rows spread over the matrix (first
/// and last included) instead of every row, to keep the f64 reference cheap.
pub const SAMPLE_ABOVE: usize = 1 << 24;
/// Rows checked of a matrix past [`SAMPLE_ABOVE`].
pub const CHECK_ROWS: usize = 256;

/// `(rows, cols)` measured.
pub fn shapes(quick: bool) -> Vec<(usize, usize)> {
    crate::suite::shapes2("norm", quick)
}

/// The two norms; their names are the records' `kernel` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Norm {
    Rms,
    Layer,
}

impl Norm {
    pub const ALL: [Norm; 2] = [Norm::Rms, Norm::Layer];

    pub fn name(self) -> &'static str {
        match self {
            Norm::Rms => "rms_norm",
            Norm::Layer => "layer_norm",
        }
    }
}

/// An element type measured: f32 or bf16.
pub trait Elem: NormElement {
    /// The records' `dtype`.
    const DTYPE: &'static str;
    /// Largest relative error that passes the check.
    const TOL: f64;
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
}

impl Elem for f32 {
    const DTYPE: &'static str = "f32";
    const TOL: f64 = F32_TOL;
    fn from_f32(v: f32) -> f32 {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl Elem for bf16 {
    const DTYPE: &'static str = "bf16";
    const TOL: f64 = BF16_TOL;
    fn from_f32(v: f32) -> bf16 {
        bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
}

/// Candidates timed only with `--plans` (their A/B against the defaults), by name
/// ([`NormAlgorithm::name`]).
pub const PLAN_ONLY: [&str; 13] = [
    "rows-16-cs",
    "rows-32-cs",
    "warp-pipe",
    "two-pass",
    "loop-256",
    "loop-512",
    "loop-1024",
    "loop2-256",
    "loop2-512",
    "loop-plain-512",
    "ring",
    "rows-16-el",
    "warp-1",
];

/// The algorithms timed: all but [`PLAN_ONLY`], and those too with `plans`.
pub fn algorithms(plans: bool) -> impl Iterator<Item = NormAlgorithm> {
    NormAlgorithm::ALL
        .into_iter()
        .filter(move |a| plans || !PLAN_ONLY.contains(&a.name()))
}

/// Measurements [`norm`] makes: every shape, norm, element type and algorithm whose own kernel
/// takes the shape's rows ([`NormAlgorithm::fits`]; the others would time the default's plan
/// again under another name), and a copy per shape, norm and element type.
pub fn planned(quick: bool, plans: bool) -> usize {
    let fitting = |cols: usize| {
        algorithms(plans)
            .map(|a| usize::from(a.fits::<f32>(cols)) + usize::from(a.fits::<bf16>(cols)))
            .sum::<usize>()
            + 2
    };
    shapes(quick)
        .iter()
        .map(|&(_, cols)| Norm::ALL.len() * fitting(cols))
        .sum()
}

/// Minimum bytes of one call: x read and y written once, the weight (and bias) read once.
pub fn traffic<T>(norm: Norm, rows: usize, cols: usize) -> f64 {
    let vars = [("rows", rows), ("cols", cols), ("e", std::mem::size_of::<T>())];
    crate::suite::bytes(norm.name(), &vars)
}

/// The rows a check compares: all of them up to [`SAMPLE_ABOVE`] elements, else
/// [`CHECK_ROWS`] spread evenly from the first to the last.
pub fn check_rows(rows: usize, cols: usize) -> Vec<usize> {
    if rows * cols <= SAMPLE_ABOVE || rows <= CHECK_ROWS {
        return (0..rows).collect();
    }
    (0..CHECK_ROWS)
        .map(|i| i * (rows - 1) / (CHECK_ROWS - 1))
        .collect()
}

/// One norm's operands on the device: the weight and bias (shared), and `sets` pairs of input
/// and output matrices to rotate among.
pub struct Operands<T: Elem> {
    pub w: DeviceVec<T>,
    pub b: DeviceVec<T>,
    pub sets: Vec<(DeviceMatrix<T>, DeviceMatrix<T>)>,
}

impl<T: Elem> Operands<T> {
    /// One call on set `i`.
    pub fn run(&mut self, gpu: &Gpu, norm: Norm, algorithm: NormAlgorithm, i: usize) -> gpukern::Result<()> {
        let set = i % self.sets.len();
        let (x, y) = &mut self.sets[set];
        match norm {
            Norm::Rms => gpu.rms_norm_into_with(x, &self.w, EPS, y, algorithm),
            Norm::Layer => gpu.layer_norm_into_with(x, &self.w, &self.b, EPS, y, algorithm),
        }
    }
}

/// The host copies of one norm's inputs, rounded to `T`.
pub struct Inputs<T> {
    pub x: Vec<T>,
    pub w: Vec<T>,
    pub b: Vec<T>,
}

impl<T: Elem> Inputs<T> {
    /// Fresh random inputs of `rows x cols`: x in `[X_LO, X_HI)`, the weight in `[0.5, 1.5)`,
    /// the bias in `[-0.5, 0.5)`.
    pub fn random(rows: usize, cols: usize) -> Inputs<T> {
        let rounded = |n, lo, hi| random_vec(n, lo, hi).into_iter().map(T::from_f32).collect();
        Inputs {
            x: rounded(rows * cols, X_LO, X_HI),
            w: rounded(cols, 0.5, 1.5),
            b: rounded(cols, -0.5, 0.5),
        }
    }

    /// `sets` copies of x on the device, each with an output full of NaN (an element never
    /// written fails the check), and the weight and bias once.
    pub fn upload(&self, gpu: &Gpu, (rows, cols): (usize, usize), sets: usize) -> Res<Operands<T>> {
        let nan = vec![T::from_f32(f32::NAN); rows * cols];
        let mut ops = Operands {
            w: gpu.upload(&self.w)?,
            b: gpu.upload(&self.b)?,
            sets: Vec::with_capacity(sets.max(1)),
        };
        for _ in 0..sets.max(1) {
            ops.sets.push((
                gpu.upload_matrix(&ArrayView2::from_shape((rows, cols), &self.x)?)?,
                gpu.upload_matrix(&ArrayView2::from_shape((rows, cols), &nan)?)?,
            ));
        }
        Ok(ops)
    }

    /// `y` (the output of `norm` on these inputs) against the f64 CPU reference on
    /// [`check_rows`]; returns the check and the number of rows compared.
    pub fn check(&self, norm: Norm, y: &[T], (rows, cols): (usize, usize)) -> (Check, usize) {
        // The reference sees what the kernel sees: the inputs as rounded to T.
        let to_f32 = |v: &[T]| v.iter().map(|&e| e.to_f32()).collect::<Vec<f32>>();
        let (w, b) = (to_f32(&self.w), to_f32(&self.b));
        let picked = check_rows(rows, cols);
        let (mut got, mut want) = (Vec::with_capacity(picked.len() * cols), Vec::new());
        for &r in &picked {
            let x = to_f32(&self.x[r * cols..][..cols]);
            want.extend(match norm {
                Norm::Rms => cpu::rms_norm_rows(&x, cols, &w, EPS),
                Norm::Layer => cpu::layer_norm_rows(&x, cols, &w, &b, EPS),
            });
            got.extend(y.get(r * cols..(r + 1) * cols).map_or_else(Vec::new, to_f32));
        }
        (Check::new(&got, &want, T::TOL, "cpu_f64"), picked.len())
    }
}

/// Fresh random operands, one call with `algorithm` and its check ([`Inputs::check`]).
/// Returns the operands (for timing), the check and the rows checked.
pub fn prepare<T: Elem>(
    gpu: &Gpu,
    norm: Norm,
    algorithm: NormAlgorithm,
    shape: (usize, usize),
    sets: usize,
) -> Res<(Operands<T>, Check, usize)> {
    let inputs = Inputs::<T>::random(shape.0, shape.1);
    let mut ops = inputs.upload(gpu, shape, sets)?;
    ops.run(gpu, norm, algorithm, 0)?;
    let (check, checked) = inputs.check(norm, &ops.sets[0].1.as_vec().to_vec()?, shape);
    Ok((ops, check, checked))
}

/// Every shape, norm, element type and algorithm.
pub fn norm(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for (rows, cols) in shapes(b.quick) {
        if !b.wants(&format!("{rows}x{cols}")) {
            continue;
        }
        for norm in Norm::ALL {
            measure::<f32>(b, sink, norm, (rows, cols))?;
            measure::<bf16>(b, sink, norm, (rows, cols))?;
        }
    }
    Ok(())
}

/// Every algorithm of one norm, element type and shape, then the copy of its bytes.
fn measure<T: Elem>(b: &mut Bench, sink: &mut Sink, norm: Norm, (rows, cols): (usize, usize)) -> Res<()> {
    for algorithm in algorithms(b.plans) {
        if !algorithm.fits::<T>(cols) {
            continue;
        }
        let mut base = Record::new(
            norm.name(),
            format!("gpukern:{}", algorithm.name()),
            format!("{rows}x{cols}"),
        )
        .with("rows", rows)
        .with("cols", cols)
        // As written (1e-5), not widened from f32.
        .with("eps", format!("{EPS:e}").parse::<f64>().unwrap_or(f64::from(EPS)))
        .with("call", format!("gpu.{}_into_with", norm.name()));
        base.dtype = T::DTYPE;
        sink.item(base.clone(), || {
            let bytes = traffic::<T>(norm, rows, cols);
            let sets = sets_for(bytes as usize);
            let gpu = &b.gpu;
            let (mut ops, check, checked) = prepare::<T>(gpu, norm, algorithm, (rows, cols), sets)?;
            let record = base
                .checked(&check)
                .with("sets", sets)
                .with("checked_rows", checked);
            if !check.passed() {
                return Ok(record);
            }
            let stats = b.timer.measure(|i| Ok(ops.run(gpu, norm, algorithm, i)?))?;
            Ok(record.timed(&stats, Some(bytes), None))
        })?;
    }
    copy::<T>(b, sink, norm, (rows, cols))
}

/// A device-to-device copy (`cuMemcpyDtoDAsync`) of x's bytes, `rows * cols` elements of `T`,
/// into another buffer: record `kernel` the norm's, `impl` `copy`, traffic the bytes read plus
/// written (the norm's less its weight and bias). What a copy reaches at this size (launch and
/// ramp weigh more in 32 MiB than in the 1 GiB copy ceiling); the report's ceiling stays the
/// `copy` suite's (its `kernel` is `copy`).
fn copy<T: Elem>(b: &mut Bench, sink: &mut Sink, norm: Norm, (rows, cols): (usize, usize)) -> Res<()> {
    let mut base = Record::new(norm.name(), "copy", format!("{rows}x{cols}"))
        .with("rows", rows)
        .with("cols", cols)
        .with("call", "cuMemcpyDtoDAsync");
    base.dtype = T::DTYPE;
    // The same bytes as f32 words (a bf16 matrix of an even element count is half as many).
    let n = rows * cols * std::mem::size_of::<T>() / std::mem::size_of::<f32>();
    sink.item(base.clone(), || timed_copy(b, base, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_traffic_and_sampled_rows() {
        assert_eq!(shapes(false), vec![(8192, 1024), (8192, 4096), (8192, 16384)]);
        // At 1024 columns every algorithm's own kernel takes the rows; one copy per norm and
        // type; the candidates only with `plans`.
        assert_eq!(planned(true, true), 2 * 2 * (NormAlgorithm::ALL.len() + 1));
        assert_eq!(
            planned(true, false),
            2 * 2 * (NormAlgorithm::ALL.len() - PLAN_ONLY.len() + 1)
        );
        let named = |name| NormAlgorithm::from_name(name).expect("a norm algorithm");
        assert!(!named("warp").fits::<f32>(4096) && named("rows-64").fits::<f32>(16384));
        assert!(
            PLAN_ONLY
                .iter()
                .all(|name| NormAlgorithm::ALL.contains(&named(name)))
        );
        assert_eq!(traffic::<f32>(Norm::Rms, 2, 3), (2 * 6 * 4 + 3 * 4) as f64);
        assert_eq!(traffic::<bf16>(Norm::Layer, 2, 3), (2 * 6 * 2 + 2 * 3 * 2) as f64);
        assert_eq!(check_rows(8192, 1024).len(), 8192);
        let picked = check_rows(8192, 16384);
        assert_eq!(
            (picked.len(), picked[0], picked[CHECK_ROWS - 1]),
            (CHECK_ROWS, 0, 8191)
        );
        assert!(picked.windows(2).all(|p| p[0] < p[1]));
    }

    /// The prepare-and-check path on the simulator, every norm, type and algorithm, on a ragged
    /// shape and one of the in-register kernel's.
    #[test]
    fn checks_pass_on_the_simulator() {
        let gpu = Gpu::simulator();
        for shape in [(3, 1000), (2, 1024)] {
            for norm in Norm::ALL {
                for algorithm in NormAlgorithm::ALL {
                    let (_, c, rows) = prepare::<f32>(&gpu, norm, algorithm, shape, 2).unwrap();
                    assert!(c.passed(), "{norm:?} {algorithm:?} f32 {shape:?}: {}", c.rel_err);
                    assert_eq!(rows, shape.0);
                    let (_, c, _) = prepare::<bf16>(&gpu, norm, algorithm, shape, 1).unwrap();
                    assert!(c.passed(), "{norm:?} {algorithm:?} bf16 {shape:?}: {}", c.rel_err);
                }
            }
        }
    }

    /// Planted faults: RMSNorm's output checked as LayerNorm's, and an output missing a row,
    /// must fail.
    #[test]
    fn the_check_can_fail() {
        let gpu = Gpu::simulator();
        let shape = (2, 1024);
        let inputs = Inputs::<bf16>::random(shape.0, shape.1);
        let mut ops = inputs.upload(&gpu, shape, 1).unwrap();
        ops.run(&gpu, Norm::Rms, NormAlgorithm::InRegisters, 0).unwrap();
        let y = ops.sets[0].1.as_vec().to_vec().unwrap();
        assert!(inputs.check(Norm::Rms, &y, shape).0.passed());
        assert!(!inputs.check(Norm::Layer, &y, shape).0.passed());
        assert!(!inputs.check(Norm::Rms, &y[..shape.1], shape).0.passed());
    }
}
