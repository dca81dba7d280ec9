//! Inputs and references: random data (fresh for every check), f64 CPU references spread over
//! the CPU's cores, and the number of buffer sets to rotate among.

use rand::{Rng, SeedableRng, rngs::StdRng};

/// The data the timed launches rotate over should exceed L2 (60 MB on an H200) twice over.
const ROTATE_BYTES: usize = 120 << 20;
/// At most this many copies of a small problem's buffers.
const MAX_SETS: usize = 16;
/// Work is split across threads only above this many elements.
const PARALLEL_MIN: usize = 1 << 20;

/// How many copies of its buffers a problem with this working set rotates among, so that the
/// timed launches read from DRAM, not from L2.
pub fn sets_for(working_set_bytes: usize) -> usize {
    if working_set_bytes == 0 {
        return 1;
    }
    ROTATE_BYTES.div_ceil(working_set_bytes).clamp(1, MAX_SETS)
}

/// Threads for CPU-side work.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `f(first_index, chunk)` over `out` split into contiguous chunks (multiples of `align`
/// elements), on all cores.
pub fn par_chunks(out: &mut [f32], align: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    let align = align.max(1);
    if out.len() < PARALLEL_MIN {
        f(0, out);
        return;
    }
    let per = out.len().div_ceil(threads()).div_ceil(align) * align;
    std::thread::scope(|s| {
        for (i, chunk) in out.chunks_mut(per).enumerate() {
            let f = &f;
            s.spawn(move || f(i * per, chunk));
        }
    });
}

/// `n` floats uniform in `[lo, hi)`, from a fresh seed.
pub fn random_vec(n: usize, lo: f32, hi: f32) -> Vec<f32> {
    let seed: u64 = rand::rng().random();
    let mut v = vec![0.0f32; n];
    par_chunks(&mut v, 1, |start, chunk| {
        let mut rng = StdRng::seed_from_u64(seed ^ (start as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for x in chunk {
            *x = lo + (hi - lo) * rng.random::<f32>();
        }
    });
    v
}

/// The f64 reference softmax of each row of a row-major `rows x cols` matrix
/// ([`gpukern::cpu::softmax`] row by row, rows spread over the cores).
pub fn softmax_reference(x: &[f32], cols: usize, t: f32) -> Vec<f32> {
    let mut y = vec![0.0f32; x.len()];
    par_chunks(&mut y, cols, |start, chunk| {
        for (r, out) in chunk.chunks_mut(cols).enumerate() {
            let row = &x[start + r * cols..][..cols];
            out.copy_from_slice(&gpukern::cpu::softmax(row, t));
        }
    });
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_exceeds_l2_and_is_capped() {
        assert_eq!(sets_for(12 << 20), 10);
        assert_eq!(sets_for(1 << 30), 1);
        assert_eq!(sets_for(1000), MAX_SETS);
    }

    #[test]
    fn random_inputs_fill_the_range_and_differ() {
        let n = PARALLEL_MIN * 3 + 7;
        let (a, b) = (random_vec(n, -2.0, 2.0), random_vec(n, -2.0, 2.0));
        assert_eq!(a.len(), n);
        assert!(a.iter().all(|v| (-2.0..2.0).contains(v)));
        assert!(a.iter().filter(|v| **v == 0.0).count() < 10);
        assert_ne!(a, b);
    }

    #[test]
    fn softmax_reference_matches_the_cpu_module() {
        let (rows, cols) = (PARALLEL_MIN / 64 + 3, 64);
        let x = random_vec(rows * cols, -5.0, 5.0);
        let view = ndarray::ArrayView2::from_shape((rows, cols), &x).unwrap();
        let want: Vec<f32> = gpukern::cpu::softmax_rows(&view, 0.5).iter().copied().collect();
        assert_eq!(softmax_reference(&x, cols, 0.5), want);
    }
}
