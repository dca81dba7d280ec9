//! The TF32 tensor-core matmul kernels launched directly through the simulator, with the launch
//! their doc comments give, against an f64 product and the TF32 error bound: each kernel on
//! ragged shapes (past the block tile in `m`, `n` and `k`), and a 16-byte kernel handed a
//! misaligned matrix (caught). Small on purpose: every MMA is 32 warp shuffles here.
//!
//! The worst-case bound alone would accept a kernel that drops a `k` term or rounds its operands
//! to fewer bits; the statistical criterion that rejects those (the RMS error within a small
//! factor of what TF32 rounding predicts, with planted wrong kernels shown to fail it) is
//! `tf32_statistical_violation` in the host suite (`tests/common/mod.rs`), which every TF32 trial
//! of `tests/kernels/matmul.rs` applies to every tiling, in the simulator and on CUDA. Here the bound
//! checks the kernels in isolation, and `trunc_kernels_truncate_and_the_others_round` tells
//! rounding from truncation exactly.

mod common;

use common::floats;
use kernels_gpu::gpu::vector::F4;
use kernels_gpu::matmul::tf32::{self as t, Tf32Tiling, TF32_128X128, TF32_128X128_K16, TF32_128X256};
use kernels_gpu::sim::{Dim3, Launch, LaunchConfig, SimError, Violation};

/// [`t::tf32_gemm`](fn@t::tf32_gemm) with tiling `$t`, 16-byte copies or not, rounding or not:
/// the instance behind an entry (`tf32!(TF32_128X256, true, false)` is
/// `matmul_tf32_128x256_vec4_trunc`).
macro_rules! tf32 {
    ($t:expr, $vec:expr, $round:expr) => {
        t::tf32_gemm::<
            { $t.block_rows },
            { $t.block_cols },
            { $t.block_k },
            { $t.warp_rows / t::MMA_M },
            { $t.warp_cols / t::MMA_N },
            { $t.stages },
            $vec,
            $round,
        >
    };
}

/// A TF32 kernel's signature: `(a, b, c, m, n, k)`.
type Tf32Kernel = unsafe fn(*const f32, *const f32, *mut f32, usize, usize, usize);

/// `(m, k, n)`: `A` is `m x k`, `B` is `k x n`.
type Shape = (usize, usize, usize);

/// `n` pseudo-random floats in [-1, 1), in 16-byte aligned storage.
fn random_aligned(seed: u64, n: usize) -> Vec<F4> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = vec![F4::ZERO; n.div_ceil(4)];
    for x in out.iter_mut().flat_map(|v| v.0.iter_mut()).take(n) {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *x = (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
    }
    out
}

/// Runs `kernel` on random `A`, `B` (shifted by `b_offset` floats) with the documented launch;
/// returns `A`, `B` and `C`.
fn run(
    name: &'static str,
    kernel: Tf32Kernel,
    tiling: Tf32Tiling,
    (m, k, n): Shape,
    b_offset: usize,
) -> Result<[Vec<f32>; 3], SimError> {
    let (a, b) = (random_aligned(1, m * k), random_aligned(2, k * n + b_offset));
    let mut c = vec![F4([f32::NAN; 4]); (m * n).div_ceil(4)];
    let config = LaunchConfig {
        grid: Dim3::new(
            n.div_ceil(tiling.block_cols) as u32,
            m.div_ceil(tiling.block_rows) as u32,
            1,
        ),
        block: Dim3::new(tiling.threads(), 1, 1),
        shared_mem_bytes: tiling.shared_bytes(),
    };
    let mut launch = Launch::new(name, config);
    let pa = launch.input("a", &a).cast::<f32>();
    let pb = launch.input("b", &b).cast::<f32>().wrapping_add(b_offset);
    let pc = launch.output("c", &mut c).cast::<f32>();
    // SAFETY: the buffers hold m*k, k*n (after the offset) and m*n floats.
    unsafe { launch.run(|| kernel(pa, pb, pc, m, n, k)) }?;
    Ok([floats(&a), floats(&b)[b_offset..].to_vec(), floats(&c)])
}

/// Unit roundoff of the rounding kernels (TF32 to nearest).
const ROUNDED: f64 = 1.0 / 2048.0;
/// Unit roundoff of the `_trunc` kernels (the tensor core truncates f32 to TF32).
const TRUNCATED: f64 = 1.0 / 1024.0;

/// Checks `C` against `A * B` in f64, each element within the TF32 bound
/// `(2u + u^2 + γ_k (1 + u)^2) * sum_i |A[r][i] B[i][c]|` (`u` as given, `δ = 2^-23`).
#[track_caller]
fn assert_product(what: &str, [a, b, c]: [Vec<f32>; 3], (m, k, n): Shape, u: f64) {
    let kd = k as f64 * f64::powi(2.0, -23);
    let factor = 2.0 * u + u * u + kd / (1.0 - kd) * (1.0 + u) * (1.0 + u);
    for r in 0..m {
        for col in 0..n {
            let (mut want, mut scale) = (0.0f64, 0.0f64);
            for i in 0..k {
                let p = f64::from(a[r * k + i]) * f64::from(b[i * n + col]);
                want += p;
                scale += p.abs();
            }
            let got = f64::from(c[r * n + col]);
            assert!(
                (got - want).abs() <= factor * scale,
                "{what}: C[{r}][{col}] = {got}, want {want} (bound {:e})",
                factor * scale
            );
        }
    }
}

#[test]
fn tf32_kernels_match_f64_within_the_bound() {
    let cases: [(&'static str, Tf32Kernel, Tf32Tiling, Shape); 12] = [
        (
            "matmul_tf32_128x128_k16",
            tf32!(TF32_128X128_K16, false, true),
            TF32_128X128_K16,
            (17, 65, 33),
        ),
        (
            "matmul_tf32_128x128_k16",
            tf32!(TF32_128X128_K16, false, true),
            TF32_128X128_K16,
            (130, 17, 129),
        ),
        (
            "matmul_tf32_128x128_k16",
            tf32!(TF32_128X128_K16, false, true),
            TF32_128X128_K16,
            (1, 1, 1),
        ),
        (
            "matmul_tf32_128x128",
            tf32!(TF32_128X128, false, true),
            TF32_128X128,
            (17, 65, 33),
        ),
        (
            "matmul_tf32_128x128",
            tf32!(TF32_128X128, false, true),
            TF32_128X128,
            (1, 1, 1),
        ),
        (
            "matmul_tf32_128x256_vec4",
            tf32!(TF32_128X256, true, true),
            TF32_128X256,
            (20, 100, 260),
        ),
        (
            "matmul_tf32_128x256",
            tf32!(TF32_128X256, false, true),
            TF32_128X256,
            (129, 7, 3),
        ),
        (
            "matmul_tf32_128x256",
            tf32!(TF32_128X256, false, true),
            TF32_128X256,
            (3, 0, 5),
        ),
        (
            "matmul_tf32_128x128_vec4_trunc",
            tf32!(TF32_128X128, true, false),
            TF32_128X128,
            (130, 36, 136),
        ),
        (
            "matmul_tf32_128x128_trunc",
            tf32!(TF32_128X128, false, false),
            TF32_128X128,
            (17, 65, 33),
        ),
        (
            "matmul_tf32_128x256_vec4_trunc",
            tf32!(TF32_128X256, true, false),
            TF32_128X256,
            (20, 100, 260),
        ),
        (
            "matmul_tf32_128x256_trunc",
            tf32!(TF32_128X256, false, false),
            TF32_128X256,
            (129, 7, 3),
        ),
    ];
    for (name, kernel, tiling, shape) in cases {
        let what = format!("{name} {shape:?}");
        let result = run(name, kernel, tiling, shape, 0).unwrap_or_else(|e| panic!("{what}: {e}"));
        let u = if name.ends_with("_trunc") {
            TRUNCATED
        } else {
            ROUNDED
        };
        assert_product(&what, result, shape, u);
    }
}

/// The `_trunc` kernels truncate: with every operand halfway between two TF32 values (low 13
/// bits `0x1000`), rounding to nearest (ties away from zero) and truncation differ by one TF32
/// unit on every operand. With `A` and `B` all `1 + 2^-11` (bits `0x3f80_1000`), a rounding
/// kernel multiplies `(1 + 2^-10)^2` and a truncating one `1 * 1`; each element of `C` is then
/// exactly `k (1 + 2^-10)^2` or `k`. Tells the two kinds apart, which the bounds alone cannot.
#[test]
fn trunc_kernels_truncate_and_the_others_round() {
    let (m, k, n): Shape = (5, 12, 8);
    let half = f32::from_bits(0x3f80_1000);
    let cases: [(&'static str, Tf32Kernel, Tf32Tiling, f32); 4] = [
        (
            "matmul_tf32_128x128",
            tf32!(TF32_128X128, false, true),
            TF32_128X128,
            {
                let r = 1.0 + 1.0 / 1024.0;
                12.0 * r * r
            },
        ),
        (
            "matmul_tf32_128x256",
            tf32!(TF32_128X256, false, true),
            TF32_128X256,
            {
                let r = 1.0 + 1.0 / 1024.0;
                12.0 * r * r
            },
        ),
        (
            "matmul_tf32_128x128_vec4_trunc",
            tf32!(TF32_128X128, true, false),
            TF32_128X128,
            12.0,
        ),
        (
            "matmul_tf32_128x256_trunc",
            tf32!(TF32_128X256, false, false),
            TF32_128X256,
            12.0,
        ),
    ];
    for (name, kernel, tiling, want) in cases {
        let a = vec![F4([half; 4]); (m * k).div_ceil(4)];
        let b = vec![F4([half; 4]); (k * n).div_ceil(4)];
        let mut c = vec![F4([f32::NAN; 4]); (m * n).div_ceil(4)];
        let config = LaunchConfig {
            grid: Dim3::new(
                n.div_ceil(tiling.block_cols) as u32,
                m.div_ceil(tiling.block_rows) as u32,
                1,
            ),
            block: Dim3::new(tiling.threads(), 1, 1),
            shared_mem_bytes: tiling.shared_bytes(),
        };
        let mut launch = Launch::new(name, config);
        let pa = launch.input("a", &a).cast::<f32>();
        let pb = launch.input("b", &b).cast::<f32>();
        let pc = launch.output("c", &mut c).cast::<f32>();
        // SAFETY: the buffers hold m*k, k*n and m*n floats (and are 16-byte aligned).
        unsafe { launch.run(|| kernel(pa, pb, pc, m, n, k)) }.unwrap_or_else(|e| panic!("{name}: {e}"));
        for (i, &got) in floats(&c)[..m * n].iter().enumerate() {
            assert_eq!(got, want, "{name}: C element {i}");
        }
    }
}

#[test]
fn vec4_kernel_reports_a_misaligned_matrix() {
    let shape = (4, 8, 4);
    let err = run(
        "matmul_tf32_128x256_vec4",
        tf32!(TF32_128X256, true, true),
        TF32_128X256,
        shape,
        1,
    )
    .expect_err("a B that starts 4 bytes past a 16-byte boundary must be reported");
    assert!(
        matches!(&err.violation, Violation::Panic { message } if message.contains("misaligned 16-byte cp.async")),
        "{err}"
    );
    // The 4-byte kernel takes the same misaligned matrix.
    let ok = run(
        "matmul_tf32_128x128",
        tf32!(TF32_128X128, false, true),
        TF32_128X128,
        shape,
        1,
    )
    .unwrap();
    assert_product("matmul_tf32_128x128 with B misaligned", ok, shape, ROUNDED);
}
