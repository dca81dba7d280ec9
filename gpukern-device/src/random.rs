//! Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as
//! easy as 1, 2, 3", SC 2011; the generator behind cuRAND's `Philox4_32_10` and PyTorch's CUDA
//! generator). A draw is a pure function of a 128-bit counter and a 64-bit key, so every thread
//! of a launch draws its own numbers without state, and the same counter and key give the same
//! numbers on the GPU, in the simulator and on the host.

/// The first round multiplier.
const M0: u32 = 0xD251_1F53;
/// The second round multiplier.
const M1: u32 = 0xCD9E_8D57;
/// The first key increment (the golden ratio's fraction).
const W0: u32 = 0x9E37_79B9;
/// The second key increment (`sqrt(3) - 1`'s fraction).
const W1: u32 = 0xBB67_AE85;

/// The high and low words of `a * b`.
#[inline(always)]
fn mul_hi_lo(a: u32, b: u32) -> (u32, u32) {
    let p = u64::from(a) * u64::from(b);
    ((p >> 32) as u32, p as u32)
}

/// One Philox round of `counter` under `key`.
#[inline(always)]
fn round([c0, c1, c2, c3]: [u32; 4], [k0, k1]: [u32; 2]) -> [u32; 4] {
    let (hi0, lo0) = mul_hi_lo(M0, c0);
    let (hi1, lo1) = mul_hi_lo(M1, c2);
    [hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0]
}

/// Philox4x32-10: four random 32-bit words for `counter` under `key` (ten rounds, the key bumped
/// by the Weyl increments between them). Equal to Random123's `philox4x32` with `R = 10` (its
/// known-answer vectors are the tests).
#[inline(always)]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for r in 0..10 {
        if r > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        c = round(c, k);
    }
    c
}

/// A uniform float in `[0, 1)` from the top 24 bits of `word`: `(word >> 8) * 2^-24`, exact
/// (every value a multiple of `2^-24`), never 1.
#[inline(always)]
pub fn unit_f32(word: u32) -> f32 {
    (word >> 8) as f32 * (1.0 / 16_777_216.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's known answers for philox4x32 with 10 rounds (its `kat_vectors`).
    #[test]
    fn philox_matches_the_known_answers() {
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn unit_floats_stay_below_one() {
        assert_eq!(unit_f32(0), 0.0);
        assert_eq!(unit_f32(u32::MAX), 1.0 - 1.0 / 16_777_216.0);
        assert_eq!(unit_f32(0x8000_0000), 0.5);
    }
}
