//! The f32 matmul kernels launched through the simulator, with the launch their doc comments give,
//! against an f64 computation, rung by rung:
//! 1. `matmul_naive` and `matmul_tiled` on small ragged shapes;
//! 2. the register-tiled and wide kernels (`matmul_fast_*`), each once on a ragged shape, a split
//!    of `k` added up by `matmul_sum_splits`, and a 16-byte kernel handed a misaligned matrix
//!    (caught). Small on purpose: a block of these kernels is 256 threads.
//!
//! The TF32 kernels are in `matmul_tf32.rs`.

mod common;

use common::matmul::{naive_config, run_matmul, tiled_config};
use common::{assert_close, floats, random};
use kernels_gpu::gpu::vector::F4;
use kernels_gpu::matmul::{self, FastTiling, FAST_128, FAST_64, FAST_WIDE};
use kernels_gpu::sim::{Dim3, Launch, LaunchConfig, SimError, Violation};

/// [`matmul::fast_gemm`](fn@matmul::fast_gemm) with tiling `$t` and 16-byte accesses or not: the
/// instance behind an entry (`fast!(FAST_64, true)` is `matmul_fast_64x64_vec4`).
macro_rules! fast {
    ($t:expr, $vec:expr) => {
        matmul::fast_gemm::<
            { $t.block_rows },
            { $t.block_cols },
            { $t.block_k },
            { $t.thread_rows },
            { $t.thread_cols },
            $vec,
        >
    };
}

// ---------------------------------------------------------------------------------------------
// 1. The tutorial rungs
// ---------------------------------------------------------------------------------------------

/// `C = A * B` in f64, and for each element the error scale `sum_i |A[r][i] * B[i][c]|`.
fn matmul_f64(a: &[f32], b: &[f32], (m, n, k): (usize, usize, usize)) -> (Vec<f64>, Vec<f64>) {
    let mut want = vec![0.0; m * n];
    let mut scale = vec![0.0; m * n];
    for r in 0..m {
        for c in 0..n {
            for i in 0..k {
                let p = a[r * k + i] as f64 * b[i * n + c] as f64;
                want[r * n + c] += p;
                scale[r * n + c] += p.abs();
            }
        }
    }
    (want, scale)
}

/// `(m, n, k)`: 1x1x1, 7x31x33 and 33x65x17 as `m x k x n`; each leaves ragged tile edges.
const MATMUL_SHAPES: [(usize, usize, usize); 3] = [(1, 1, 1), (7, 33, 31), (33, 17, 65)];

#[test]
fn matmul_naive_matches_f64() {
    for (s, shape @ (m, n, k)) in MATMUL_SHAPES.into_iter().enumerate() {
        let (a, b) = (random(10 + s as u64, m * k), random(20 + s as u64, k * n));
        let c = run_matmul(
            "matmul_naive",
            matmul::matmul_naive,
            naive_config(m, n),
            (&a, &b),
            shape,
        );
        let (want, scale) = matmul_f64(&a, &b, shape);
        assert_close(
            &format!("matmul_naive {m}x{k}x{n}"),
            &c.unwrap(),
            &want,
            &scale,
            1e-5,
        );
    }
}

#[test]
fn matmul_tiled_matches_f64() {
    for (s, shape @ (m, n, k)) in MATMUL_SHAPES.into_iter().enumerate() {
        let (a, b) = (random(10 + s as u64, m * k), random(20 + s as u64, k * n));
        let c = run_matmul(
            "matmul_tiled",
            matmul::matmul_tiled,
            tiled_config(m, n),
            (&a, &b),
            shape,
        );
        let (want, scale) = matmul_f64(&a, &b, shape);
        assert_close(
            &format!("matmul_tiled {m}x{k}x{n}"),
            &c.unwrap(),
            &want,
            &scale,
            1e-5,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. The register-tiled and wide kernels, and split k
// ---------------------------------------------------------------------------------------------

/// A fast kernel's signature: `(a, b, c, m, n, k, k_split)`.
type FastKernel = unsafe fn(*const f32, *const f32, *mut f32, usize, usize, usize, usize);

/// `(m, k, n)`: `A` is `m x k`, `B` is `k x n`.
type Shape = (usize, usize, usize);

/// The inputs of one run, and its result `C`.
#[derive(Debug)]
struct Product {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
}

/// `n` pseudo-random floats in [-1, 1), in 16-byte aligned storage (so that the `_vec4` kernels
/// may read them), plus `extra` trailing floats.
fn random_aligned(seed: u64, n: usize, extra: usize) -> Vec<F4> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = vec![F4::ZERO; (n + extra).div_ceil(4)];
    for (i, x) in out.iter_mut().flat_map(|v| v.0.iter_mut()).enumerate().take(n) {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *x = ((state >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * if i % 3 == 0 { -1.0 } else { 1.0 };
    }
    out
}

/// The documented launch of a fast kernel: `(ceil(n/BN) * slices, ceil(m/BM))` blocks.
fn fast_config(t: FastTiling, m: usize, n: usize, slices: usize) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(
            (n.div_ceil(t.block_cols) * slices) as u32,
            m.div_ceil(t.block_rows) as u32,
            1,
        ),
        block: Dim3::new(t.threads(), 1, 1),
        shared_mem_bytes: t.shared_bytes(),
    }
}

/// Runs `kernel` for `C = A * B` (`m x k` times `k x n`) in `slices` slices of `k_split`, adding
/// the slices with `matmul_sum_splits`; `b_offset` shifts `B` by that many floats.
#[allow(clippy::too_many_arguments)]
fn run(
    name: &'static str,
    kernel: FastKernel,
    t: FastTiling,
    (m, k, n): Shape,
    k_split: usize,
    b_offset: usize,
) -> Result<Product, SimError> {
    let slices = k.div_ceil(k_split).max(1);
    let (a, b) = (
        random_aligned(1, m * k, 0),
        random_aligned(2, k * n + b_offset, 0),
    );
    let mut partial = vec![F4([f32::NAN; 4]); (slices * m * n).div_ceil(4)];
    let mut launch = Launch::new(name, fast_config(t, m, n, slices));
    let pa = launch.input("a", &a).cast::<f32>();
    let pb = launch.input("b", &b).cast::<f32>().wrapping_add(b_offset);
    let pc = launch.output("c", &mut partial).cast::<f32>();
    // SAFETY: the buffers hold m*k, k*n (after the offset) and slices*m*n floats.
    unsafe { launch.run(|| kernel(pa, pb, pc, m, n, k, k_split)) }?;
    let partial = floats(&partial);
    let mut c = vec![f32::NAN; m * n];
    let sum = LaunchConfig {
        grid: Dim3::new(((m * n) as u32).div_ceil(matmul::SUM_BLOCK), 1, 1),
        block: Dim3::new(matmul::SUM_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = Launch::new("matmul_sum_splits", sum);
    let (pp, pc) = (launch.input("partial", &partial), launch.output("c", &mut c));
    // SAFETY: `partial` holds slices*m*n floats, `c` holds m*n.
    unsafe { launch.run(|| matmul::matmul_sum_splits(pp, pc, m * n, slices)) }?;
    let (a, b) = (floats(&a), floats(&b)[b_offset..].to_vec());
    Ok(Product { a, b, c })
}

/// Checks `c` against `A * B` in f64, each element to `1e-5` of `sum_i |A[r][i] B[i][c]|`.
#[track_caller]
fn assert_product(what: &str, Product { a, b, c }: Product, (m, k, n): Shape) {
    for r in 0..m {
        for col in 0..n {
            let (mut want, mut scale) = (0.0f64, 0.0f64);
            for i in 0..k {
                let p = a[r * k + i] as f64 * b[i * n + col] as f64;
                want += p;
                scale += p.abs();
            }
            let got = c[r * n + col] as f64;
            assert!(
                (got - want).abs() <= 1e-5 * scale,
                "{what}: C[{r}][{col}] = {got}, want {want}"
            );
        }
    }
}

#[test]
fn fast_kernels_match_f64() {
    let cases: [(&'static str, FastKernel, FastTiling, Shape, usize); 10] = [
        (
            "matmul_fast_128x128_vec4",
            fast!(FAST_128, true),
            FAST_128,
            (130, 20, 132),
            16,
        ),
        // Four tiles of 16 along k in one slice, the last one partial.
        (
            "matmul_fast_128x128_vec4",
            fast!(FAST_128, true),
            FAST_128,
            (129, 52, 136),
            64,
        ),
        (
            "matmul_fast_128x128",
            fast!(matmul::FAST_128_SCALAR, false),
            FAST_128,
            (9, 19, 131),
            8,
        ),
        (
            "matmul_fast_64x64_vec4",
            fast!(FAST_64, true),
            FAST_64,
            (66, 40, 8),
            16,
        ),
        (
            "matmul_fast_64x64",
            fast!(FAST_64, false),
            FAST_64,
            (65, 33, 7),
            48,
        ),
        ("matmul_fast_64x64", fast!(FAST_64, false), FAST_64, (1, 1, 1), 16),
        // The cp.async pipeline: more tiles than stages, ragged rows, columns and k.
        (
            "matmul_fast_128x256_vec4",
            matmul::wide_gemm::<true>,
            FAST_WIDE,
            (131, 44, 264),
            48,
        ),
        (
            "matmul_fast_128x256",
            matmul::wide_gemm::<false>,
            FAST_WIDE,
            (7, 37, 259),
            40,
        ),
        // Split k: three slices of 16, the last one short.
        (
            "matmul_fast_128x256_vec4",
            matmul::wide_gemm::<true>,
            FAST_WIDE,
            (5, 36, 12),
            16,
        ),
        (
            "matmul_fast_128x256",
            matmul::wide_gemm::<false>,
            FAST_WIDE,
            (1, 1, 1),
            8,
        ),
    ];
    for (name, kernel, tiling, shape, k_split) in cases {
        let what = format!("{name} {shape:?} k_split {k_split}");
        let result = run(name, kernel, tiling, shape, k_split, 0).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_product(&what, result, shape);
    }
}

#[test]
fn vec4_kernel_reports_a_misaligned_matrix() {
    let err = run(
        "matmul_fast_64x64_vec4",
        fast!(FAST_64, true),
        FAST_64,
        (4, 4, 4),
        16,
        1,
    )
    .expect_err("a B that starts 4 bytes past a 16-byte boundary must be reported");
    assert!(
        matches!(&err.violation, Violation::Panic { message } if message.contains("misaligned 16-byte read")),
        "{err}"
    );
    // The scalar kernel takes the same misaligned matrix.
    let shape = (4, 4, 4);
    let ok = run("matmul_fast_64x64", fast!(FAST_64, false), FAST_64, shape, 16, 1).unwrap();
    assert_product("matmul_fast_64x64 with B misaligned", ok, shape);
}
