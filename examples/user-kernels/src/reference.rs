//! The CPU references of the user kernels, in f64 where the kernels compute in f32, and the error
//! measures the checks and the benchmark apply.

use gpukern::bf16;

/// GELU, tanh form, in f64.
pub fn gelu(t: f64) -> f64 {
    let u = (2.0 / std::f64::consts::PI).sqrt() * (t + 0.044_715 * t * t * t);
    0.5 * t * (1.0 + u.tanh())
}

/// `gelu(x + bias[col])` over a `rows x cols` matrix, in f64.
pub fn bias_gelu(x: &[bf16], bias: &[f32], cols: usize) -> Vec<f64> {
    x.iter()
        .enumerate()
        .map(|(i, v)| gelu(f64::from(v.to_f32()) + f64::from(bias[i % cols])))
        .collect()
}

/// One Jacobi step in f64: the mean of the four neighbours inside, the input on the boundary.
pub fn stencil(x: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let at = |r: usize, c: usize| f64::from(x[r * cols + c]);
    (0..rows * cols)
        .map(|i| {
            let (r, c) = (i / cols, i % cols);
            if r == 0 || c == 0 || r + 1 == rows || c + 1 == cols {
                at(r, c)
            } else {
                0.25 * (at(r - 1, c) + at(r + 1, c) + at(r, c - 1) + at(r, c + 1))
            }
        })
        .collect()
}

/// A vertical mean in f64 (the tests' planted run): `(x[r-1][c] + x[r+1][c]) / 2` inside, the
/// input on the first and last rows.
pub fn column_mean(x: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    let at = |r: usize, c: usize| f64::from(x[r * cols + c]);
    (0..rows * cols)
        .map(|i| {
            let (r, c) = (i / cols, i % cols);
            if r == 0 || r + 1 == rows {
                at(r, c)
            } else {
                0.5 * (at(r - 1, c) + at(r + 1, c))
            }
        })
        .collect()
}

/// The 256-bin histogram of `data`.
pub fn histogram(data: &[u8]) -> Vec<u32> {
    let mut counts = vec![0u32; 256];
    for &b in data {
        counts[b as usize] += 1;
    }
    counts
}

/// The relative error norm `|got - want| / |want|` (2-norms; the absolute norm where `want` is 0).
pub fn rel_err(got: impl Iterator<Item = f64>, want: &[f64]) -> f64 {
    let (mut diff, mut norm) = (0.0, 0.0);
    for (g, w) in got.zip(want) {
        diff += (g - w) * (g - w);
        norm += w * w;
    }
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

/// The largest `|got - want| / (atol + rtol |want|)`: at most 1 where every element is within
/// its tolerance. Equal values count 0 (the same infinity, as a row that sees no key gives, or NaN
/// where the reference is NaN); a NaN or an infinity anywhere else counts as infinitely far (a NaN
/// once made this ratio NaN, which `f64::max` then dropped).
pub fn worst_ratio(got: impl Iterator<Item = f64>, want: &[f64], atol: f64, rtol: f64) -> f64 {
    got.zip(want)
        .map(|(g, &w)| {
            if g == w || (g.is_nan() && w.is_nan()) {
                0.0
            } else if g.is_finite() && w.is_finite() {
                (g - w).abs() / (atol + rtol * w.abs())
            } else {
                f64::INFINITY
            }
        })
        .fold(0.0, f64::max)
}

/// Tolerances of the bf16 GELU: one bf16 rounding (`2^-8` relative at most) plus `tanh.approx`'s
/// error (below `2^-10.987` of `tanh`, times `t / 2`: absolute, for the inputs here).
pub const GELU_TOL: (f64, f64) = (2e-3, 1.0 / 128.0);

/// Tolerances of the f32 stencil: four additions and a multiplication in f32.
pub const STENCIL_TOL: (f64, f64) = (1e-6, 1e-6);

/// `gelu(A B + bias)` in f64: `A` `m x k`, `B` `k x n` (row-major bf16), `bias` `n`.
pub fn gemm_bias_gelu(a: &[bf16], b: &[bf16], bias: &[f32], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
    let a: Vec<f64> = a.iter().map(|v| f64::from(v.to_f32())).collect();
    let b: Vec<f64> = b.iter().map(|v| f64::from(v.to_f32())).collect();
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        let row = &mut out[i * n..(i + 1) * n];
        for p in 0..k {
            let x = a[i * k + p];
            for (o, y) in row.iter_mut().zip(&b[p * n..(p + 1) * n]) {
                *o += x * y;
            }
        }
        for (o, &c) in row.iter_mut().zip(bias) {
            *o = gelu(*o + f64::from(c));
        }
    }
    out
}

/// [`gemm_bias_gelu`] at the elements `at` only (`(row, col)` pairs): the check of products too
/// large for the whole reference on the CPU.
pub fn gemm_bias_gelu_at(
    a: &[bf16],
    b: &[bf16],
    bias: &[f32],
    (_m, n, k): (usize, usize, usize),
    at: &[(usize, usize)],
) -> Vec<f64> {
    at.iter()
        .map(|&(i, j)| {
            let dot: f64 = (0..k)
                .map(|p| f64::from(a[i * k + p].to_f32()) * f64::from(b[p * n + j].to_f32()))
                .sum();
            gelu(dot + f64::from(bias[j]))
        })
        .collect()
}

/// Where a large product is checked: every element of the first and last rows and columns
/// (the edges of the tiles there), and `samples` pseudo-random elements.
pub fn gemm_check_points((m, n): (usize, usize), samples: usize) -> Vec<(usize, usize)> {
    let mut points: Vec<(usize, usize)> = Vec::new();
    for j in 0..n {
        points.push((0, j));
        points.push((m - 1, j));
    }
    for i in 0..m {
        points.push((i, 0));
        points.push((i, n - 1));
    }
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..samples {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        points.push(((s % m as u64) as usize, ((s >> 32) % n as u64) as usize));
    }
    points
}

/// The inputs of the GEMM checks: `A` in [-1, 1], `B` in [-1, 1] / sqrt(k) (sums of order 1,
/// where GELU bends), `bias` in [-0.5, 0.5]; from the stream `r`.
pub fn gemm_inputs(
    r: &mut impl FnMut() -> u64,
    (m, n, k): (usize, usize, usize),
) -> (Vec<bf16>, Vec<bf16>, Vec<f32>) {
    let mut unit = || (r() % 2001) as f32 / 1000.0 - 1.0;
    let scale = 1.0 / (k as f32).sqrt();
    let a = (0..m * k).map(|_| bf16::from_f32(unit())).collect();
    let b = (0..k * n).map(|_| bf16::from_f32(unit() * scale)).collect();
    let bias = (0..n).map(|_| unit() / 2.0).collect();
    (a, b, bias)
}

/// Tolerances of the bf16 GEMM + GELU for sums of order 1 (the inputs the checks draw): the
/// GELU's ([`GELU_TOL`]) plus the f32 accumulation's, well below them for `k` up to 8192.
pub const GEMM_TOL: (f64, f64) = (4e-3, 1.0 / 128.0);

/// The prefix-LM mask written out apart from the kernels' (`fast_kernels::PrefixLm`): row `q`
/// (at position `q + kv_len - q_len` among the keys) sees key `kv` if `kv < prefix` or
/// `kv <= position`.
pub fn prefix_lm_keeps(prefix: usize, q_len: usize, kv_len: usize, q: usize, kv: usize) -> bool {
    let position = q as i64 + kv_len as i64 - q_len as i64;
    kv < prefix || (kv as i64) <= position
}
