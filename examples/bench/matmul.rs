//! Matrix product: every `MatmulAlgorithm` against cuBLAS sgemm (fp32, the ceiling) and cuBLAS
//! with TF32 tensor-core math (the ceiling of gpukern's TF32 rows, `math: tf32`), on row-major
//! f32 matrices. With `--plans`, each tiling of the fast kernels (`gpukern:fast/<tiling>`, `k`
//! unsplit) and of the TF32 kernels (`gpukern:tf32/<tiling>`) is timed on its own too, beside the
//! one that `FastPlan::choose` / `Tf32Tile::choose` picks, so one run compares them;
//! `gpukern:fast/128x128-stream-k` is the 128 x 128 kernel on the stream-K schedule
//! (`Gpu::matmul_stream_k_into`, the resident grid; its time includes the fixup launch and the
//! workspace allocation), beside `gpukern:fast/128x128` (one block per tile). `gpukern:fast`
//! is data-parallel unless `GPUKERN_SGEMM=stream-k` or `auto` (`StreamKPlan::choose`'s rule) says
//! otherwise.
//!
//! `gpukern:tf32_wgmma` is the TF32 kernel on Hopper's `wgmma` (`Tf32Tile::Wgmma`), on a
//! compute capability 9.0 GPU where `k` is a multiple of 4; its time includes the transpose of
//! `B` into a workspace (`8 k n` bytes more than the minimum below, not counted in it).
//!
//! Counts: 2*m*n*k flops; minimum traffic 4*(m*k + k*n + m*n) bytes.
//!
//! Reference, one for every implementation (gpukern, cuBLAS fp32 and TF32, and the peers, which
//! use torch in float64): the f64 product of the same inputs. At small sizes it is the f64 CPU
//! product ([`gpukern::cpu::matmul`], `ref: cpu_f64`); where that is too slow, cuBLAS dgemm on
//! the inputs widened to f64 (`ref: cublas_f64`), whose per-element error is many orders of
//! magnitude under an f32 kernel's.

use std::sync::Arc;

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, sys as blas_sys};
use cudarc::driver::{CudaSlice, CudaStream};
use gpukern::ops::matmul::{FastPlan, FastTile, Tf32Tile};
use gpukern::{DeviceMatrix, Gpu, MatmulAlgorithm};
use ndarray::ArrayView2;

use crate::Bench;
use crate::data::{random_vec, sets_for};
use crate::memory::F32_TOL;
use crate::record::{Check, Record, Res, Sink};
use crate::timing::Stats;

/// TF32 keeps 10 mantissa bits: a relative error of ~1e-3 is its normal result.
pub const TF32_TOL: f64 = 1e-2;
/// Above this many flops the f64 CPU reference takes more than ~0.5 s; cuBLAS dgemm is used instead.
const CPU_REF_MAX_FLOPS: f64 = 4.5e9;

/// `(m, n, k)`: `C (m x n) = A (m x k) * B (k x n)`.
pub type Shape = (usize, usize, usize);

/// The matmul shapes of BENCHMARKING.md.
pub fn shapes(quick: bool) -> Vec<Shape> {
    crate::suite::shapes3("matmul", quick)
}

/// The minimum bytes and the flops of a `kernel` (`matmul`, `matmul_with_copies`) at `shape`.
pub fn counts(kernel: &str, (m, n, k): Shape) -> (f64, f64) {
    let vars = [("m", m), ("n", n), ("k", k)];
    (
        crate::suite::bytes(kernel, &vars),
        crate::suite::flops(kernel, &vars),
    )
}

/// "MxNxK".
pub fn shape_name((m, n, k): Shape) -> String {
    format!("{m}x{n}x{k}")
}

/// Two cuBLAS handles on the Gpu's stream: default fp32 math, and TF32 tensor-op math.
pub struct Blas {
    fp32: CudaBlas,
    tf32: CudaBlas,
}

impl Blas {
    /// Loads cuBLAS; an error (not a panic) if the library is missing.
    pub fn new(stream: &Arc<CudaStream>) -> Res<Blas> {
        // SAFETY: only probes whether the library can be loaded.
        if !unsafe { blas_sys::is_culib_present() } {
            return Err(
                "cuBLAS not found: libcublas.so could not be loaded (add the CUDA \
                        toolkit's lib folder, e.g. /usr/local/cuda/lib64, to LD_LIBRARY_PATH)"
                    .into(),
            );
        }
        let handle = |math: blas_sys::cublasMath_t| -> Res<CudaBlas> {
            let blas = CudaBlas::new(stream.clone()).map_err(|e| format!("creating a cuBLAS handle: {e}"))?;
            // SAFETY: a live handle; the math mode is a plain setting.
            unsafe { blas_sys::cublasSetMathMode(*blas.handle(), math) }
                .result()
                .map_err(|e| format!("setting the cuBLAS math mode {math:?}: {e}"))?;
            Ok(blas)
        };
        Ok(Blas {
            fp32: handle(blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH)?,
            tf32: handle(blas_sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH)?,
        })
    }

    /// The handle with cuBLAS's default math mode (`cublasGemmEx` on 16-bit operands runs on
    /// tensor cores in it), for the half-precision rows (`matmul_half`).
    pub fn default_math(&self) -> &CudaBlas {
        &self.fp32
    }

    /// Row-major `C = A * B` in f64 with cuBLAS dgemm (the reference for large shapes), on the
    /// fp32 handle (its default math mode leaves dgemm in full f64).
    pub fn dgemm(
        &self,
        (m, n, k): Shape,
        a: &CudaSlice<f64>,
        b: &CudaSlice<f64>,
        c: &mut CudaSlice<f64>,
    ) -> Res<()> {
        let cfg = row_major_config((m, n, k), 1.0f64, 0.0f64)?;
        if a.len() < m * k || b.len() < k * n || c.len() < m * n {
            return Err("dgemm: a buffer is smaller than its matrix".into());
        }
        // SAFETY: buffer sizes checked above; the same column-major reading as `sgemm`.
        unsafe { self.fp32.gemm(cfg, b, a, c) }.map_err(|e| format!("cuBLAS dgemm: {e}"))?;
        Ok(())
    }

    /// Row-major `C = A * B` with cuBLAS sgemm. cuBLAS is column-major, and a row-major matrix
    /// is its transpose in column-major order, so this computes `C^T = B^T * A^T`.
    pub fn sgemm(
        &self,
        tf32: bool,
        (m, n, k): Shape,
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
    ) -> Res<()> {
        let cfg = row_major_config((m, n, k), 1.0f32, 0.0f32)?;
        if a.len() < m * k || b.len() < k * n || c.len() < m * n {
            return Err("sgemm: a buffer is smaller than its matrix".into());
        }
        let handle = if tf32 { &self.tf32 } else { &self.fp32 };
        // SAFETY: buffer sizes checked above; leading dimensions are those of dense row-major
        // matrices read as column-major transposes.
        unsafe { handle.gemm(cfg, b, a, c) }.map_err(|e| format!("cuBLAS sgemm: {e}"))?;
        Ok(())
    }
}

/// The cuBLAS (column-major) configuration of the row-major product `C = A * B` of `shape`:
/// `C^T = B^T * A^T`, each matrix read as its column-major transpose, no transposition flags.
pub fn row_major_config<T>((m, n, k): Shape, alpha: T, beta: T) -> Res<GemmConfig<T>> {
    let int = |v: usize| i32::try_from(v).map_err(|_| format!("{v} does not fit cuBLAS's int"));
    Ok(GemmConfig {
        transa: blas_sys::cublasOperation_t::CUBLAS_OP_N,
        transb: blas_sys::cublasOperation_t::CUBLAS_OP_N,
        m: int(n)?,
        n: int(m)?,
        k: int(k)?,
        alpha,
        lda: int(n)?,
        ldb: int(k)?,
        beta,
        ldc: int(n)?,
    })
}

/// The reference product of row-major `a` (m x k) and `b` (k x n), and what it came from.
pub fn reference(bench: &mut Bench, shape: Shape, a: &[f32], b: &[f32]) -> Res<(Vec<f32>, &'static str)> {
    let (m, n, k) = shape;
    if 2.0 * (m * n * k) as f64 <= CPU_REF_MAX_FLOPS {
        let c = gpukern::cpu::matmul(
            &ArrayView2::from_shape((m, k), a)?,
            &ArrayView2::from_shape((k, n), b)?,
        )?;
        return Ok((c.iter().copied().collect(), "cpu_f64"));
    }
    let blas = bench
        .blas()
        .map_err(|e| format!("no f64 reference at this size ({e})"))?;
    let s = &bench.stream;
    let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    let (da, db) = (s.clone_htod(&wide(a))?, s.clone_htod(&wide(b))?);
    let mut dc = s.clone_htod(&vec![f64::NAN; m * n])?;
    blas.dgemm(shape, &da, &db, &mut dc)?;
    // Rounded to f32 like the CPU reference: 2^-24 relative per element, far under f32 kernels' error.
    let c: Vec<f32> = s.clone_dtoh(&dc)?.into_iter().map(|x| x as f32).collect();
    Ok((c, "cublas_f64"))
}

/// One gpukern variant: the call that computes `c = a * b`.
type Run<'a> = Box<dyn Fn(&Gpu, &DeviceMatrix, &DeviceMatrix, &mut DeviceMatrix) -> gpukern::Result<()> + 'a>;

/// `sets` copies of the inputs and a NaN-filled result, cuBLAS's (device slices).
type CublasBufs = Vec<(CudaSlice<f32>, CudaSlice<f32>, CudaSlice<f32>)>;
/// The same, gpukern's (device matrices).
type GpukernBufs = Vec<(DeviceMatrix, DeviceMatrix, DeviceMatrix)>;

/// One shape's inputs, reference and counts, shared by its rows.
struct Ctx<'a> {
    shape: Shape,
    sets: usize,
    flops: f64,
    bytes: f64,
    a: &'a [f32],
    b: &'a [f32],
    nan: &'a [f32],
    reference: &'a Result<(Vec<f32>, &'static str), String>,
}

impl Ctx<'_> {
    /// `record` checked against the reference (TF32's tolerance with `tf32`); whether it passed.
    fn check(&self, record: Record, out: &[f32], tf32: bool) -> (Record, bool) {
        match self.reference {
            Ok((r, what)) => {
                let check = Check::new(out, r, if tf32 { TF32_TOL } else { F32_TOL }, what);
                let passed = check.passed();
                (record.checked(&check), passed)
            }
            Err(e) => (record.failed(e), false),
        }
    }

    /// cuBLAS's buffers, one call, the check: the record, and the buffers if it passed.
    fn prepare_cublas(
        &self,
        bench: &mut Bench,
        base: Record,
        tf32: bool,
    ) -> Res<(Record, Option<CublasBufs>)> {
        let blas = bench.blas()?;
        let s = bench.stream.clone();
        let mut bufs = Vec::with_capacity(self.sets);
        for _ in 0..self.sets {
            bufs.push((
                s.clone_htod(self.a)?,
                s.clone_htod(self.b)?,
                s.clone_htod(self.nan)?,
            ));
        }
        self.sgemm(&blas, tf32, &mut bufs, 0)?;
        let out = s.clone_dtoh(&bufs[0].2)?;
        let (record, passed) = self.check(base.with("sets", self.sets), &out, tf32);
        Ok((record, passed.then_some(bufs)))
    }

    /// gpukern's buffers, one call of `run`, the check: the record, and the buffers if it passed.
    fn prepare_gpukern(
        &self,
        gpu: &Gpu,
        base: Record,
        tf32: bool,
        run: &Run,
    ) -> Res<(Record, Option<GpukernBufs>)> {
        if let Err(e) = self.reference {
            return Ok((base.failed(e), None));
        }
        let (m, n, k) = self.shape;
        let mut bufs = Vec::with_capacity(self.sets);
        for _ in 0..self.sets {
            bufs.push((
                gpu.upload_matrix(&ArrayView2::from_shape((m, k), self.a)?)?,
                gpu.upload_matrix(&ArrayView2::from_shape((k, n), self.b)?)?,
                gpu.upload_matrix(&ArrayView2::from_shape((m, n), self.nan)?)?,
            ));
        }
        self.gpukern(gpu, run, &mut bufs, 0)?;
        let out = bufs[0].2.as_vec().to_vec()?;
        let (record, passed) = self.check(base.with("sets", self.sets), &out, tf32);
        Ok((record, passed.then_some(bufs)))
    }

    /// cuBLAS call `i`, on set `i % sets`.
    fn sgemm(&self, blas: &Blas, tf32: bool, bufs: &mut CublasBufs, i: usize) -> Res<()> {
        let sets = bufs.len();
        let (da, db, dc) = &mut bufs[i % sets];
        blas.sgemm(tf32, self.shape, da, db, dc)
    }

    /// gpukern call `i` of `run`, on set `i % sets`.
    fn gpukern(&self, gpu: &Gpu, run: &Run, bufs: &mut GpukernBufs, i: usize) -> Res<()> {
        let sets = bufs.len();
        let (da, db, dc) = &mut bufs[i % sets];
        Ok(run(gpu, da, db, dc)?)
    }

    /// `record` with the rates of `stats`.
    fn timed(&self, record: Record, stats: &Stats) -> Record {
        record.timed(stats, Some(self.bytes), Some(self.flops))
    }
}

/// Every algorithm and cuBLAS at every shape.
pub fn matmul(b: &mut Bench, sink: &mut Sink) -> Res<()> {
    for shape in shapes(b.quick) {
        let (m, n, k) = shape;
        let name = shape_name(shape);
        if !b.wants(&name) {
            continue;
        }
        let (bytes, flops) = counts("matmul", (m, n, k));
        let sets = sets_for(bytes as usize);
        let base = |imp: &str, math: &str| {
            Record::new("matmul", imp, name.clone())
                .with("m", m)
                .with("n", n)
                .with("k", k)
                .with("math", math)
        };
        // Past the time budget every item below is skipped: prepare nothing.
        let (a, bm, nan) = if sink.expired() {
            (Vec::new(), Vec::new(), Vec::new())
        } else {
            sink.note(&format!("matmul {name}: preparing inputs and the reference"));
            (
                random_vec(m * k, -1.0, 1.0),
                random_vec(k * n, -1.0, 1.0),
                vec![f32::NAN; m * n],
            )
        };
        let reference = match sink.expired() {
            true => Err("time budget spent".to_string()),
            false => crate::record::catch(|| reference(b, shape, &a, &bm)).map_err(|e| e.to_string()),
        };

        let ctx = Ctx {
            shape,
            sets,
            flops,
            bytes,
            a: &a,
            b: &bm,
            nan: &nan,
            reference: &reference,
        };

        // gpukern: every algorithm; with `--plans`, each fast and TF32 tiling on its own too.
        let mut runs: Vec<(String, bool, Run)> = MatmulAlgorithm::ALL
            .into_iter()
            .map(|algorithm| {
                let run: Run = Box::new(move |gpu, a, b, c| gpu.matmul_into(a, b, c, algorithm));
                (algorithm.name().to_string(), algorithm.uses_tf32(), run)
            })
            .collect();
        // Hopper's TF32 `wgmma` (where the GPU and `k` allow), forced: `gpukern:tf32` takes it
        // too there, this row says so by name and stays when the default changes.
        if Tf32Tile::wgmma_applies(k, true, b.gpu.has_wgmma()) {
            let run: Run = Box::new(|gpu, a, b, c| gpu.matmul_tf32_into(a, b, c, Tf32Tile::Wgmma));
            runs.push(("tf32_wgmma".to_string(), true, run));
        }
        if b.plans {
            for tile in FastTile::ALL {
                let plan = FastPlan { tile, slices: 1 };
                let run: Run = Box::new(move |gpu, a, b, c| gpu.matmul_fast_into(a, b, c, plan));
                runs.push((format!("fast/{}", tile.name()), false, run));
            }
            // The stream-K schedule of the 128 x 128 kernel on the resident grid, beside
            // `fast/128x128` (one block per tile); 16-byte kernel only, so only where it runs.
            if k % 4 == 0 && n % 4 == 0 {
                let run: Run = Box::new(|gpu, a, b, c| gpu.matmul_stream_k_into(a, b, c, None));
                runs.push(("fast/128x128-stream-k".to_string(), false, run));
            }
            for tile in Tf32Tile::ALL {
                let run: Run = Box::new(move |gpu, a, b, c| gpu.matmul_tf32_into(a, b, c, tile));
                runs.push((format!("tf32/{}", tile.name()), true, run));
            }
        }
        // cuBLAS sgemm with `gpukern:fast` and cuBLAS TF32 with `gpukern:tf32`, each pair timed
        // in alternation (the targets' ratios); every other row on its own.
        for (imp, tf32, partner) in [("cublas", false, "fast"), ("cublas_tf32", true, "tf32")] {
            let cublas = base(imp, if tf32 { "tf32" } else { "fp32" });
            // Both are in `MatmulAlgorithm::ALL`.
            let (variant, _, run) = runs
                .iter()
                .find(|r| r.0 == partner)
                .ok_or_else(|| format!("no gpukern:{partner} row to time beside {imp}"))?;
            let gk_imp = format!("gpukern:{variant}");
            let gk = base(&gk_imp, if tf32 { "tf32" } else { "fp32" });
            sink.item_pair((cublas.clone(), gk.clone()), || {
                let (c_record, mut c_bufs) = ctx.prepare_cublas(b, cublas, tf32)?;
                let (g_record, mut g_bufs) = ctx.prepare_gpukern(&b.gpu, gk, tf32, run)?;
                let blas = b.blas()?;
                let gpu = &b.gpu;
                let (cs, gs) = b.timer.measure_given(
                    c_bufs.as_mut().map(|cb| |i| ctx.sgemm(&blas, tf32, cb, i)),
                    g_bufs.as_mut().map(|gb| |i| ctx.gpukern(gpu, run, gb, i)),
                )?;
                let paired = cs.is_some() && gs.is_some();
                let (bytes, flops) = (Some(ctx.bytes), Some(ctx.flops));
                Ok((
                    c_record.timed_beside(cs, paired.then_some(gk_imp.as_str()), bytes, flops),
                    g_record.timed_beside(gs, paired.then_some(imp), bytes, flops),
                ))
            })?;
        }
        for (variant, tf32, run) in &runs {
            if variant == "fast" || variant == "tf32" {
                continue;
            }
            let gk = base(&format!("gpukern:{variant}"), if *tf32 { "tf32" } else { "fp32" });
            sink.item(gk.clone(), || {
                let (record, prepared) = ctx.prepare_gpukern(&b.gpu, gk, *tf32, run)?;
                let Some(mut bufs) = prepared else {
                    return Ok(record);
                };
                let gpu = &b.gpu;
                let stats = b.timer.measure(|i| ctx.gpukern(gpu, run, &mut bufs, i))?;
                Ok(ctx.timed(record, &stats))
            })?;
        }
    }
    Ok(())
}
