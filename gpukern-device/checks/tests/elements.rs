//! Element types beyond f32 in the simulator ([`gpukern_device_checks::elements`],
//! [`gpukern_device::convert`]), one module per concern:
//!
//! 1. `elements/conversions.rs`: the conversions on hand-worked edge cases (normal, subnormal,
//!    infinite, NaN, every kind of rounding tie, carries into the exponent, overflow to infinity)
//!    with the bits the GPU's `cvt.rn` gives written out, then exhaustively: every f16 and bf16
//!    widens exactly, narrows back to itself, and the midpoint between any two neighbours rounds
//!    to the even one.
//! 2. `elements/kernels.rs`: every kernel of the module against a CPU reference on ragged sizes
//!    with an extra block of idle threads, bit for bit (NaN for NaN), the tail past `n` untouched.
//! 3. `elements/planted.rs`: planted bugs: a misaligned f16x2 pair, an f32 and an f64 read at a
//!    misaligned address, and a u8 store one past the end, each reported with kernel, block,
//!    thread and index.
//!
//! This file holds the helpers they share. One test binary: the tests are plain `#[test]`s that
//! share no process-wide state, so separate binaries would do too, but one links once and keeps
//! the helpers in one place; `cargo test --test elements planted::` runs one concern.

#[path = "elements/conversions.rs"]
mod conversions;
#[path = "elements/kernels.rs"]
mod kernels;
#[path = "elements/planted.rs"]
mod planted;

use gpukern_device::sim::{Dim3, Launch, LaunchConfig};
use gpukern_device::{bf16, f16};

/// Threads per block in these launches (not a multiple of 32 on purpose: nothing here is warp
/// collective, and an odd block puts block edges at odd element indices).
const BLOCK: u32 = 96;

/// Enough blocks of [`BLOCK`] threads for `threads` threads, and one more whose threads all fall
/// past the end (the tail guard must hold them back).
fn config_for(threads: usize) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(threads.div_ceil(BLOCK as usize) as u32 + 1, 1, 1),
        block: Dim3::new(BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Ragged sizes: one element, less than a block, a block and one, several blocks and a bit.
const SIZES: [usize; 5] = [1, 31, 97, 1000, 4099];

/// Elements past `n` in every output, which no kernel may touch.
const TAIL: usize = 3;

/// `n` pseudo-random 64-bit words.
fn random_bits(seed: u64, n: usize) -> Vec<u64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            state ^ (state >> 29)
        })
        .collect()
}

/// `n` finite floats of every sign and a wide range of magnitudes (2^-30 to 2^20), all
/// significand bits in use, so that narrowing has something to round.
fn random_f32(seed: u64, n: usize) -> Vec<f32> {
    random_bits(seed, n)
        .into_iter()
        .map(|b| {
            let sign = (b >> 63) as u32;
            let exponent = 97 + (b >> 32) as u32 % 51;
            f32::from_bits((sign << 31) | (exponent << 23) | (b as u32 & 0x7f_ffff))
        })
        .collect()
}

/// Runs the one-input, one-output kernel `kernel(x, y, n)` over `x` (with `n = x.len()`) and
/// returns `y[..n]`, after checking that the launch passed and left `y`'s tail at `fill`.
fn run_map<T: Copy, U: Copy + PartialEq + std::fmt::Debug>(
    name: &'static str,
    kernel: unsafe fn(*const T, *mut U, usize),
    x: &[T],
    fill: U,
) -> Vec<U> {
    let n = x.len();
    let mut y = vec![fill; n + TAIL];
    let mut launch = Launch::new(name, config_for(n));
    let px = launch.input("x", x);
    let py = launch.output("y", &mut y);
    // SAFETY: `x` holds `n` elements and `y` more; the kernel touches elements below `n` only.
    let result = unsafe { launch.run(|| kernel(px, py, n)) };
    assert_eq!(result, Ok(()), "{name} at n = {n}");
    assert_eq!(y[n..], [fill; TAIL], "{name} at n = {n} wrote past the end");
    y.truncate(n);
    y
}

/// Whether two f16 are the same bits, or both NaN (the GPU's NaN is the canonical `0x7fff`,
/// the `half` crate's keeps the input's payload).
fn same_f16(a: f16, b: f16) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// [`same_f16`] for bf16.
fn same_bf16(a: bf16, b: bf16) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// [`same_f16`] for f32.
fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Two 16-bit elements, 4-byte aligned, so that a buffer of them starts where `load_f16x2`
/// may read.
#[repr(C, align(4))]
#[derive(Clone, Copy)]
struct Pair<T>([T; 2]);

/// `values` followed by `tail` copies of `fill`, in storage that starts 4-byte aligned.
fn aligned<T: Copy>(values: &[T], fill: T, tail: usize) -> Vec<Pair<T>> {
    let len = values.len() + tail;
    let mut pairs = vec![Pair([fill; 2]); len.div_ceil(2)];
    for (i, &v) in values.iter().enumerate() {
        pairs[i / 2].0[i % 2] = v;
    }
    pairs
}

/// The first `len` elements of `pairs`.
fn elements<T>(pairs: &[Pair<T>], len: usize) -> &[T] {
    assert!(len <= 2 * pairs.len());
    // SAFETY: `Pair<T>` is `repr(C)` over `[T; 2]`, and `T` (f16, bf16) is 2 bytes with align 2,
    // so there is no padding.
    unsafe { std::slice::from_raw_parts(pairs.as_ptr().cast::<T>(), len) }
}

/// [`elements`], writable.
fn elements_mut<T>(pairs: &mut [Pair<T>], len: usize) -> &mut [T] {
    assert!(len <= 2 * pairs.len());
    // SAFETY: as in `elements`.
    unsafe { std::slice::from_raw_parts_mut(pairs.as_mut_ptr().cast::<T>(), len) }
}
