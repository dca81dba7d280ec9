//! Warp and block collectives over any value in the simulator ([`gpukern_device::warp`],
//! [`gpukern_device::block::Scratch`]):
//!
//! 1. Shuffles of every source (`xor`, `down`, `up`, `idx`) move 32-bit, 64-bit, tuple and array
//!    values from the right lane, in 1-D and 2-D blocks.
//! 2. Warp reductions and scans with closures (an argmax over `(value, index)`, sums, and a
//!    non-commutative composition of affine maps that only an in-order scan gets right), and the
//!    votes (`match_any`, `match_all`, `lanes_below`).
//! 3. Block reductions and scans through `Scratch`, in blocks of 1 to 32 warps, 1-D and 2-D.
//! 4. Planted bugs: a scratch declared for another block size, a block collective that half the
//!    block skips, and a warp scan that one lane skips.

mod common;

use gpukern_device::block::Scratch;
use gpukern_device::shared::{self, Declared};
use gpukern_device::sim::{Dim3, Launch, LaunchConfig, SimError, Violation};
use gpukern_device::warp::{self, Shuffle, Source};
use gpukern_device::{mem, thread};

fn blocks(grid: u32, block: (u32, u32), shared_mem_bytes: usize) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(grid, 1, 1),
        block: Dim3::new(block.0, block.1, 1),
        shared_mem_bytes: shared_mem_bytes as u32,
    }
}

/// This thread's linear index in the grid (x fastest in the block).
fn global_tid() -> usize {
    let per_block = (thread::block_dim_x() * thread::block_dim_y()) as usize;
    let tid = (thread::thread_idx_y() * thread::block_dim_x() + thread::thread_idx_x()) as usize;
    thread::block_idx_x() as usize * per_block + tid
}

/// Runs `body(tid, out)` once per thread of `config`, `out` holding `per_thread` values per
/// thread (initially `T::default()`); returns them.
fn run<T: Copy + Default>(
    config: LaunchConfig,
    per_thread: usize,
    body: impl Fn(usize, *mut T) + Sync,
) -> Result<Vec<T>, SimError> {
    let threads = (config.grid.count() * config.block.count()) as usize;
    let mut out = vec![T::default(); threads * per_thread];
    let mut launch = Launch::new("collective", config);
    let p = launch.output("out", &mut out);
    // SAFETY: each thread writes its own `per_thread` values.
    unsafe { launch.run(|| body(global_tid(), p)) }?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// 1. Shuffles
// ---------------------------------------------------------------------------------------------

/// The lane a shuffle from `source` reads for `lane` (its own when out of range).
fn source_lane(lane: usize, source: Source) -> usize {
    let own_if_out = |l: Option<usize>| l.filter(|&l| l < 32).unwrap_or(lane);
    match source {
        Source::Xor(m) => lane ^ m as usize,
        Source::Down(d) => own_if_out(Some(lane + d as usize)),
        Source::Up(d) => own_if_out(lane.checked_sub(d as usize)),
        Source::Index(i) => i as usize % 32,
    }
}

/// A value of each shuffled kind for thread `t`: 32-bit, 64-bit (two shuffles), a tuple of a
/// 32- and a 16-bit value, an array of bytes.
type Mixed = (u32, f64, (f32, i16), [u8; 3]);

fn mixed(t: usize) -> Mixed {
    (
        t as u32 * 3 + 1,
        t as f64 * -0.5,
        (t as f32, -(t as i16)),
        [t as u8, 7, (t * 2) as u8],
    )
}

/// `v`'s fields as five words, to compare.
fn words(v: Mixed) -> [u64; 5] {
    [
        u64::from(v.0),
        v.1.to_bits(),
        u64::from(v.2 .0.to_bits()),
        v.2 .1 as u64,
        u64::from(u32::from_le_bytes([v.3[0], v.3[1], v.3[2], 0])),
    ]
}

#[test]
fn shuffles_read_the_right_lane_for_every_source_and_type() {
    let sources = [
        Source::Xor(5),
        Source::Xor(16),
        Source::Down(1),
        Source::Down(7),
        Source::Up(3),
        Source::Up(31),
        Source::Index(9),
    ];
    for source in sources {
        for block in [(64, 1), (16, 6)] {
            let out = run(blocks(2, block, 0), 5, |t, out: *mut u64| {
                let got = match source {
                    Source::Xor(m) => warp::shfl_xor(mixed(t), m),
                    Source::Down(d) => warp::shfl_down(mixed(t), d),
                    Source::Up(d) => warp::shfl_up(mixed(t), d),
                    Source::Index(i) => warp::shfl_idx(mixed(t), i),
                };
                for (k, w) in words(got).into_iter().enumerate() {
                    // SAFETY: five elements per thread.
                    unsafe { mem::store(out, 5 * t + k, w) };
                }
            })
            .unwrap();
            for (t, got) in out.chunks(5).enumerate() {
                let lane = t % 32;
                let from = t - lane + source_lane(lane, source);
                assert_eq!(got, words(mixed(from)), "{source:?}, block {block:?}, thread {t}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Warp reductions, scans and votes
// ---------------------------------------------------------------------------------------------

/// An affine map `x -> a x + b` on integers modulo 2^32: composition is associative and not
/// commutative, so a scan that combines out of order gives another answer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Affine {
    a: u32,
    b: u32,
}

impl Shuffle for Affine {
    #[track_caller]
    fn shuffle(self, from: Source) -> Self {
        Affine {
            a: self.a.shuffle(from),
            b: self.b.shuffle(from),
        }
    }
}

/// `first` then `then`: `x -> then.a (first.a x + first.b) + then.b`.
fn compose(first: Affine, then: Affine) -> Affine {
    Affine {
        a: then.a.wrapping_mul(first.a),
        b: then.a.wrapping_mul(first.b).wrapping_add(then.b),
    }
}

fn affine(t: usize) -> Affine {
    Affine {
        a: (t as u32).wrapping_mul(2_654_435_761) | 1,
        b: t as u32 ^ 0x5bd1,
    }
}

/// A value of thread `t` for the argmax: distinct, with ties broken by the lower index.
fn score(t: usize) -> f32 {
    ((t * 37) % 101) as f32
}

/// `(value, index)`, the larger value, the lower index on a tie.
fn argmax(a: (f32, u32), b: (f32, u32)) -> (f32, u32) {
    if b.0 > a.0 || (b.0 == a.0 && b.1 < a.1) {
        b
    } else {
        a
    }
}

#[test]
fn warp_reductions_and_scans_combine_in_lane_order() {
    let out = run(blocks(3, (64, 1), 0), 6, |t, out: *mut u64| {
        let best = warp::reduce((score(t), t as u32), argmax);
        let inclusive = warp::scan_inclusive(affine(t), compose);
        let exclusive = warp::scan_exclusive(t as u64 + 1, 0, |a, b| a + b);
        let sum = warp::reduce(t as u64, |a, b| a + b);
        let got = [
            u64::from(best.1),
            u64::from(inclusive.a),
            u64::from(inclusive.b),
            exclusive,
            sum,
            0,
        ];
        for (k, w) in got.into_iter().enumerate() {
            // SAFETY: six elements per thread.
            unsafe { mem::store(out, 6 * t + k, w) };
        }
    })
    .unwrap();
    for (t, got) in out.chunks(6).enumerate() {
        let warp0 = t - t % 32;
        let best = (warp0..warp0 + 32)
            .map(|u| (score(u), u as u32))
            .fold((f32::MIN, 0), argmax);
        let inclusive = (warp0..=t).map(affine).reduce(compose).unwrap();
        let exclusive: u64 = (warp0..t).map(|u| u as u64 + 1).sum();
        let sum: u64 = (warp0..warp0 + 32).map(|u| u as u64).sum();
        let want = [
            u64::from(best.1),
            u64::from(inclusive.a),
            u64::from(inclusive.b),
            exclusive,
            sum,
            0,
        ];
        assert_eq!(got, want, "thread {t}");
    }
}

#[test]
fn votes_name_the_lanes_with_equal_values() {
    let out = run(blocks(1, (64, 1), 0), 4, |t, out: *mut u32| {
        let key = (t % 32 / 5) as u32; // runs of 5 lanes share a key
        let same = warp::match_any(key);
        let all_same = warp::match_all(if t < 32 { 7 } else { key });
        let rank = (warp::ballot(t % 3 == 0) & warp::lanes_below()).count_ones();
        for (k, w) in [same, u32::from(all_same), rank, warp::lanes_below()]
            .into_iter()
            .enumerate()
        {
            // SAFETY: four elements per thread.
            unsafe { mem::store(out, 4 * t + k, w) };
        }
    })
    .unwrap();
    for (t, got) in out.chunks(4).enumerate() {
        let lane = t % 32;
        let key = lane / 5;
        let same = (0..32).filter(|l| l / 5 == key).fold(0u32, |m, l| m | 1 << l);
        let rank = (0..lane).filter(|l| (t - lane + l) % 3 == 0).count() as u32;
        assert_eq!(
            got,
            [same, u32::from(t < 32), rank, (1u32 << lane) - 1],
            "thread {t}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Block collectives
// ---------------------------------------------------------------------------------------------

/// The block scratch at the start of shared memory, as `#[kernel(shared(..))]` lays it out.
fn scratch<T: Shuffle, const THREADS: usize>() -> Scratch<T, THREADS> {
    // SAFETY: the launch gives the block `Scratch::BYTES` of shared memory, used by nothing else.
    unsafe { <Scratch<T, THREADS> as Declared>::at(shared::dynamic()) }
}

/// Block sums, argmax and both scans with a scratch for `THREADS`, in blocks of `block`
/// (`block.0 * block.1 == THREADS`), against the CPU.
fn block_collectives<const THREADS: usize>(block: (u32, u32)) {
    let bytes = <Scratch<(f32, u32), THREADS> as Declared>::BYTES;
    let out = run(blocks(2, block, bytes), 5, |t, out: *mut u64| {
        // One scratch of the widest type serves all four collectives one after another.
        let wide = scratch::<(f32, u32), THREADS>();
        let narrow = scratch::<u64, THREADS>();
        let pair = scratch::<Affine, THREADS>();
        // SAFETY: every thread of the block calls each collective; the block has THREADS threads.
        let got = unsafe {
            let sum = narrow.reduce(t as u64, |a, b| a + b);
            let best = wide.reduce((score(t), t as u32), argmax);
            let inclusive = pair.scan_inclusive(affine(t), compose);
            let exclusive = narrow.scan_exclusive(t as u64 + 1, 1000, |a, b| a + b);
            [
                sum,
                u64::from(best.1),
                u64::from(inclusive.a),
                u64::from(inclusive.b),
                exclusive,
            ]
        };
        for (k, w) in got.into_iter().enumerate() {
            // SAFETY: five elements per thread.
            unsafe { mem::store(out, 5 * t + k, w) };
        }
    })
    .unwrap();
    for (t, got) in out.chunks(5).enumerate() {
        let first = t - t % THREADS;
        let all = first..first + THREADS;
        let sum: u64 = all.clone().map(|u| u as u64).sum();
        let best = all.map(|u| (score(u), u as u32)).fold((f32::MIN, 0), argmax);
        let inclusive = (first..=t).map(affine).reduce(compose).unwrap();
        let exclusive = if t == first {
            1000
        } else {
            (first..t).map(|u| u as u64 + 1).sum()
        };
        let want = [
            sum,
            u64::from(best.1),
            u64::from(inclusive.a),
            u64::from(inclusive.b),
            exclusive,
        ];
        assert_eq!(got, want, "THREADS {THREADS}, block {block:?}, thread {t}");
    }
}

#[test]
fn block_collectives_reduce_and_scan_in_thread_order() {
    block_collectives::<32>((32, 1));
    block_collectives::<96>((96, 1));
    block_collectives::<128>((16, 8));
    block_collectives::<1024>((1024, 1));
}

#[test]
fn a_scratch_knows_its_bytes() {
    assert_eq!(<Scratch<f32, 256> as Declared>::BYTES, 8 * 4);
    assert_eq!(<Scratch<(f64, u32), 1024> as Declared>::BYTES, 32 * 16);
    assert_eq!(Scratch::<f32, 96>::WARPS, 3);
}

// ---------------------------------------------------------------------------------------------
// 4. Planted bugs
// ---------------------------------------------------------------------------------------------

#[test]
fn a_scratch_declared_for_another_block_size_is_reported() {
    let bytes = <Scratch<f32, 256> as Declared>::BYTES;
    let result = run(blocks(1, (128, 1), bytes), 1, |t, out: *mut f32| {
        // SAFETY: the planted bug: a scratch for 256 threads in a block of 128.
        let total = unsafe { scratch::<f32, 256>().reduce(1.0, |a, b| a + b) };
        // SAFETY: one element per thread.
        unsafe { mem::store(out, t, total) };
    });
    let err = result.expect_err("a scratch for another block size went unreported");
    println!("{err}");
    assert!(
        matches!(&err.violation, Violation::Panic { message }
            if message.contains("block::Scratch<_, 256> in a block of 128 threads")),
        "{err}"
    );
}

#[test]
fn a_block_collective_half_the_block_skips_is_reported() {
    let bytes = <Scratch<f32, 64> as Declared>::BYTES;
    let result = run(blocks(1, (64, 1), bytes), 1, |t, out: *mut f32| {
        let mut v = t as f32;
        if t < 32 {
            // SAFETY: the planted bug: only the first warp calls the block collective.
            v = unsafe { scratch::<f32, 64>().reduce(v, |a, b| a + b) };
        }
        // SAFETY: one element per thread.
        unsafe { mem::store(out, t, v) };
    });
    let err = result.expect_err("a collective half the block skipped went unreported");
    println!("{err}");
    assert!(
        matches!(
            err.violation,
            Violation::DifferentBarriers { .. }
                | Violation::BarrierNotReached { .. }
                | Violation::DifferentShuffles { .. }
        ),
        "{err}"
    );
}

#[test]
fn a_warp_scan_one_lane_skips_is_reported() {
    let result = run(blocks(1, (32, 1), 0), 1, |t, out: *mut u32| {
        let v = if t == 7 {
            t as u32 // the planted bug: lane 7 leaves the scan to the others
        } else {
            warp::scan_inclusive(t as u32, |a, b| a + b)
        };
        // SAFETY: one element per thread.
        unsafe { mem::store(out, t, v) };
    });
    let err = result.expect_err("a lane that skipped the scan went unreported");
    println!("{err}");
    assert!(
        matches!(
            err.violation,
            Violation::ShuffleNotReached { .. } | Violation::DifferentShuffles { .. }
        ),
        "{err}"
    );
}
