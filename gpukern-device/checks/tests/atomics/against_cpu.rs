//! Each check kernel of `gpukern_device_checks::atomics` against a CPU reference, on ragged
//! sizes and under contention, at every scope; and a wrong histogram that only a ragged size
//! catches.

use gpukern_device::atomic::{self, Scope};
use gpukern_device::sim::Launch;
use gpukern_device::{kernel, mem, thread};
use gpukern_device_checks::atomics::{
    cas_counter, float_ops_f32, float_ops_f64, int_ops_i32, int_ops_i64, int_ops_u32, int_ops_u64,
    max_min_i32, max_u32, sum_f32, sum_f64,
};

use super::{blocks_for, config, cpu_histogram, run_histogram, words, BLOCK};

#[test]
fn histograms_match_the_cpu_on_ragged_sizes() {
    // Sizes that are not multiples of the block, and bin counts below, at and above it (the
    // shared kernel's zeroing and flushing loops stride by the block).
    for (n, nbins) in [(1, 1), (37, 7), (1000, 16), (1, 300), (1537, 300), (2049, 129)] {
        let x = words(n, n as u32);
        let expected = cpu_histogram(&x, nbins);
        for in_shared in [false, true] {
            let bins = run_histogram(&x, nbins, in_shared).expect("the histogram is race-free");
            assert_eq!(bins, expected, "n {n}, nbins {nbins}, shared {in_shared}");
        }
    }
}

#[test]
fn histograms_under_contention_count_exactly() {
    // 64 blocks of 128 threads on 16 bins: 512 atomics per bin, from threads of every block.
    let n = 8192 + 5;
    let x: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(7)).collect();
    let expected = cpu_histogram(&x, 16);
    assert_eq!(expected.iter().sum::<u32>(), n as u32);
    for in_shared in [false, true] {
        let bins = run_histogram(&x, 16, in_shared).expect("the histogram is race-free");
        assert_eq!(bins, expected, "shared {in_shared}");
    }
}

/// A wrong histogram a ragged size catches: the threads of the last, partial block skip their
/// element (as a kernel that rounds `n` down to whole blocks would).
#[kernel]
unsafe fn histogram_whole_blocks_only(x: *const u32, n: usize, bins: *mut u32, nbins: u32) {
    let i = thread::index_1d();
    let whole = n - n % thread::block_dim_x() as usize;
    if i < whole {
        // SAFETY: `i < n`; the bin is below `nbins`.
        unsafe { atomic::add(bins, (mem::load(x, i) % nbins) as usize, 1u32, Scope::Device) };
    }
}

#[test]
fn a_histogram_that_drops_the_partial_block_fails_the_cpu_comparison_on_a_ragged_size() {
    for n in [1000usize, 1024] {
        let x = words(n, 3);
        let mut bins = vec![0u32; 16];
        let mut launch = Launch::new("histogram_whole_blocks_only", config(blocks_for(n), BLOCK, 0));
        let (px, pb) = (launch.input("x", &x), launch.output("bins", &mut bins));
        // SAFETY: `x` holds `n` words, `bins` 16.
        unsafe { launch.run(|| histogram_whole_blocks_only(px, n, pb, 16)) }.expect("no race");
        // 1024 is a multiple of the block and hides the bug; 1000 is not and shows it.
        assert_eq!(bins == cpu_histogram(&x, 16), n == 1024, "n {n}");
    }
}

#[test]
fn float_sums_are_exact_where_every_partial_sum_is() {
    for n in [1usize, 300, 3001] {
        // Halves below 2^24 in total: every order of the additions gives the same f32.
        let x: Vec<f32> = (0..n).map(|i| (i % 100) as f32 * 0.5).collect();
        let mut total = [0.0f32];
        let mut launch = Launch::new("sum_f32", config(blocks_for(n), BLOCK, 0));
        let (px, pt) = (launch.input("x", &x), launch.output("total", &mut total));
        // SAFETY: `x` holds `n` floats, `total` one.
        unsafe { launch.run(|| sum_f32(px, n, pt)) }.expect("atomics do not race");
        assert_eq!(total[0], x.iter().sum::<f32>(), "n {n}");

        let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.25 - 100.0).collect();
        let mut total = [0.0f64];
        let mut launch = Launch::new("sum_f64", config(blocks_for(n), BLOCK, 0));
        let (px, pt) = (launch.input("x", &x), launch.output("total", &mut total));
        // SAFETY: `x` holds `n` doubles, `total` one.
        unsafe { launch.run(|| sum_f64(px, n, pt)) }.expect("atomics do not race");
        assert_eq!(total[0], x.iter().sum::<f64>(), "n {n}");
    }
}

#[test]
fn maxima_and_minima_match_the_cpu() {
    for n in [1usize, 129, 2000] {
        let x = words(n, 11);
        let mut out = [0u32];
        let mut launch = Launch::new("max_u32", config(blocks_for(n), BLOCK, 0));
        let (px, po) = (launch.input("x", &x), launch.output("out", &mut out));
        // SAFETY: `x` holds `n` words, `out` one.
        unsafe { launch.run(|| max_u32(px, n, po)) }.expect("atomics do not race");
        assert_eq!(out[0], x.iter().copied().max().unwrap_or(0), "n {n}");

        let x: Vec<i32> = words(n, 12)
            .iter()
            .map(|&w| (w as i32).wrapping_sub(1 << 23))
            .collect();
        assert!(x.len() < 2 || x.iter().any(|&v| v < 0) && x.iter().any(|&v| v > 0));
        let mut out = [i32::MIN, i32::MAX];
        let mut launch = Launch::new("max_min_i32", config(blocks_for(n), BLOCK, 0));
        let (px, po) = (launch.input("x", &x), launch.output("out", &mut out));
        // SAFETY: `x` holds `n` values, `out` two.
        unsafe { launch.run(|| max_min_i32(px, n, po)) }.expect("atomics do not race");
        let (max, min) = (x.iter().max(), x.iter().min());
        assert_eq!((Some(&out[0]), Some(&out[1])), (max, min), "n {n}");
    }
}

#[test]
fn the_cas_counter_hands_out_every_ticket_once() {
    for n in [1usize, 300, 2050] {
        let mut counter = [0u32];
        let mut tickets = vec![u32::MAX; n];
        let mut launch = Launch::new("cas_counter", config(blocks_for(n), BLOCK, 0));
        let pc = launch.output("counter", &mut counter);
        let pt = launch.output("tickets", &mut tickets);
        // SAFETY: `counter` holds one word, `tickets` `n`.
        unsafe { launch.run(|| cas_counter(n, pc, pt)) }.expect("atomics do not race");
        assert_eq!(counter[0], n as u32);
        tickets.sort_unstable();
        assert!(tickets.iter().enumerate().all(|(i, &t)| t == i as u32), "n {n}");
    }
}

/// Runs `int_ops_<type>` at every scope (block scope on one block, the others on several) and
/// checks every element of `out`.
macro_rules! check_int_ops {
    ($kernel:ident, $t:ty, $value:expr) => {
        for (code, n) in [(0u32, BLOCK as usize - 3), (1, 1000), (2, 777)] {
            let mut out: [$t; 6] = [0, <$t>::MIN, <$t>::MAX, 0, 0, 0];
            let mut launch = Launch::new(stringify!($kernel), config(blocks_for(n), BLOCK, 0));
            let po = launch.output("out", &mut out);
            // SAFETY: `out` holds 6 elements; scope 0 runs on one block.
            unsafe { launch.run(|| $kernel(code, n, po)) }.expect("atomics do not race");
            let value: fn(usize, usize) -> $t = $value;
            let values: Vec<$t> = (0..n).map(|i| value(i, n)).collect();
            let (max, min) = (values.iter().max(), values.iter().min());
            // out[0] counts the adds and out[5] the CAS increments: n each.
            assert_eq!([out[0], out[5]], [n as $t; 2], "scope {code}");
            assert_eq!((Some(&out[1]), Some(&out[2])), (max, min), "scope {code}");
            // The exchanged values: the last one stays, every other one is added once to out[4].
            assert!(values.contains(&out[3]), "scope {code}");
            let sum = values.iter().fold(0, |a: $t, &v| a.wrapping_add(v));
            assert_eq!(out[3].wrapping_add(out[4]), sum, "scope {code}");
        }
    };
}

#[test]
fn every_integer_atomic_at_every_scope() {
    check_int_ops!(int_ops_u32, u32, |i, _| i as u32);
    check_int_ops!(int_ops_i32, i32, |i, n| i as i32 - (n / 2) as i32);
    check_int_ops!(int_ops_u64, u64, |i, _| i as u64);
    check_int_ops!(int_ops_i64, i64, |i, n| i as i64 - (n / 2) as i64);
}

/// Runs `float_ops_<type>` at every scope and checks every element of `out`.
macro_rules! check_float_ops {
    ($kernel:ident, $t:ty) => {
        for (code, n) in [(0u32, BLOCK as usize - 3), (1, 1000), (2, 777)] {
            let mut out: [$t; 4] = [0.0, 0.0, 0.0, <$t>::NEG_INFINITY];
            let mut launch = Launch::new(stringify!($kernel), config(blocks_for(n), BLOCK, 0));
            let po = launch.output("out", &mut out);
            // SAFETY: `out` holds 4 elements; scope 0 runs on one block.
            unsafe { launch.run(|| $kernel(code, n, po)) }.expect("atomics do not race");
            let values: Vec<$t> = (0..n).map(|i| i as $t * 0.5).collect();
            let sum: $t = values.iter().sum();
            assert_eq!(out[0], sum, "scope {code}");
            assert!(values.contains(&out[1]), "scope {code}");
            assert_eq!(out[1] + out[2], sum, "scope {code}");
            assert_eq!(out[3], (n - 1) as $t * 0.5, "scope {code}");
        }
    };
}

#[test]
fn every_float_atomic_at_every_scope() {
    check_float_ops!(float_ops_f32, f32);
    check_float_ops!(float_ops_f64, f64);
}
