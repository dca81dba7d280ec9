//! The error bound of the TF32 kernels: what `MatmulAlgorithm::Tf32` promises, per element.

/// Unit roundoff of TF32 with rounding to nearest: half of the `2^-10` spacing of its 10-bit
/// significand.
pub const TF32_UNIT_ROUNDOFF: f64 = 1.0 / 2048.0;

/// Unit roundoff of TF32 when the tensor core truncates f32 operands (the low 13 bits dropped,
/// toward zero): the `2^-10` spacing of its 10-bit significand. The `u` of the truncating
/// kernels (`Tf32Tile::WideTruncated`, `Tf32Tile::SquareTruncated`).
pub const TF32_TRUNCATION_UNIT_ROUNDOFF: f64 = 1.0 / 1024.0;

/// The factor of the per-element error bound of `MatmulAlgorithm::Tf32` for an inner dimension
/// `k`: `|C_tf32(i,j) - C(i,j)| <= tf32_error_factor(k) * sum_l |A(i,l)| |B(l,j)|`.
///
/// Derivation: rounding gives `a' = a (1 + α)`, `b' = b (1 + β)` with `|α|, |β| <= u`, so each
/// product is off by at most `(2u + u^2) |a| |b|`; the exact products are then summed in f32,
/// `k` additions each with a relative error of at most `δ = 2^-23`, which adds at most
/// `γ_k * sum |a' b'| <= γ_k (1 + u)^2 sum |a| |b|` (Higham, *Accuracy and Stability of
/// Numerical Algorithms*, eq. 3.5, for any order of summation). Infinite for `k δ >= 1`.
pub fn tf32_error_factor(k: usize) -> f64 {
    error_factor(k, TF32_UNIT_ROUNDOFF)
}

/// `2u + u^2 + γ_k (1 + u)^2` (see [`tf32_error_factor`]) for operands rounded with unit
/// roundoff `u`.
pub(super) fn error_factor(k: usize, u: f64) -> f64 {
    let delta = f64::powi(2.0, -23);
    let kd = k as f64 * delta;
    if kd >= 1.0 {
        return f64::INFINITY;
    }
    let gamma = kd / (1.0 - kd);
    2.0 * u + u * u + gamma * (1.0 + u) * (1.0 + u)
}
