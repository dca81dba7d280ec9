//! `gpukern_device_checks::atomics`: histograms (global and shared, ragged and under
//! contention), float sums exact by construction, maxima, the CAS counter, and every integer and
//! float atomic at every scope, each against its exact expected result.

use gpukern::{DeviceSlice, DeviceSliceMut, LaunchConfig, Module};
use gpukern_device_checks::atomics::{
    cas_counter, float_ops_f32, float_ops_f64, histogram, histogram_shared, int_ops_i32, int_ops_i64,
    int_ops_u32, int_ops_u64, max_min_i32, max_u32, sum_f32, sum_f64,
};
use libtest_mimic::Trial;
use rand::Rng;

use crate::{BLOCK, Check, Sizes, Target, expect_all, expect_eq, linear, trial};

/// Threads of the block-scope runs: one block, so that block-scope atomics are atomic.
const ONE_BLOCK_N: usize = BLOCK as usize - 3;

/// A histogram launch: `histogram` or `histogram_shared` (`4 * nbins` bytes of shared memory).
type HistogramLaunch = unsafe fn(
    &Module,
    LaunchConfig,
    DeviceSlice<u32>,
    usize,
    DeviceSliceMut<u32>,
    u32,
) -> gpukern::Result<()>;

/// The two histogram kernels, with whether each needs shared memory.
const HISTOGRAMS: [(&str, HistogramLaunch, bool); 2] = [
    ("histogram", histogram::launch_views::<Module>, false),
    ("histogram_shared", histogram_shared::launch_views::<Module>, true),
];

/// The CPU histogram: `bins[x % nbins] += 1`.
pub fn cpu_histogram(x: &[u32], nbins: u32) -> Vec<u32> {
    let mut bins = vec![0; nbins as usize];
    for &v in x {
        bins[(v % nbins) as usize] += 1;
    }
    bins
}

/// Runs one histogram kernel over `x` into `nbins` zeroed bins.
fn run_histogram(
    module: &Module,
    launch: HistogramLaunch,
    in_shared: bool,
    x: &[u32],
    nbins: u32,
) -> Result<Vec<u32>, gpukern::Error> {
    let gpu = module.gpu();
    let xd = gpu.upload(x)?;
    let mut bins = gpu.zeros_of::<u32>(nbins as usize)?;
    let config = LaunchConfig {
        shared_mem_bytes: if in_shared { 4 * nbins } else { 0 },
        ..linear(x.len())
    };
    // SAFETY: `x` holds `n` words, `bins` `nbins`, shared memory `4 * nbins` bytes.
    unsafe { launch(module, config, xd.view(), x.len(), bins.view_mut(), nbins) }?;
    bins.to_vec()
}

fn histograms(module: &Module, sizes: &Sizes, rng: &mut rand::rngs::StdRng) -> Check {
    for &(n, nbins) in sizes.histogram {
        let x: Vec<u32> = (0..n).map(|_| rng.random()).collect();
        let want = cpu_histogram(&x, nbins);
        for (name, launch, in_shared) in HISTOGRAMS {
            let got = run_histogram(module, launch, in_shared, &x, nbins)?;
            expect_eq(&format!("{name}, n {n}, nbins {nbins}"), got, want.clone())?;
        }
    }
    Ok(())
}

/// The requirement: 2^24 atomic adds (on the GPU) to 16 bins count exactly.
fn contention(module: &Module, sizes: &Sizes, _: &mut rand::rngs::StdRng) -> Check {
    let n = sizes.contention;
    let x: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(7)).collect();
    let want = cpu_histogram(&x, 16);
    expect_eq(
        "total of the CPU histogram",
        want.iter().map(|&b| b as usize).sum(),
        n,
    )?;
    for (name, launch, in_shared) in HISTOGRAMS {
        let got = run_histogram(module, launch, in_shared, &x, 16)?;
        expect_eq(&format!("{name}, {n} elements on 16 bins"), got, want.clone())?;
    }
    Ok(())
}

/// Float sums whose every partial sum is exact (halves and quarters far below 2^24 / 2^53
/// units), so any order of the atomics gives the one right answer.
fn sums(module: &Module, sizes: &Sizes, _: &mut rand::rngs::StdRng) -> Check {
    let gpu = module.gpu();
    let n = sizes.reduce;
    let x: Vec<f32> = (0..n).map(|i| (i % 100) as f32 * 0.5).collect();
    let exact: f64 = x.iter().map(|&v| f64::from(v)).sum();
    if n == 100_003 {
        expect_eq("the expected f32 sum (the authors' figure)", exact, 2_475_001.5)?;
    }
    let xd = gpu.upload(&x)?;
    let mut total = gpu.zeros(1)?;
    // SAFETY: `x` holds `n` floats, `total` one.
    unsafe { sum_f32::launch(module, linear(n), &xd, n, &mut total) }?;
    expect_eq(&format!("sum_f32 of {n}"), total.to_vec()?, vec![exact as f32])?;

    let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.25 - 100.0).collect();
    let exact: f64 = x.iter().sum();
    if n == 100_003 {
        expect_eq(
            "the expected f64 sum (the authors' figure)",
            exact,
            1_240_062_200.75,
        )?;
    }
    let xd = gpu.upload(&x)?;
    let mut total = gpu.zeros_of::<f64>(1)?;
    // SAFETY: `x` holds `n` doubles, `total` one.
    unsafe { sum_f64::launch(module, linear(n), &xd, n, &mut total) }?;
    expect_eq(&format!("sum_f64 of {n}"), total.to_vec()?, vec![exact])
}

fn maxima(module: &Module, sizes: &Sizes, rng: &mut rand::rngs::StdRng) -> Check {
    let gpu = module.gpu();
    let n = sizes.reduce;
    let x: Vec<u32> = (0..n).map(|_| rng.random()).collect();
    let xd = gpu.upload(&x)?;
    let mut out = gpu.zeros_of::<u32>(1)?;
    // SAFETY: `x` holds `n` words, `out` one.
    unsafe { max_u32::launch(module, linear(n), &xd, n, &mut out) }?;
    expect_eq(
        "max_u32",
        out.to_vec()?,
        vec![x.iter().copied().max().unwrap_or(0)],
    )?;

    let x: Vec<i32> = (0..n).map(|_| rng.random()).collect();
    let xd = gpu.upload(&x)?;
    let mut out = gpu.upload(&[i32::MIN, i32::MAX])?;
    // SAFETY: `x` holds `n` values, `out` two.
    unsafe { max_min_i32::launch(module, linear(n), &xd, n, &mut out) }?;
    let want = vec![
        x.iter().copied().max().unwrap_or(i32::MIN),
        x.iter().copied().min().unwrap_or(i32::MAX),
    ];
    expect_eq("max_min_i32 (max, min)", out.to_vec()?, want)
}

fn cas(module: &Module, sizes: &Sizes, _: &mut rand::rngs::StdRng) -> Check {
    let gpu = module.gpu();
    let n = sizes.cas;
    let mut counter = gpu.zeros_of::<u32>(1)?;
    let mut tickets = gpu.upload(&vec![u32::MAX; n])?;
    // SAFETY: `counter` holds one word, `tickets` `n`.
    unsafe { cas_counter::launch(module, linear(n), n, &mut counter, &mut tickets) }?;
    expect_eq("cas_counter's counter", counter.to_vec()?, vec![n as u32])?;
    let mut tickets = tickets.to_vec()?;
    tickets.sort_unstable();
    let want: Vec<u32> = (0..n as u32).collect();
    expect_all("cas_counter's sorted tickets", &tickets, &want, |a, b| a == b)
}

/// `(scope, n, config)` of the `*_ops` runs: block scope on one block, device scope with `cas`
/// threads (at most `cap`), system scope with `system`.
fn scopes(sizes: &Sizes, cap: usize) -> [(u32, usize, LaunchConfig); 3] {
    let one_block = LaunchConfig {
        grid: (1, 1, 1),
        block: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let device = sizes.cas.min(cap);
    let system = sizes.system.min(cap);
    [
        (0, ONE_BLOCK_N, one_block),
        (1, device, linear(device)),
        (2, system, linear(system)),
    ]
}

/// Runs `int_ops_<type>` at every scope and checks all six results (see the kernel's doc).
macro_rules! int_ops {
    ($module:expr, $sizes:expr, $kernel:ident, $t:ty, $value:expr) => {{
        let gpu = $module.gpu();
        for (scope, n, config) in scopes($sizes, usize::MAX) {
            let mut out = gpu.upload(&[0, <$t>::MIN, <$t>::MAX, 0, 0, 0])?;
            // SAFETY: `out` holds 6 elements; scope 0 runs on one block.
            unsafe { $kernel::launch($module, config, scope, n, &mut out) }?;
            let out = out.to_vec()?;
            let what = format!("{} at scope {scope}, n {n}: {out:?}", stringify!($kernel));
            let value: fn(usize, usize) -> $t = $value;
            let values: Vec<$t> = (0..n).map(|i| value(i, n)).collect();
            let sum = values.iter().fold(0 as $t, |a, &v| a.wrapping_add(v));
            let max = values.iter().copied().max().unwrap_or(<$t>::MIN);
            let min = values.iter().copied().min().unwrap_or(<$t>::MAX);
            // Adds and CAS increments: n each; the last exchanged value stays in out[3], every
            // other one was added to out[4].
            expect_eq(
                &what,
                [out[0], out[5], out[1], out[2]],
                [n as $t, n as $t, max, min],
            )?;
            expect_eq(
                &format!("{what}: out[3] is a value"),
                values.contains(&out[3]),
                true,
            )?;
            expect_eq(
                &format!("{what}: out[3] + out[4]"),
                out[3].wrapping_add(out[4]),
                sum,
            )?;
        }
    }};
}

/// Runs `float_ops_<type>` at every scope and checks all four results; `cap` keeps the f32 sum
/// of `i / 2` exact (below 2^23).
macro_rules! float_ops {
    ($module:expr, $sizes:expr, $kernel:ident, $t:ty, $cap:expr) => {{
        let gpu = $module.gpu();
        for (scope, n, config) in scopes($sizes, $cap) {
            let mut out = gpu.upload(&[0.0, 0.0, 0.0, <$t>::NEG_INFINITY])?;
            // SAFETY: `out` holds 4 elements; scope 0 runs on one block.
            unsafe { $kernel::launch($module, config, scope, n, &mut out) }?;
            let out = out.to_vec()?;
            let what = format!("{} at scope {scope}, n {n}: {out:?}", stringify!($kernel));
            let values: Vec<$t> = (0..n).map(|i| i as $t * 0.5).collect();
            let sum: $t = values.iter().sum();
            expect_eq(
                &what,
                [out[0], out[1] + out[2], out[3]],
                [sum, sum, (n - 1) as $t * 0.5],
            )?;
            expect_eq(
                &format!("{what}: out[1] is a value"),
                values.contains(&out[1]),
                true,
            )?;
        }
    }};
}

fn int_ops(module: &Module, sizes: &Sizes, _: &mut rand::rngs::StdRng) -> Check {
    int_ops!(module, sizes, int_ops_u32, u32, |i, _| i as u32);
    int_ops!(module, sizes, int_ops_i32, i32, |i, n| i as i32 - (n / 2) as i32);
    int_ops!(module, sizes, int_ops_u64, u64, |i, _| i as u64);
    int_ops!(module, sizes, int_ops_i64, i64, |i, n| i as i64 - (n / 2) as i64);
    Ok(())
}

fn float_ops(module: &Module, sizes: &Sizes, _: &mut rand::rngs::StdRng) -> Check {
    // sum(i / 2, i < 4097) = 4_195_328: below 2^23, so every partial sum of halves is an f32.
    float_ops!(module, sizes, float_ops_f32, f32, 4097);
    float_ops!(module, sizes, float_ops_f64, f64, usize::MAX);
    Ok(())
}

/// The atomics trials of one backend.
pub fn trials(target: &Target) -> Vec<Trial> {
    vec![
        trial(target, "atomics::histograms_match_the_cpu", histograms),
        trial(
            target,
            "atomics::histograms_under_contention_count_exactly",
            contention,
        ),
        trial(target, "atomics::float_sums_are_exact", sums),
        trial(target, "atomics::maxima_and_minima", maxima),
        trial(target, "atomics::cas_counter_hands_out_every_ticket_once", cas),
        trial(target, "atomics::every_integer_atomic_at_every_scope", int_ops),
        trial(target, "atomics::every_float_atomic_at_every_scope", float_ops),
    ]
}
