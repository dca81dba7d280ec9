//! Half-precision matrix product (issue 13): bf16 and fp16 operands, products on tensor cores with
//! f32 sums, row-major. gpukern's kernel through `gpu.matmul_to(a, b, c)` (no allocation; the
//! result in the operands' type, and at one shape in f32 too) against cuBLAS `cublasGemmEx` with
//! the same types in and out (`CUDA_R_16BF` / `CUDA_R_16F`, `CUBLAS_COMPUTE_32F`, the default
//! algorithm, the default math mode), the f32-result rows against `cublasGemmEx` writing
//! `CUDA_R_32F`.
//!
//! Records: `kernel` `matmul_half`; `dtype` and `math` the operands' type (`bf16`, `fp16`); `out`
//! the result type. Counts: 2*m*n*k flops; minimum traffic 2*(m*k + k*n) bytes plus 2*m*n for a
//! 16-bit result or 4*m*n for an f32 one.
//!
//! Inputs: uniform in [-1, 1), rounded to the type, fresh per type and shape. Reference, one for
//! every implementation: the f64 product of those rounded inputs ([`crate::matmul::reference`]:
//! the CPU in f64, or cuBLAS dgemm at large sizes), held in f32. The relative error norm of a
//! 16-bit result is dominated by its final rounding, a fraction of its unit roundoff (2^-8 for
//! bf16, 2^-11 for fp16); the tolerance is three units, so operands read with a 4-bit mantissa or
//! a dropped k-tile fail (see the tests below). An f32 result is held to the f32 suite's
//! tolerance.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublas::{CudaBlas, result as blas_result, sys as blas_sys};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr};
use gpukern::ops::matmul::{HalfTile, WsTile};
use gpukern::{DeviceMatrix, Element, Gpu, MatmulOutput, bf16, f16};
use ndarray::ArrayView2;

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::matmul::{Shape, row_major_config, shape_name};
use crate::memory::F32_TOL;
use crate::record::{Check, Record, Res, Sink};

/// The `kernel` of every record here.
const KERNEL: &str = "matmul_half";

/// The shapes of issue 13's targets.
pub fn shapes(quick: bool) -> Vec<Shape> {
    crate::suite::shapes3("matmul_half", quick)
}

/// The shape where the f32-result rows (gpukern and cuBLAS) are measured too.
pub fn f32_out_shape(quick: bool) -> Shape {
    let s = crate::suite::extra_shape("matmul_half", "f32_out", quick);
    (s[0], s[1], s[2])
}

/// The shapes where `--plans` times each tile of the warp-specialised kernel too
/// ([`WsTile::ALL`], the result in the operands' type): all but 8192^3.
fn plans_shape(shape: Shape) -> bool {
    shape.0 <= 4097
}

/// The implementation name of the warp-specialised kernel forced to `tile`:
/// `gpukern:wgmma_ws_128x256`, `gpukern:wgmma_ws_128x128`, `gpukern:wgmma_ws_64x128`.
fn ws_tile_impl(tile: WsTile) -> &'static str {
    match tile {
        WsTile::Wide => "gpukern:wgmma_ws_128x256",
        WsTile::Square => "gpukern:wgmma_ws_128x128",
        WsTile::Narrow => "gpukern:wgmma_ws_64x128",
    }
}

/// Records this suite writes: per shape and type, gpukern and cuBLAS, twice at the f32-out shape;
/// with `plans`, each warp-specialised tile per type at [`plans_shape`]s.
pub fn planned(quick: bool, plans: bool) -> usize {
    shapes(quick)
        .into_iter()
        .map(|s| {
            let outs = if s == f32_out_shape(quick) { 2 } else { 1 };
            // cuBLAS and mma.sync in both types; where k and n allow, the one-warpgroup wgmma
            // kernel in bf16; the warp-specialised one in both types (on padded copies where k
            // or n is not a multiple of 8). On a GPU without them those rows are not written:
            // the count is an upper bound.
            let wgmma = usize::from(s.1 % 8 == 0 && s.2 % 8 == 0);
            let tiles = if plans && plans_shape(s) {
                2 * WsTile::ALL.len()
            } else {
                0
            };
            outs * (2 * 2 + wgmma + 2) + tiles
        })
        .sum()
}

/// A number that converts to and from f32 (the result types: f32, bf16, f16).
pub trait Num: Copy {
    /// The value, widened (exact) or rounded to f32.
    fn to_f32(self) -> f32;
    /// The value rounded to nearest (even) from f32.
    fn from_f32(x: f32) -> Self;
}

impl Num for f32 {
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(x: f32) -> f32 {
        x
    }
}

impl Num for bf16 {
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn from_f32(x: f32) -> bf16 {
        bf16::from_f32(x)
    }
}

impl Num for f16 {
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn from_f32(x: f32) -> f16 {
        f16::from_f32(x)
    }
}

/// An operand type measured here: bf16 or f16.
pub trait Half: Num + Element + DeviceRepr + MatmulOutput<Self> {
    /// The records' `dtype` and `math`: `bf16`, `fp16`.
    const NAME: &'static str;
    /// cuBLAS's name of the type.
    const CUDA: blas_sys::cudaDataType_t;
    /// The largest relative error norm of a result in this type: three unit roundoffs.
    const TOL: f64;
}

impl Half for bf16 {
    const NAME: &'static str = "bf16";
    const CUDA: blas_sys::cudaDataType_t = blas_sys::cudaDataType_t::CUDA_R_16BF;
    const TOL: f64 = 3.0 / 256.0;
}

impl Half for f16 {
    const NAME: &'static str = "fp16";
    const CUDA: blas_sys::cudaDataType_t = blas_sys::cudaDataType_t::CUDA_R_16F;
    const TOL: f64 = 3.0 / 2048.0;
}

/// The inputs of one type and shape and their reference.
struct Inputs<T> {
    a: Vec<T>,
    b: Vec<T>,
    /// The f64 product of `a` and `b`, in f32, and where it came from; or why there is none.
    reference: Result<(Vec<f32>, &'static str), String>,
}

/// `n` values uniform in [-1, 1), rounded to `T`.
fn random_of<T: Num>(n: usize) -> Vec<T> {
    random_vec(n, -1.0, 1.0).into_iter().map(T::from_f32).collect()
}

/// Fresh inputs of `T` at `shape` and their reference (nothing past the time budget).
fn inputs<T: Half>(bench: &mut Bench, sink: &Sink, shape: Shape) -> Inputs<T> {
    let (m, n, k) = shape;
    if sink.expired() {
        let reference = Err("time budget spent".to_string());
        return Inputs {
            a: Vec::new(),
            b: Vec::new(),
            reference,
        };
    }
    sink.note(&format!(
        "{KERNEL} {} {}: preparing inputs and the reference",
        T::NAME,
        shape_name(shape)
    ));
    let (a, b) = (random_of::<T>(m * k), random_of::<T>(k * n));
    let reference = crate::record::catch(|| {
        let wide = |v: &[T]| v.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
        crate::matmul::reference(bench, shape, &wide(&a), &wide(&b))
    })
    .map_err(|e| e.to_string());
    Inputs { a, b, reference }
}

/// The record of `imp` at `shape` for operands `T` and result `out`, nothing measured yet.
fn base<T: Half>(imp: &str, shape: Shape, out: &str) -> Record {
    let (m, n, k) = shape;
    let mut r = Record::new(KERNEL, imp, shape_name(shape))
        .with("m", m)
        .with("n", n)
        .with("k", k)
        .with("math", T::NAME)
        .with("out", out);
    r.dtype = T::NAME;
    r
}

/// Minimum bytes moved by a product at `shape` whose result elements are `out_bytes` wide.
fn traffic((m, n, k): Shape, out_bytes: usize) -> f64 {
    crate::suite::bytes("matmul_half", &[("m", m), ("n", n), ("k", k), ("o", out_bytes)])
}

/// Checks `out` (widened to f32) against the reference; the record, and whether it may be timed.
fn check<O: Num>(record: Record, out: &[O], inputs: &Inputs<impl Half>, tol: f64) -> (Record, bool) {
    match &inputs.reference {
        Ok((r, what)) => {
            let out: Vec<f32> = out.iter().map(|x| x.to_f32()).collect();
            let check = Check::new(&out, r, tol, what);
            (record.checked(&check), check.passed())
        }
        Err(e) => (record.failed(e), false),
    }
}

/// Row-major `C = A * B` with `cublasGemmEx`: `T` operands, an `O` result (`T`, or f32), f32
/// compute type, the default algorithm; computed as `C^T = B^T A^T` in cuBLAS's column-major
/// terms, like [`crate::matmul::Blas::sgemm`].
fn gemm_ex<T: Half, O: DeviceRepr>(
    blas: &CudaBlas,
    stream: &CudaStream,
    shape: Shape,
    out_type: blas_sys::cudaDataType_t,
    a: &CudaSlice<T>,
    b: &CudaSlice<T>,
    c: &mut CudaSlice<O>,
) -> Res<()> {
    let (m, n, k) = shape;
    let cfg = row_major_config(shape, 1.0f32, 0.0f32)?;
    if a.len() < m * k || b.len() < k * n || c.len() < m * n {
        return Err("cublasGemmEx: a buffer is smaller than its matrix".into());
    }
    let (pa, _ra) = a.device_ptr(stream);
    let (pb, _rb) = b.device_ptr(stream);
    let (pc, _rc) = c.device_ptr_mut(stream);
    // SAFETY: buffer sizes checked above, element types as declared (`T::CUDA`, `out_type`
    // matches `O` at every call); the pointers stay valid while the guards live, and the handle
    // runs on `stream`, the stream the guards order the buffers on.
    unsafe {
        blas_result::gemm_ex(
            *blas.handle(),
            cfg.transa,
            cfg.transb,
            cfg.m,
            cfg.n,
            cfg.k,
            (&cfg.alpha) as *const f32 as *const c_void,
            pb as *const c_void,
            T::CUDA,
            cfg.lda,
            pa as *const c_void,
            T::CUDA,
            cfg.ldb,
            (&cfg.beta) as *const f32 as *const c_void,
            pc as *mut c_void,
            out_type,
            cfg.ldc,
            blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
    .map_err(|e| format!("cublasGemmEx: {e}"))?;
    Ok(())
}

/// cuBLAS's buffers at one shape, its result checked: ready to time.
struct CublasRun<T: DeviceRepr, O: DeviceRepr> {
    blas: Arc<crate::matmul::Blas>,
    stream: Arc<CudaStream>,
    shape: Shape,
    out_type: blas_sys::cudaDataType_t,
    bufs: Vec<(CudaSlice<T>, CudaSlice<T>, CudaSlice<O>)>,
}

impl<T: Half, O: DeviceRepr> CublasRun<T, O> {
    /// Call `i`, on the `i % sets`-th set of buffers.
    fn launch(&mut self, i: usize) -> Res<()> {
        let sets = self.bufs.len();
        let (da, db, dc) = &mut self.bufs[i % sets];
        gemm_ex(
            self.blas.default_math(),
            &self.stream,
            self.shape,
            self.out_type,
            da,
            db,
            dc,
        )
    }
}

/// gpukern's buffers at one shape, its result checked: ready to time.
struct GpukernRun<T: Element, O: Element> {
    tile: HalfTile,
    bufs: Vec<(DeviceMatrix<T>, DeviceMatrix<T>, DeviceMatrix<O>)>,
}

impl<T: Half, O: Num + MatmulOutput<T>> GpukernRun<T, O> {
    /// Call `i`, on the `i % sets`-th set of buffers.
    fn launch(&mut self, gpu: &Gpu, i: usize) -> Res<()> {
        let sets = self.bufs.len();
        let (da, db, dc) = &mut self.bufs[i % sets];
        Ok(gpu.matmul_to_with(da, db, dc, self.tile)?)
    }
}

/// What a row is measured with: its name, the result's name, the tolerance.
type Row<'a> = (&'a str, &'a str, f64);

/// cuBLAS at `shape` into `O` (`out_type`): buffers, one call, the check. The checked record, and
/// the run when the check passed.
fn prepare_cublas<T: Half, O: Num + DeviceRepr>(
    b: &mut Bench,
    shape: Shape,
    inputs: &Inputs<T>,
    (imp, out, tol): Row,
    out_type: blas_sys::cudaDataType_t,
) -> Res<(Record, Option<CublasRun<T, O>>)> {
    let (m, n, _) = shape;
    let sets = sets_for(traffic(shape, size_of::<O>()) as usize);
    let blas = b.blas()?;
    let stream = b.stream.clone();
    let nan = vec![O::from_f32(f32::NAN); m * n];
    let mut bufs = Vec::with_capacity(sets);
    for _ in 0..sets {
        bufs.push((
            stream.clone_htod(&inputs.a)?,
            stream.clone_htod(&inputs.b)?,
            stream.clone_htod(&nan)?,
        ));
    }
    let mut run = CublasRun {
        blas,
        stream,
        shape,
        out_type,
        bufs,
    };
    run.launch(0)?;
    let result = run.stream.clone_dtoh(&run.bufs[0].2)?;
    let (record, passed) = check(
        cublas_base::<T>(imp, shape, out).with("sets", sets),
        &result,
        inputs,
        tol,
    );
    Ok((record, passed.then_some(run)))
}

/// gpukern's `gpu.matmul_to_with(.., tile)` at `shape` into `O`: buffers, one call, the check.
/// The checked record, and the run when the check passed.
fn prepare_gpukern<T: Half, O: Num + MatmulOutput<T>>(
    b: &Bench,
    shape: Shape,
    inputs: &Inputs<T>,
    (imp, out, tol): Row,
    tile: HalfTile,
) -> Res<(Record, Option<GpukernRun<T, O>>)> {
    let (m, n, k) = shape;
    let sets = sets_for(traffic(shape, size_of::<O>()) as usize);
    let base = gpukern_base::<T>(imp, shape, out, tile);
    if let Err(e) = &inputs.reference {
        return Ok((base.failed(e), None));
    }
    let gpu = &b.gpu;
    let nan = vec![O::from_f32(f32::NAN); m * n];
    let mut bufs = Vec::with_capacity(sets);
    for _ in 0..sets {
        bufs.push((
            gpu.upload_matrix(&ArrayView2::from_shape((m, k), &inputs.a)?)?,
            gpu.upload_matrix(&ArrayView2::from_shape((k, n), &inputs.b)?)?,
            gpu.upload_matrix(&ArrayView2::from_shape((m, n), &nan)?)?,
        ));
    }
    let mut run = GpukernRun { tile, bufs };
    run.launch(gpu, 0)?;
    let result = run.bufs[0].2.as_vec().to_vec()?;
    let (record, passed) = check(base.with("sets", sets), &result, inputs, tol);
    Ok((record, passed.then_some(run)))
}

/// The record of cuBLAS's row `imp` (result `out`), nothing measured yet.
fn cublas_base<T: Half>(imp: &str, shape: Shape, out: &str) -> Record {
    base::<T>(imp, shape, out)
        .with("compute", "CUBLAS_COMPUTE_32F")
        .with("algo", "CUBLAS_GEMM_DEFAULT")
}

/// The record of gpukern's row `imp` (result `out`, `tile`), nothing measured yet.
fn gpukern_base<T: Half>(imp: &str, shape: Shape, out: &str, tile: HalfTile) -> Record {
    base::<T>(imp, shape, out).with("tile", tile.name())
}

/// The minimum bytes moved and the flops of a product at `shape` with an `O` result.
fn rates<O>((m, n, k): Shape) -> (Option<f64>, Option<f64>) {
    let flops = 2.0 * (m * n) as f64 * k as f64;
    (Some(traffic((m, n, k), size_of::<O>())), Some(flops))
}

/// gpukern's `gpu.matmul_to_with(.., tile)` at `shape`, result `O`, timed on its own.
fn gpukern<T: Half, O: Num + MatmulOutput<T>>(
    b: &mut Bench,
    sink: &mut Sink,
    shape: Shape,
    inputs: &Inputs<T>,
    row: Row,
    tile: HalfTile,
) -> Res<()> {
    sink.item(gpukern_base::<T>(row.0, shape, row.1, tile), || {
        let (record, run) = prepare_gpukern::<T, O>(b, shape, inputs, row, tile)?;
        let Some(mut run) = run else { return Ok(record) };
        let gpu = &b.gpu;
        let stats = b.timer.measure(|i| run.launch(gpu, i))?;
        let (bytes, flops) = rates::<O>(shape);
        Ok(record.timed(&stats, bytes, flops))
    })
}

/// cuBLAS and gpukern's `tile` at `shape`, result `O`, timed in alternation
/// ([`crate::timing::Timer::measure_pair`]) so that both rows see the same clocks and power
/// state; each record names the other (`interleaved_with`). A row whose check fails is recorded
/// untimed and the other is timed on its own.
#[allow(clippy::too_many_arguments)]
fn cublas_and_gpukern<T: Half, O: Num + DeviceRepr + MatmulOutput<T>>(
    b: &mut Bench,
    sink: &mut Sink,
    shape: Shape,
    inputs: &Inputs<T>,
    (cublas_row, out_type): (Row, blas_sys::cudaDataType_t),
    (gpukern_row, tile): (Row, HalfTile),
) -> Res<()> {
    let bases = (
        cublas_base::<T>(cublas_row.0, shape, cublas_row.1),
        gpukern_base::<T>(gpukern_row.0, shape, gpukern_row.1, tile),
    );
    sink.item_pair(bases, || {
        let (c_record, mut c_run) = prepare_cublas::<T, O>(b, shape, inputs, cublas_row, out_type)?;
        let (g_record, mut g_run) = prepare_gpukern::<T, O>(b, shape, inputs, gpukern_row, tile)?;
        let gpu = &b.gpu;
        let (cs, gs) = b.timer.measure_given(
            c_run.as_mut().map(|c| |i| c.launch(i)),
            g_run.as_mut().map(|g| |i| g.launch(gpu, i)),
        )?;
        let paired = cs.is_some() && gs.is_some();
        let (bytes, flops) = rates::<O>(shape);
        Ok((
            c_record.timed_beside(cs, paired.then_some(gpukern_row.0), bytes, flops),
            g_record.timed_beside(gs, paired.then_some(cublas_row.0), bytes, flops),
        ))
    })
}

/// Every row of operand type `T` at `shape`: cuBLAS and gpukern's default kernel (the
/// warp-specialised one where the sm_90a module is loaded) timed in alternation, the other
/// kernels on their own.
fn rows<T: Half>(b: &mut Bench, sink: &mut Sink, shape: Shape) -> Res<()>
where
    f32: MatmulOutput<T>,
{
    let inputs = inputs::<T>(b, sink, shape);
    let f32_out = shape == f32_out_shape(b.quick);
    let f32_type = blas_sys::cudaDataType_t::CUDA_R_32F;
    let same = (("cublas", T::NAME, T::TOL), T::CUDA);
    let widened = (("cublas_f32out", "f32", F32_TOL), f32_type);
    // The mma.sync kernel on every shape; where they apply (k and n multiples of 8, the sm_90a
    // module loaded) the one-warpgroup wgmma kernel (bf16 only) and the warp-specialised one.
    let wgmma = HalfTile::wgmma_applies(T::NAME == "bf16", shape.2, shape.1, true, b.gpu.has_wgmma());
    let mut tiles = vec![(HalfTile::Square, "gpukern:mma", "gpukern:mma_f32out")];
    if wgmma {
        tiles.push((HalfTile::Wgmma, "gpukern:wgmma", "gpukern:wgmma_f32out"));
    }
    // The warp-specialised kernel wherever the sm_90a module is loaded, its tile the plan's
    // (`WsTile::choose`): on padded copies of the operands where k or n is not a multiple of 8
    // (the copies are in the timed call). It is the default there, and the row timed with
    // cuBLAS; elsewhere the mma.sync kernel is.
    if b.gpu.has_wgmma() {
        tiles.push((
            HalfTile::WarpSpecialized,
            "gpukern:wgmma_ws",
            "gpukern:wgmma_ws_f32out",
        ));
    }
    let (default, default_imp, default_imp_f32) = tiles[tiles.len() - 1];
    cublas_and_gpukern::<T, T>(
        b,
        sink,
        shape,
        &inputs,
        same,
        ((default_imp, T::NAME, T::TOL), default),
    )?;
    if f32_out {
        let row = ((default_imp_f32, "f32", F32_TOL), default);
        cublas_and_gpukern::<T, f32>(b, sink, shape, &inputs, widened, row)?;
    }
    for &(tile, imp, imp_f32) in &tiles[..tiles.len() - 1] {
        gpukern::<T, T>(b, sink, shape, &inputs, (imp, T::NAME, T::TOL), tile)?;
        if f32_out {
            gpukern::<T, f32>(b, sink, shape, &inputs, (imp_f32, "f32", F32_TOL), tile)?;
        }
    }
    // `--plans`: each tile of the warp-specialised kernel, forced, for choosing the plan's
    // thresholds.
    if b.plans && b.gpu.has_wgmma() && plans_shape(shape) {
        for ws in WsTile::ALL {
            let tile = HalfTile::WarpSpecializedTile(ws);
            gpukern::<T, T>(b, sink, shape, &inputs, (ws_tile_impl(ws), T::NAME, T::TOL), tile)?;
        }
    }
    Ok(())
}

/// bf16 then fp16 at every shape.
pub fn matmul_half(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for shape in shapes(b.quick) {
        if !b.wants(&shape_name(shape)) {
            continue;
        }
        rows::<bf16>(b, sink, shape)?;
        rows::<f16>(b, sink, shape)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check of a 16-bit result at `(m, n, k)`: the reference rounded to `T` passes; a
    /// result from operands cut to 4 significant bits, or with the last 32 terms of `k` dropped,
    /// fails.
    fn check_can_fail<T: Half>() {
        let (m, n, k) = (48, 40, 512);
        let a: Vec<T> = random_of(m * k);
        let b: Vec<T> = random_of(k * n);
        let product = |keep: usize, cut: fn(f32) -> f32| -> Vec<f32> {
            let mut c = vec![0.0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    let s: f64 = (0..keep)
                        .map(|l| {
                            f64::from(cut(a[i * k + l].to_f32())) * f64::from(cut(b[l * n + j].to_f32()))
                        })
                        .sum();
                    c[i * n + j] = s as f32;
                }
            }
            c
        };
        let exact = |x: f32| x;
        // Keeps the sign, the exponent and the 3 leading mantissa bits (4 significant bits).
        let four_bits = |x: f32| f32::from_bits(x.to_bits() & 0xfff0_0000);
        let reference = product(k, exact);
        let rounded: Vec<f32> = reference.iter().map(|&x| T::from_f32(x).to_f32()).collect();
        let err = |out: &[f32]| gpukern::cpu::rel_error(out, &reference);
        assert!(
            err(&rounded) <= T::TOL,
            "{}: the rounded reference fails: {}",
            T::NAME,
            err(&rounded)
        );
        assert!(err(&rounded) > 0.0, "{}: rounding changed nothing", T::NAME);
        let truncated: Vec<f32> = product(k, four_bits)
            .iter()
            .map(|&x| T::from_f32(x).to_f32())
            .collect();
        assert!(
            err(&truncated) > T::TOL,
            "{}: 4-bit operands pass: {}",
            T::NAME,
            err(&truncated)
        );
        let dropped: Vec<f32> = product(k - 32, exact)
            .iter()
            .map(|&x| T::from_f32(x).to_f32())
            .collect();
        assert!(
            err(&dropped) > T::TOL,
            "{}: a dropped k-tile passes: {}",
            T::NAME,
            err(&dropped)
        );
        // The f32-result tolerance catches a dropped k-tile too.
        assert!(err(&product(k - 32, exact)) > F32_TOL);
    }

    #[test]
    fn bf16_check_can_fail() {
        check_can_fail::<bf16>();
    }

    #[test]
    fn fp16_check_can_fail() {
        check_can_fail::<f16>();
    }

    #[test]
    fn planned_matches_the_rows() {
        // Three square shapes of 2 x 2 + 3 rows, 4096^3 with its f32 results (twice), the ragged
        // one (6: k and n odd, no one-warpgroup wgmma row).
        assert_eq!(planned(false, false), 3 * 7 + 2 * 7 + 6);
        // `--plans`: three tiles in two types at every shape but 8192^3.
        assert_eq!(planned(false, true), planned(false, false) + 4 * 6);
        assert!(shapes(false).contains(&f32_out_shape(false)));
        assert!(shapes(true).contains(&f32_out_shape(true)));
    }
}
