//! The tensor-core and async-copy helpers in the simulator ([`gpukern_device::mma`],
//! [`gpukern_device::async_copy`]):
//!
//! 1. `to_tf32` on the rounding edge cases (ties away from zero, carries into the exponent, up
//!    to infinity, NaN and infinities kept) and against an independent f64 rounding on random
//!    values.
//! 2. `mma_m16n8k8_tf32` as one warp runs it, each lane loading its fragments in the documented
//!    layout, against a CPU product of the TF32-rounded tiles; a lane that skips it is reported.
//! 3. `cp_async_16` / `cp_async_4`: the copy, the zero-fill of a short source, and the checks
//!    (a read past the source buffer, a misaligned 16-byte copy).

use gpukern_device::async_copy::{self, cp_async_16, cp_async_4};
use gpukern_device::mma::{mma_m16n8k8_tf32, to_tf32};
use gpukern_device::sim::{Access, Dim3, Launch, LaunchConfig, Space, Violation};
use gpukern_device::vector::F4;
use gpukern_device::{mem, shared, thread};

/// A launch of one block of `threads` threads.
fn one_block(threads: u32, shared_mem_bytes: u32) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(1, 1, 1),
        block: Dim3::new(threads, 1, 1),
        shared_mem_bytes,
    }
}

/// `n` pseudo-random floats in [-2, 2) with all 23 significand bits in use (so that rounding
/// to TF32 changes them).
fn random(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
        })
        .collect()
}

/// `x` rounded to 11 significant bits, to nearest with ties away from zero, computed in f64
/// from the value rather than from the bits: an independent check of `to_tf32`.
fn tf32_reference(x: f32) -> f32 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let x = f64::from(x);
    let exponent = x.abs().log2().floor() as i32;
    let ulp = f64::powi(2.0, exponent - 10);
    let rounded = (x.abs() / ulp + 0.5).floor() * ulp;
    let rounded = rounded.copysign(x);
    if rounded.abs() >= f64::powi(2.0, 128) {
        return f32::INFINITY.copysign(x as f32);
    }
    rounded as f32
}

/// `to_tf32` in the simulator (it needs no launch: the rounding is plain code).
fn tf32(x: f32) -> f32 {
    f32::from_bits(to_tf32(x))
}

// ---------------------------------------------------------------------------------------------
// 1. Rounding to TF32
// ---------------------------------------------------------------------------------------------

#[test]
fn to_tf32_rounds_to_nearest_ties_away() {
    let ulp = f32::powi(2.0, -10);
    let cases: [(f32, f32); 12] = [
        (1.0, 1.0),
        // Exactly half a TF32 unit above 1: the tie goes away from zero.
        (1.0 + ulp / 2.0, 1.0 + ulp),
        (-(1.0 + ulp / 2.0), -(1.0 + ulp)),
        // Just below the tie: down; just above: up.
        (f32::from_bits((1.0f32 + ulp / 2.0).to_bits() - 1), 1.0),
        (f32::from_bits((1.0f32 + ulp / 2.0).to_bits() + 1), 1.0 + ulp),
        // A tie whose rounded-down neighbour has an odd last bit: still away (not to even).
        (1.0 + ulp + ulp / 2.0, 1.0 + 2.0 * ulp),
        // The carry runs into the exponent: just under 2 rounds to 2.
        (f32::from_bits(0x3fff_ffff), 2.0),
        // The largest f32 rounds past the largest TF32: infinity.
        (f32::MAX, f32::INFINITY),
        (-f32::MAX, f32::NEG_INFINITY),
        (f32::INFINITY, f32::INFINITY),
        (0.0, 0.0),
        // The smallest subnormal rounds to zero (it is below half a TF32 subnormal unit).
        (f32::from_bits(1), 0.0),
    ];
    for (x, want) in cases {
        let got = tf32(x);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "to_tf32({x:e}) = {got:e}, want {want:e}"
        );
        assert_eq!(to_tf32(x) & 0x1fff, 0, "to_tf32({x:e}) leaves low bits");
    }
    assert!(tf32(f32::NAN).is_nan() && tf32(-f32::NAN).is_nan());
    assert_eq!(tf32(-0.0).to_bits(), (-0.0f32).to_bits());
}

#[test]
fn to_tf32_matches_an_f64_rounding_on_random_values() {
    for (i, x) in random(7, 10_000).into_iter().enumerate() {
        let x = x * f32::powi(2.0, (i % 60) as i32 - 30);
        let (got, want) = (tf32(x), tf32_reference(x));
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "to_tf32({x:e}) = {got:e}, want {want:e}"
        );
        assert!(((got - x) / x).abs() <= f32::powi(2.0, -11), "{x:e} -> {got:e}");
    }
}

// ---------------------------------------------------------------------------------------------
// 2. The warp's 16 x 8 x 8 MMA
// ---------------------------------------------------------------------------------------------

/// One warp: `d = A * B + C` for row-major `a` (16 x 8), `b` (8 x 8), `c` and `d` (16 x 8),
/// each lane loading its fragments in the layout `gpu::mma` documents. With `skip_lane`, that
/// lane returns before the MMA (a planted bug).
///
/// # Safety
/// The buffers hold those sizes; one block of 32 threads.
unsafe fn mma_tile(a: *const f32, b: *const f32, c: *const f32, d: *mut f32, skip_lane: Option<usize>) {
    let lane = thread::thread_idx_x() as usize;
    let (g, t) = (lane / 4, lane % 4);
    if skip_lane == Some(lane) {
        return;
    }
    // SAFETY: every index is inside its tile.
    unsafe {
        let ra = |r: usize, k: usize| to_tf32(mem::load(a, r * 8 + k));
        let rb = |k: usize, col: usize| to_tf32(mem::load(b, k * 8 + col));
        let rc = |r: usize, col: usize| mem::load(c, r * 8 + col);
        let frag_a = [ra(g, t), ra(g + 8, t), ra(g, t + 4), ra(g + 8, t + 4)];
        let frag_b = [rb(t, g), rb(t + 4, g)];
        let frag_c = [
            rc(g, 2 * t),
            rc(g, 2 * t + 1),
            rc(g + 8, 2 * t),
            rc(g + 8, 2 * t + 1),
        ];
        let out = mma_m16n8k8_tf32(frag_a, frag_b, frag_c);
        mem::store(d, g * 8 + 2 * t, out[0]);
        mem::store(d, g * 8 + 2 * t + 1, out[1]);
        mem::store(d, (g + 8) * 8 + 2 * t, out[2]);
        mem::store(d, (g + 8) * 8 + 2 * t + 1, out[3]);
    }
}

/// Runs [`mma_tile`] on one warp.
fn run_mma(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    skip_lane: Option<usize>,
) -> Result<Vec<f32>, gpukern_device::sim::SimError> {
    let mut d = vec![f32::NAN; 16 * 8];
    let mut launch = Launch::new("mma_tile", one_block(32, 0));
    let (pa, pb, pc) = (launch.input("a", a), launch.input("b", b), launch.input("c", c));
    let pd = launch.output("d", &mut d);
    // SAFETY: the buffers hold 128, 64, 128 and 128 floats; one warp.
    unsafe { launch.run(|| mma_tile(pa, pb, pc, pd, skip_lane)) }?;
    Ok(d)
}

#[test]
fn mma_matches_the_product_of_tf32_tiles() {
    for seed in 0..4 {
        let (a, b, c) = (
            random(3 * seed + 1, 128),
            random(3 * seed + 2, 64),
            random(3 * seed + 3, 128),
        );
        let d = run_mma(&a, &b, &c, None).unwrap();
        for r in 0..16 {
            for col in 0..8 {
                let mut want = f64::from(c[r * 8 + col]);
                for k in 0..8 {
                    want +=
                        f64::from(tf32_reference(a[r * 8 + k])) * f64::from(tf32_reference(b[k * 8 + col]));
                }
                let got = d[r * 8 + col];
                // One f32 rounding of the exact sum (the simulator's contract).
                assert_eq!(
                    got, want as f32,
                    "seed {seed}: D[{r}][{col}] = {got}, want {want}"
                );
            }
        }
    }
}

#[test]
fn mma_layout_puts_each_element_where_the_isa_says() {
    // A = unit matrix rows (A(r, k) = 1 if k == r % 8), B(k, col) = 8k + col: row r of D is row
    // r % 8 of B, so a fragment in the wrong place shows up as a wrong value.
    let a: Vec<f32> = (0..128)
        .map(|i| if i % 8 == (i / 8) % 8 { 1.0 } else { 0.0 })
        .collect();
    let b: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let c: Vec<f32> = (0..128).map(|i| 1000.0 * (i / 8) as f32).collect();
    let d = run_mma(&a, &b, &c, None).unwrap();
    for r in 0..16 {
        for col in 0..8 {
            let want = 1000.0 * r as f32 + ((r % 8) * 8 + col) as f32;
            assert_eq!(d[r * 8 + col], want, "D[{r}][{col}]");
        }
    }
}

#[test]
fn mma_skipped_by_one_lane_is_reported() {
    let (a, b, c) = (random(1, 128), random(2, 64), random(3, 128));
    let err = run_mma(&a, &b, &c, Some(5)).expect_err("a lane that skips the MMA must be reported");
    println!("{err}");
    assert_eq!(err.thread, Dim3::new(5, 0, 0));
    assert!(
        matches!(&err.violation, Violation::ShuffleNotReached { waiting: 31, .. }),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Copies from global to shared memory
// ---------------------------------------------------------------------------------------------

/// Thread `i` of 8 copies 16 bytes `src[4i..4i + 4]` to shared memory (only `src_bytes[i]` of
/// them from `src`), thread `8 + i` copies `src[i]` with a 4-byte copy (`src_bytes` 4 for even
/// `i`, 0 for odd); after the wait and a barrier every thread writes its words out.
///
/// # Safety
/// `src` holds `src_len` floats, `out` 40; 16 threads; 160 bytes of shared memory.
unsafe fn copy_then_read(src: *const f32, src_start: usize, sizes: *const u32, out: *mut f32) {
    let tid = thread::thread_idx_x() as usize;
    let smem = shared::dynamic::<F4>().cast::<f32>();
    // SAFETY: per the contract; `src_start` shifts the source by that many floats.
    unsafe {
        if tid < 8 {
            cp_async_16(
                smem.wrapping_add(4 * tid),
                src.wrapping_add(src_start + 4 * tid),
                mem::load(sizes, tid),
            );
        } else {
            let i = tid - 8;
            cp_async_4(
                smem.wrapping_add(32 + i),
                src.wrapping_add(src_start + i),
                if i & 1 == 0 { 4 } else { 0 },
            );
        }
        async_copy::commit_group();
        async_copy::wait_group::<0>();
        thread::sync_threads();
        if tid < 8 {
            for j in 0..4 {
                mem::store(out, 4 * tid + j, mem::load(smem, 4 * tid + j));
            }
        } else {
            mem::store(out, 32 + tid - 8, mem::load(smem, 32 + tid - 8));
        }
    }
}

fn run_copy(src: &[F4], start: usize, sizes: &[u32]) -> Result<Vec<f32>, gpukern_device::sim::SimError> {
    let mut out = vec![f32::NAN; 40];
    let mut launch = Launch::new("copy_then_read", one_block(16, 160));
    let ps = launch.input("src", src).cast::<f32>();
    let pz = launch.input("sizes", sizes);
    let po = launch.output("out", &mut out);
    // SAFETY: `src` is long enough for the shapes used below; 16 threads, 160 bytes.
    unsafe { launch.run(|| copy_then_read(ps, start, pz, po)) }?;
    Ok(out)
}

#[test]
fn cp_async_copies_and_zero_fills() {
    let src: Vec<F4> = (0..8)
        .map(|i| {
            F4([
                4.0 * i as f32,
                4.0 * i as f32 + 1.0,
                4.0 * i as f32 + 2.0,
                4.0 * i as f32 + 3.0,
            ])
        })
        .collect();
    let sizes = [16, 16, 0, 4, 8, 12, 16, 0];
    let out = run_copy(&src, 0, &sizes).unwrap();
    for (i, &bytes) in sizes.iter().enumerate() {
        for j in 0..4 {
            let want = if 4 * j < bytes as usize {
                (4 * i + j) as f32
            } else {
                0.0
            };
            assert_eq!(
                out[4 * i + j],
                want,
                "16-byte copy {i} with {bytes} source bytes, word {j}"
            );
        }
    }
    for i in 0..8 {
        let want = if i & 1 == 0 { i as f32 } else { 0.0 };
        assert_eq!(out[32 + i], want, "4-byte copy {i}");
    }
}

#[test]
fn cp_async_past_the_source_is_reported() {
    // Seven pieces of source: the eighth 16-byte copy reads past it (with 16 source bytes).
    let src: Vec<F4> = vec![F4([1.0; 4]); 7];
    let err = run_copy(&src, 0, &[16; 8]).expect_err("a copy past the source must be reported");
    println!("{err}");
    assert_eq!(err.thread, Dim3::new(7, 0, 0));
    assert!(
        matches!(
            &err.violation,
            Violation::OutOfBounds {
                space: Space::Global,
                access: Access::Read,
                ..
            }
        ),
        "{err}"
    );
    // With a source size of 0 the same copy reads nothing: fine.
    let mut sizes = [16; 8];
    sizes[7] = 0;
    let out = run_copy(&src, 0, &sizes).unwrap();
    assert_eq!(&out[28..32], &[0.0; 4]);
}

#[test]
fn cp_async_16_misaligned_is_reported() {
    let src: Vec<F4> = vec![F4([1.0; 4]); 9];
    let err = run_copy(&src, 1, &[16; 8]).expect_err("a misaligned 16-byte copy must be reported");
    println!("{err}");
    assert!(
        matches!(&err.violation, Violation::Panic { message } if message.contains("misaligned 16-byte cp.async")),
        "{err}"
    );
}
