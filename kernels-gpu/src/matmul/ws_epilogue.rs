//! The epilogue of the warp-specialised kernels ([`super::wgmma_ws`]): a consumer thread's
//! accumulators of its `64 x N` part of a tile stored into `C`.

use super::half::GemmOutput;
use crate::gpu::warp;
use crate::gpu::wgmma::Accumulators;

/// Stores thread `t` (of its warpgroup)'s `N / 2` accumulators of the `64 x N` tile at `(row0,
/// col0)` into `C` (`m x n`), the elements inside it (`N` = `A::N`). Where `n` is a multiple of 8 (every row of
/// `C` starts 16-byte aligned), the four threads of a quad first trade pairs (three shuffles per
/// group of four pairs: a 4 x 4 transpose within the quad), so that each holds 8 consecutive
/// elements of one row and writes them as 16 bytes: a warp then writes whole 32-byte sectors
/// (64 bytes of each of 8 rows) instead of 16 bytes of each. Elsewhere pairs
/// ([`store_tile_pairs`]).
///
/// # Safety
/// `c` holds `m * n` elements, 16-byte aligned; every lane of the warp calls it (the shuffles).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
pub(super) unsafe fn store_tile<O: GemmOutput, A: Accumulators>(
    acc: &A,
    c: *mut O,
    (row0, col0): (usize, usize),
    m: usize,
    n: usize,
    t: usize,
) {
    if n % 8 != 0 {
        // SAFETY: forwarded contract.
        unsafe { store_tile_pairs(acc, c, (row0, col0), m, n, t) };
        return;
    }
    let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
    // Element `k` of four, picked by selects (a run-time index into a register array would put
    // it in local memory).
    let pick = |[a0, a1, a2, a3]: [[u32; 2]; 4], k: usize| -> [u32; 2] {
        let (odd, upper) = (k & 1 != 0, k & 2 != 0);
        core::array::from_fn(|h| {
            let low = if odd { a1[h] } else { a0[h] };
            let high = if odd { a3[h] } else { a2[h] };
            if upper {
                high
            } else {
                low
            }
        })
    };
    let shuffle = |v: [u32; 2], mask: u32| -> [u32; 2] {
        let lo = warp::shfl_xor_u32(v[0], mask);
        let hi = if O::PAIR_WORDS > 1 {
            warp::shfl_xor_u32(v[1], mask)
        } else {
            0
        };
        [lo, hi]
    };
    unroll_8!(2, |r| {
        let row = row0 + 16 * w + g + 8 * r;
        // Groups of 32 columns (four `j` of 8).
        unroll_8!(A::N / 32, |group| {
            // This thread's pairs of row `row` at columns `8 j + 2 q` for the four `j` of the
            // group.
            let mine: [[u32; 2]; 4] = core::array::from_fn(|jj| {
                let i = 4 * (4 * group + jj) + 2 * r;
                O::pack([acc[i], acc[i + 1]])
            });
            // `got[i]`: lane `q ^ i`'s pair for `j = 4 group + q` (each lane sends the pair the
            // receiving lane `q ^ i` needs).
            let got = [
                pick(mine, q),
                shuffle(pick(mine, q ^ 1), 1),
                shuffle(pick(mine, q ^ 2), 2),
                shuffle(pick(mine, q ^ 3), 3),
            ];
            // Lane `k`'s pair (columns `2k`, `2k + 1` of the 8) is `got[k ^ q]`.
            let octet: [[u32; 2]; 4] = core::array::from_fn(|k| pick(got, k ^ q));
            let col = col0 + 8 * (4 * group + q);
            if row < m && col < n {
                // SAFETY: `row < m`, `col < n` with `col` and `n` multiples of 8: the 8 elements
                // are inside the row, 16-byte aligned (`c` is).
                unsafe { O::store_octet(c, row * n + col, octet) };
            }
        });
    });
}

/// Stores thread `t` (of its warpgroup)'s `N / 2` accumulators of the `64 x N` tile at `(row0,
/// col0)` into `C` (`m x n`), the elements inside it: pairs where `n` is even, else one by one.
///
/// # Safety
/// `c` holds `m * n` elements, aligned to a pair when `n` is even.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
#[allow(clippy::manual_is_multiple_of)] // gpukern's minimum Rust (1.85) lacks is_multiple_of
unsafe fn store_tile_pairs<O: GemmOutput, A: Accumulators>(
    acc: &A,
    c: *mut O,
    (row0, col0): (usize, usize),
    m: usize,
    n: usize,
    t: usize,
) {
    let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
    let pairs = n % 2 == 0;
    unroll_8!(2, |r| {
        let row = row0 + 16 * w + g + 8 * r;
        if row < m {
            unroll_8!(A::N / 64, |j0| {
                unroll_8!(8, |j1| {
                    let j = 8 * j0 + j1;
                    let col = col0 + 8 * j + 2 * q;
                    let i = 4 * j + 2 * r;
                    if pairs && col < n {
                        // SAFETY: `row < m`, `col < n`, `n` and `col` even: both elements inside
                        // the row, aligned to a pair.
                        unsafe { O::store_pair(c, row * n + col, [acc[i], acc[i + 1]]) };
                    } else if !pairs {
                        if col < n {
                            // SAFETY: inside `C`.
                            unsafe { O::store(c, row * n + col, acc[i]) };
                        }
                        if col + 1 < n {
                            // SAFETY: inside `C`.
                            unsafe { O::store(c, row * n + col + 1, acc[i + 1]) };
                        }
                    }
                });
            });
        }
    });
}
