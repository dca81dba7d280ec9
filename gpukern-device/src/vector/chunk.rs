//! [`Chunk`]: `N` consecutive elements of a 1-D array that one thread handles as one vector, and
//! the accesses that keep it a vector where it is whole and fall back to single elements at the
//! array's ragged end.

use super::access::{load_hinted, store_hinted};
use super::hint::{LoadHint, StoreHint};
use super::lane::Lane;
use crate::mem;

/// Elements `start..start + len` of an array, `len <= N`: the lanes of one vector. Every chunk of
/// an array of `n` elements is whole (`len == N`) but possibly the last, which holds the
/// `n % N` elements of the ragged end.
///
/// A chunk's accesses ([`Chunk::load`], [`Chunk::store`], [`Chunk::load_columns`]) are one vector
/// access per 16 bytes when the chunk is whole, single-element accesses of its `len` lanes when
/// it is not; `start` is always a multiple of `N`, so a whole chunk of a 16-byte aligned buffer
/// is aligned for its vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk<const N: usize> {
    /// The index of lane 0 in the array: a multiple of `N`.
    pub start: usize,
    /// The lanes inside the array: `N`, or fewer for the last chunk.
    pub len: usize,
}

impl<const N: usize> Chunk<N> {
    /// Chunk `k` of an array of `n` elements (`k * N < n`).
    #[inline(always)]
    pub fn of(k: usize, n: usize) -> Chunk<N> {
        let start = k * N;
        Chunk {
            start,
            len: (n - start).min(N),
        }
    }

    /// Whether all `N` lanes are inside the array.
    #[inline(always)]
    pub fn is_whole(self) -> bool {
        self.len == N
    }

    /// `p[start..start + N]`, lanes past the array `T::ZERO`: one vector access per 16 bytes
    /// with `hint` when the chunk is whole, `len` single loads otherwise.
    ///
    /// # Safety
    /// `p` holds the array (at least `start + len` elements) in global memory, 16-byte aligned
    /// (or aligned to the vector's bytes, if fewer); `N * size_of::<T>()` is 4, 8, 16, 32 or 64;
    /// the contract of `hint` ([`LoadHint`]).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load<T: Lane>(self, p: *const T, hint: LoadHint) -> [T; N] {
        if self.is_whole() {
            // SAFETY: `N` elements from a multiple of `N` of an aligned buffer (the contract).
            unsafe { load_hinted(p, self.start, hint) }
        } else {
            // A loop of constant length (over all `N` lanes) keeps the lanes in registers.
            core::array::from_fn(|k| {
                if k < self.len {
                    // SAFETY: `start + k < start + len`, inside the array.
                    unsafe { mem::load(p, self.start + k) }
                } else {
                    T::ZERO
                }
            })
        }
    }

    /// Writes the chunk's `len` lanes of `v` to `p[start..]`: one vector access per 16 bytes
    /// with `hint` when the chunk is whole, `len` single stores otherwise (lanes past the array
    /// are dropped).
    ///
    /// # Safety
    /// `p` holds the array (at least `start + len` writable elements) in global memory, aligned
    /// as for [`Chunk::load`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn store<T: Lane>(self, p: *mut T, v: [T; N], hint: StoreHint) {
        if self.is_whole() {
            // SAFETY: as for `load`.
            unsafe { store_hinted(p, self.start, v, hint) }
        } else {
            for (k, &lane) in v.iter().enumerate() {
                if k < self.len {
                    // SAFETY: `start + k < start + len`, inside the array.
                    unsafe { mem::store(p, self.start + k, lane) };
                }
            }
        }
    }

    /// The column of lane 0 when the array is a row-major matrix of `cols` columns:
    /// `start % cols`, in 32-bit arithmetic where the index fits (a 64-bit division is several
    /// times dearer on the GPU).
    #[inline(always)]
    pub fn column(self, cols: usize) -> usize {
        if self.start <= u32::MAX as usize && cols <= u32::MAX as usize {
            (self.start as u32 % cols as u32) as usize
        } else {
            self.start % cols
        }
    }

    /// The lanes' entries of a per-column vector `p` of a row-major matrix of `cols` columns:
    /// lane `k` gets `p[(start + k) % cols]` (a bias or a scale broadcast down the rows), lanes
    /// past the array `T::ZERO`. One vector access per 16 bytes through the read-only path when
    /// `cols` is a multiple of `N` (the lanes then sit in one row, at a column that is a
    /// multiple of `N`), single plain loads otherwise.
    ///
    /// # Safety
    /// `p` holds `cols >= 1` elements of global memory that no thread writes during the kernel,
    /// 16-byte aligned; `N * size_of::<T>()` is 4, 8, 16, 32 or 64.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn load_columns<T: Lane>(self, p: *const T, cols: usize) -> [T; N] {
        let c = self.column(cols);
        if self.is_whole() && cols.is_multiple_of(N) {
            // SAFETY: `c` is a multiple of `N` and `c + N <= cols`: `N` elements of an aligned
            // buffer at a multiple of `N`.
            unsafe { load_hinted(p, c, LoadHint::ReadOnly) }
        } else {
            let mut col = c;
            core::array::from_fn(|k| {
                if k >= self.len {
                    return T::ZERO;
                }
                // SAFETY: `col < cols` elements of `p`.
                let v = unsafe { mem::load(p, col) };
                col = if col + 1 == cols { 0 } else { col + 1 };
                v
            })
        }
    }
}
