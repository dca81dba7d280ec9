//! The reduction family (`sum`, `max`, `argmax`, `sum_axis`, `max_axis`, `argmax_axis`) against
//! `cpu::sum_f64`, `cpu::max`, `cpu::argmax`, `cpu::sum_axis`, `cpu::max_axis` and
//! `cpu::argmax_axis`: per backend on random vectors of ragged lengths
//! (`{sim,cuda}::reduce::len_N`), on planted NaN / infinity / tie / signed-zero inputs
//! (`{sim,cuda}::reduce::rules`), along both axes of ragged matrices
//! (`{sim,cuda}::reduce::axis_RxC`); on CUDA also the f32 sum's error and run-to-run equality on
//! 2^24 values (`cuda::reduce::sum_error_2p24`); the free functions on views
//! (`global::reduce`); and the argmax rule's algebra (`sim::reduce::*`).

use gpukern::kernels::reduce::{self as kr, Best, argmax_combine};
use gpukern::ops::reduce::{ArgmaxAlgorithm, ReduceAlgorithm};
use gpukern::{Error, Gpu, cpu};
use libtest_mimic::Trial;
use ndarray::{Array1, Array2, Axis, s};
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_matrix;
use crate::common::random_vec;
use crate::common::trial::{Target, global_trial, plain_trials, trial};

/// Simulator lengths: past one tree block (257, 1025: two and three tree passes) and past one
/// vector block's tile of 4096 floats (9001: the two-launch path, each block looping), ragged
/// tails of 1 to 3; 70001 loops the 8-vector argmax candidates' blocks (tiles of 8192 floats)
/// on the simulator's grid.
const SIM_LENGTHS: &[usize] = &[1, 3, 4, 7, 33, 257, 1025, 9001, 70_001];
/// CUDA lengths: ragged ones and large ones (each resident block loops several times).
const CUDA_LENGTHS: &[usize] = &[1, 7, 31, 1000, 1025, 4097, 65_537, (1 << 20) + 3, 1 << 22];
/// `(rows, cols)` of the axis reductions in the simulator: the unrolled loops (4 loads of a
/// lane's 32-apart entries: rows of 128 columns and more; columns of 128 rows and more, past the
/// 32 row groups) and their ragged tails, on each side of those lengths; the split plan's
/// boundary (an axis of 1024 entries is one pass, of 1025 two spans on either side; 6000
/// columns of 2 rows six spans, the last one short). Along `Axis(1)`, rows of a multiple of 4
/// columns up to 256 take 16-byte loads (`*_rows_vec`) with 1 (16 columns), 2 (24, 32), 4 (64),
/// 8 (128) and 16 (256) lanes per row (300 and 1024: a warp per row); the others a thread per
/// row up to 23 columns (`*_rows_narrow`), a warp per 4 rows from 25 to 127 (`*_rows_short`: 66
/// beside the vector kernel's 64) and a warp per row from 129. Along `Axis(0)`, a thread per column
/// (`*_cols_narrow`) with fewer than 128 rows (127 x 2 against 128 x 2) or, in the simulator's
/// residency, 128 columns and more (130 x 128 against 130 x 127).
const SIM_AXIS: &[(usize, usize)] = &[
    (1, 1),
    (1, 70),
    (9, 1),
    (13, 33),
    (40, 7),
    (3, 300),
    (300, 5),
    (161, 45),
    (2, 127),
    (127, 2),
    (3, 1024),
    (3, 1025),
    (1024, 3),
    (1025, 3),
    (2, 6000),
    (33, 16),
    (17, 32),
    (300, 23),
    (300, 24),
    (301, 25),
    (45, 64),
    (45, 66),
    (61, 128),
    (61, 129),
    (20, 256),
    (128, 2),
    (130, 127),
    (130, 128),
];
/// `(rows, cols)` of the axis reductions on CUDA: one pass on both sides (1000 x 1000), the
/// split plan (too few outputs to fill an H200: two spans at 7 x
/// 1025 and 1025 x 7, five at 4097 x 33, hundreds on the rest, their last span short), along
/// `Axis(1)` 16-byte loads with 1, 2 and 8 lanes a row (16, 24, 128 columns), a thread per row
/// of 5, 7 and 23 columns, a warp per 4 rows of 25 and 33 columns and a warp per row of 129, and
/// along `Axis(0)` a thread per column with fewer than 128 rows (7 x 1025, 3 x 2^18, 5 x (2^20 +
/// 3)) or a quarter of an H200's resident threads (200 x 100000; its rows split into spans).
const CUDA_AXIS: &[(usize, usize)] = &[
    (1, 1),
    (7, 1025),
    (1025, 7),
    (1000, 1000),
    (4097, 33),
    (3, 1 << 18),
    (5, (1 << 20) + 3),
    ((1 << 20) + 3, 5),
    (100_003, 16),
    (100_003, 23),
    (100_003, 24),
    (100_003, 25),
    (4097, 128),
    (4097, 129),
    (200, 100_000),
];

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, SIM_LENGTHS, SIM_AXIS);
    trials.extend(backend_trials(cuda, CUDA_LENGTHS, CUDA_AXIS));
    trials.push(trial(cuda, "reduce::sum_error_2p24", |gpu, rng| {
        sum_error(gpu, rng, 1 << 24)
    }));
    trials.push(global_trial("reduce", global_reduce));
    trials.extend(plain_trials!(
        "reduce",
        [
            argmax_combine_is_commutative_and_associative,
            empty_inputs_follow_the_rules,
        ]
    ));
    trials
}

/// One backend's trials.
fn backend_trials(
    target: &Target,
    lengths: &'static [usize],
    shapes: &'static [(usize, usize)],
) -> Vec<Trial> {
    let mut trials = Vec::new();
    for &n in lengths {
        trials.push(trial(target, &format!("reduce::len_{n}"), move |gpu, rng| {
            reduce_vector(gpu, &random_vec(rng, n), &format!("random, n = {n}"))
        }));
        trials.push(trial(
            target,
            &format!("reduce::exact_len_{n}"),
            move |gpu, rng| sum_exact(gpu, rng, n),
        ));
    }
    trials.push(trial(target, "reduce::rules", |gpu, _| rules(gpu)));
    for &(rows, cols) in shapes {
        trials.push(trial(
            target,
            &format!("reduce::axis_{rows}x{cols}"),
            move |gpu, rng| axis_reductions(gpu, rng, rows, cols),
        ));
    }
    trials
}

/// The bound on the f32 sum's error this crate documents for [`Gpu::sum`]: `k * 2^-24 * sum |x|`
/// with `k` the longest chain of additions, here at most `n / (4 * 132 * 256) + 64` (a grid of at
/// least one block per multiprocessor of an H200-sized GPU, four running sums per thread, plus
/// the trees; the tree rung's chain is shorter).
fn sum_bound(x: &[f32]) -> f64 {
    let chain = x.len() as f64 / (4.0 * 132.0 * 256.0) + 64.0;
    let abs: f64 = x.iter().map(|&v| f64::from(v).abs()).sum();
    chain * f64::from(f32::EPSILON) / 2.0 * abs
}

/// Whole numbers in {-2, -1, 1, 2} (never 0, so a dropped or doubled element always moves the
/// sum): every partial sum of up to 2^22 of them is a whole number below
/// 2^24 in magnitude, exact in f32 whatever the order, so every algorithm's sum must equal the
/// exact one. [`sum_bound`] is the worst case for rounding, loose enough at large `n` to let a
/// dropped or doubled element through; this check is not.
fn sum_exact(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let x: Vec<f32> = (0..n)
        .map(|_| [-2.0, -1.0, 1.0, 2.0][rng.random_range(0..4usize)])
        .collect();
    let d = gpu.upload(&x)?;
    let exact = cpu::sum_f64(&x);
    let mut failures = Vec::new();
    for algorithm in ReduceAlgorithm::ALL {
        let got = gpu.sum_with(&d, algorithm)?;
        if f64::from(got) != exact {
            failures.push(format!(
                "sum_with({}) of {n} whole numbers in {{-2, -1, 1, 2}}: {got}, exactly {exact}",
                algorithm.name()
            ));
        }
    }
    all_passed(failures)
}

/// Every reduction of `x`, every algorithm, against the references: sums within
/// [`sum_bound`] (and the same bits on a second run), maxima and argmax exact.
fn reduce_vector(gpu: &Gpu, x: &[f32], what: &str) -> Check {
    let d = gpu.upload(x)?;
    let exact = cpu::sum_f64(x);
    let bound = sum_bound(x);
    let mut failures = Vec::new();
    for algorithm in ReduceAlgorithm::ALL {
        let name = algorithm.name();
        let got = gpu.sum_with(&d, algorithm)?;
        let err = (f64::from(got) - exact).abs();
        // NaN sums are compared as NaN (an input with a NaN or opposite infinities).
        let ok = if exact.is_nan() {
            got.is_nan()
        } else if exact.is_infinite() {
            f64::from(got) == exact
        } else {
            err <= bound
        };
        if !ok {
            failures.push(format!(
                "sum_with({name}), {what}: {got} vs {exact} (error {err:e} > bound {bound:e})"
            ));
        }
        let again = gpu.sum_with(&d, algorithm)?;
        if again.to_bits() != got.to_bits() {
            failures.push(format!(
                "sum_with({name}), {what}: {got} then {again} on a second run"
            ));
        }
        if !x.is_empty() {
            let got = gpu.max_with(&d, algorithm)?;
            let want = cpu::max(x).ok_or("cpu::max of a non-empty vector")?;
            if !(got == want || got.is_nan() && want.is_nan()) {
                failures.push(format!("max_with({name}), {what}: {got} vs {want}"));
            }
        }
    }
    if !x.is_empty() {
        let got = gpu.argmax(&d)?;
        let want = cpu::argmax(x).ok_or("cpu::argmax of a non-empty vector")?;
        if got != want {
            failures.push(format!(
                "argmax, {what}: {got} vs {want} (values {} and {})",
                x[got.min(x.len() - 1)],
                x[want]
            ));
        }
        // The device-resident forms, into outputs of length 1.
        let mut out = gpu.upload(&[f32::NAN])?;
        gpu.sum_into_with(&d, &mut out, ReduceAlgorithm::default())?;
        let into = out.to_vec()?[0];
        let plain = gpu.sum(&d)?;
        if into.to_bits() != plain.to_bits() {
            failures.push(format!("sum_into_with, {what}: {into} vs sum {plain}"));
        }
        let mut index = gpu.zeros_of::<u32>(1)?;
        gpu.argmax_into(&d, &mut index)?;
        if index.to_vec()?[0] as usize != want {
            failures.push(format!("argmax_into, {what}: {:?} vs {want}", index.to_vec()?));
        }
        // Every first-pass kernel, into a poisoned index.
        for algorithm in ArgmaxAlgorithm::ALL {
            let mut index = gpu.upload(&[u32::MAX - 1])?;
            gpu.argmax_into_with(&d, &mut index, algorithm)?;
            let got = index.to_vec()?[0] as usize;
            if got != want {
                failures.push(format!(
                    "argmax_into_with({}), {what}: {got} vs {want}",
                    algorithm.name()
                ));
            }
        }
    }
    all_passed(failures)
}

/// Planted inputs for the rules: NaN (the first wins argmax, max is NaN), ties (the first
/// index), `+-inf`, all `-inf`, signed zeros; at lengths that put the planted entries in
/// different blocks, warps, lanes of a vector and the scalar tail.
fn rules(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    let mut case = |x: Vec<f32>, what: String| {
        if let Err(e) = reduce_vector(gpu, &x, &what) {
            failures.push(e.to_string());
        }
    };
    for n in [1usize, 5, 33, 1027, 9001] {
        let base: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let last = n - 1;
        let mid = n / 2;
        let mut x = base.clone();
        x[last] = f32::NAN;
        x[mid] = f32::NAN;
        case(x, format!("NaN at {mid} and {last}, n = {n}"));
        let mut x = base.clone();
        x[last] = 2.0;
        x[mid] = 2.0;
        case(x, format!("ties at {mid} and {last}, n = {n}"));
        let mut x = base.clone();
        x[last] = f32::INFINITY;
        x[0] = f32::NEG_INFINITY;
        case(x, format!("+inf at {last}, -inf at 0, n = {n}"));
        case(vec![f32::NEG_INFINITY; n], format!("all -inf, n = {n}"));
        let mut x = vec![-1.0f32; n];
        x[last] = 0.0;
        x[mid] = -0.0;
        case(x, format!("-0.0 at {mid}, 0.0 at {last}, n = {n}"));
        let mut x = vec![f32::INFINITY; n];
        x[mid] = f32::NEG_INFINITY;
        case(x, format!("+inf and -inf (sum NaN when both), n = {n}"));
    }
    all_passed(failures)
}

/// `sum_axis`, `max_axis` and `argmax_axis` along both axes of a random matrix against `cpu`'s:
/// the sums within the bound of [`sum_bound`] of each row or column, the maxima and indices
/// exact; planted in the matrix first, so that each rule meets both kernels: a tie of the
/// largest value in row 0 and column 0 (the first index wins), a NaN in the last row and column
/// (it wins), `-0.0` before `0.0` in row 1, its other entries `-1`, and row 2 and column 1
/// entirely `-inf` (index 0). Then the whole matrix `-inf`: every index 0, every maximum `-inf`,
/// on the same plan. A bad axis is refused.
fn axis_reductions(gpu: &Gpu, rng: &mut StdRng, rows: usize, cols: usize) -> Check {
    let mut m = random_matrix(rng, rows, cols);
    let (last_r, last_c) = (rows - 1, cols - 1);
    // A tie: the largest value again later in row 0 and in column 0.
    m[[0, 0]] = 2.0;
    m[[0, last_c]] = 2.0;
    m[[last_r, 0]] = 2.0;
    if rows > 2 && cols > 2 {
        // A NaN in the last row and column (past the tie's lanes), and a lane of signed zeros.
        m[[last_r, last_c]] = f32::NAN;
        for c in 0..cols {
            m[[1, c]] = if c == cols / 2 { -0.0 } else { -1.0 };
        }
        m[[1, last_c - 1]] = 0.0;
    }
    if rows > 3 && cols > 3 {
        // A row and a column of nothing but `-inf`, past the other plants' entries.
        m.row_mut(2).fill(f32::NEG_INFINITY);
        m.column_mut(1).fill(f32::NEG_INFINITY);
    }
    axis_maxima_of(gpu, &Array2::from_elem((rows, cols), f32::NEG_INFINITY))?;
    let d = gpu.upload_matrix(&m)?;
    for axis in [Axis(0), Axis(1)] {
        let what = format!("({axis:?}) of {rows}x{cols}");
        let got = gpu.sum_axis(&d, axis)?.to_vec()?;
        let want = cpu::sum_axis(&m, axis);
        let lanes: Vec<Vec<f32>> = m.lanes(axis).into_iter().map(|l| l.to_vec()).collect();
        check_dim(&format!("sum_axis{what}"), got.len(), want.len())?;
        for (i, lane) in lanes.iter().enumerate() {
            if lane.iter().any(|v| v.is_nan()) {
                if !got[i].is_nan() {
                    return Err(
                        format!("sum_axis{what}, output {i}: {} for a lane with a NaN", got[i]).into(),
                    );
                }
                continue;
            }
            if want[i].is_infinite() {
                // A lane with `-inf` entries (and no `+inf`) sums to `-inf` exactly.
                if got[i] != want[i] {
                    return Err(format!("sum_axis{what}, output {i}: {} vs {}", got[i], want[i]).into());
                }
                continue;
            }
            let err = (f64::from(got[i]) - f64::from(want[i])).abs();
            // One f32 rounding of the reference on top of the documented bound.
            let bound = sum_bound(lane) + f64::from(want[i].abs()) * f64::from(f32::EPSILON);
            if !within(err, bound) {
                return Err(format!(
                    "sum_axis{what}, output {i}: {} vs {} (error {err:e} > {bound:e})",
                    got[i], want[i]
                )
                .into());
            }
        }
        let got = gpu.max_axis(&d, axis)?.to_vec()?;
        let want = cpu::max_axis(&m, axis).ok_or("empty axis")?;
        check_dim(&format!("max_axis{what}"), got.len(), want.len())?;
        for (i, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
            // Exact; `-0.0` and `0.0` are equal (which of them a tie gives is not specified).
            if g != w && !(g.is_nan() && w.is_nan()) {
                return Err(format!("max_axis{what}, output {i}: {g} vs {w}").into());
            }
        }
        let got: Vec<usize> = gpu
            .argmax_axis(&d, axis)?
            .to_vec()?
            .into_iter()
            .map(|i| i as usize)
            .collect();
        let want = cpu::argmax_axis(&m, axis).ok_or("empty axis")?;
        if got != want.to_vec() {
            let i = got.iter().zip(want.iter()).position(|(g, w)| g != w).unwrap_or(0);
            return Err(format!(
                "argmax_axis{what}, output {i}: {:?} vs {:?} (lane {:?})",
                got.get(i),
                want.get(i),
                lanes.get(i)
            )
            .into());
        }
    }
    match (
        gpu.sum_axis(&d, Axis(2)),
        gpu.max_axis(&d, Axis(2)),
        gpu.argmax_axis(&d, Axis(2)),
    ) {
        (
            Err(Error::InvalidArgument { .. }),
            Err(Error::InvalidArgument { .. }),
            Err(Error::InvalidArgument { .. }),
        ) => Ok(()),
        (a, b, c) => Err(format!(
            "Axis(2) gave {:?}, {:?}, {:?}",
            a.map(|v| v.len()),
            b.map(|v| v.len()),
            c.map(|v| v.len())
        )
        .into()),
    }
}

/// `max_axis` and `argmax_axis` of `m` along both axes against `cpu`'s, exactly: for a matrix
/// whose lanes hold no larger value than `-inf`, where a lane's argmax is its first index.
fn axis_maxima_of(gpu: &Gpu, m: &Array2<f32>) -> Check {
    let d = gpu.upload_matrix(m)?;
    for axis in [Axis(0), Axis(1)] {
        let what = format!("({axis:?}) of {}x{} -inf", m.nrows(), m.ncols());
        let got = gpu.max_axis(&d, axis)?.to_vec()?;
        let want = cpu::max_axis(m, axis).ok_or("empty axis")?;
        if got != want.to_vec() {
            return Err(format!(
                "max_axis{what}: {:?} vs {:?}",
                &got[..got.len().min(8)],
                want.get(0)
            )
            .into());
        }
        let got: Vec<usize> = gpu
            .argmax_axis(&d, axis)?
            .to_vec()?
            .into_iter()
            .map(|i| i as usize)
            .collect();
        let want = cpu::argmax_axis(m, axis).ok_or("empty axis")?;
        check_dim(&format!("argmax_axis{what}"), got.len(), want.len())?;
        if let Some(i) = got.iter().zip(want.iter()).position(|(g, w)| g != w) {
            return Err(format!("argmax_axis{what}, output {i}: {} vs {}", got[i], want[i]).into());
        }
    }
    Ok(())
}

/// The f32 sum of `n` values in [0, 1) (where a naive running f32 sum would be off by far more
/// than the bound) and in [-1, 1): within [`sum_bound`] of the f64 sum, the same bits on five
/// runs, for every algorithm.
fn sum_error(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let positive: Vec<f32> = (0..n).map(|_| rng.random_range(0.0f32..1.0)).collect();
    let signed = random_vec(rng, n);
    let mut failures = Vec::new();
    for (what, x) in [("[0, 1)", &positive), ("[-1, 1)", &signed)] {
        let d = gpu.upload(x)?;
        let exact = cpu::sum_f64(x);
        let bound = sum_bound(x);
        for algorithm in ReduceAlgorithm::ALL {
            let first = gpu.sum_with(&d, algorithm)?;
            let err = (f64::from(first) - exact).abs();
            println!(
                "sum_with({}) of 2^24 in {what}: {first} vs {exact}: error {err:.3e}, bound {bound:.3e}",
                algorithm.name()
            );
            if !within(err, bound) {
                failures.push(format!(
                    "sum_with({}) in {what}: error {err:e} > {bound:e}",
                    algorithm.name()
                ));
            }
            for _ in 0..4 {
                let again = gpu.sum_with(&d, algorithm)?;
                if again.to_bits() != first.to_bits() {
                    failures.push(format!(
                        "sum_with({}) in {what}: {first} then {again}",
                        algorithm.name()
                    ));
                }
            }
        }
        let want = cpu::argmax(x).ok_or("empty")?;
        let got = gpu.argmax(&d)?;
        if got != want {
            failures.push(format!("argmax in {what}: {got} vs {want}"));
        }
    }
    all_passed(failures)
}

/// `gpukern::sum`, `max`, `argmax` (flattened, row-major order), `sum_axis` on 1-D, 2-D,
/// transposed and sliced views.
fn global_reduce(rng: &mut StdRng) -> Check {
    let v = Array1::from(random_vec(rng, 1001));
    let m = random_matrix(rng, 37, 29);
    let views = [
        ("1-D", logical(&v.view().into_dyn())),
        ("2-D", logical(&m.view().into_dyn())),
        ("transposed", logical(&m.t().into_dyn())),
        ("sliced", logical(&m.slice(s![3..30, ..;3]).into_dyn())),
    ];
    let got = [
        (gpukern::sum(&v)?, gpukern::max(&v)?, gpukern::argmax(&v)?),
        (gpukern::sum(&m)?, gpukern::max(&m)?, gpukern::argmax(&m)?),
        (
            gpukern::sum(&m.t())?,
            gpukern::max(&m.t())?,
            gpukern::argmax(&m.t())?,
        ),
        (
            gpukern::sum(&m.slice(s![3..30, ..;3]))?,
            gpukern::max(&m.slice(s![3..30, ..;3]))?,
            gpukern::argmax(&m.slice(s![3..30, ..;3]))?,
        ),
    ];
    for ((what, x), (sum, max, argmax)) in views.iter().zip(got) {
        let err = (f64::from(sum) - cpu::sum_f64(x)).abs();
        if !within(err, sum_bound(x)) {
            return Err(format!("gpukern::sum {what}: {sum} vs {}", cpu::sum_f64(x)).into());
        }
        if Some(max) != cpu::max(x) || Some(argmax) != cpu::argmax(x) {
            return Err(format!(
                "gpukern::max/argmax {what}: {max}, {argmax} vs {:?}, {:?}",
                cpu::max(x),
                cpu::argmax(x)
            )
            .into());
        }
    }
    for axis in [Axis(0), Axis(1)] {
        for (what, view) in [
            ("2-D", m.view()),
            ("transposed", m.t()),
            ("sliced", m.slice(s![1.., ..;2])),
        ] {
            let got = gpukern::sum_axis(&view, axis)?;
            let want = cpu::sum_axis(&view, axis);
            check_abs(
                &format!("gpukern::sum_axis({axis:?}) {what}"),
                got.as_slice().ok_or("layout")?,
                want.as_slice().ok_or("layout")?,
                1e-5,
            )?;
            let got = gpukern::max_axis(&view, axis)?;
            let want = cpu::max_axis(&view, axis).ok_or("empty")?;
            if got != want {
                return Err(format!("gpukern::max_axis({axis:?}) {what}: {got} vs {want}").into());
            }
            let got = gpukern::argmax_axis(&view, axis)?;
            let want = cpu::argmax_axis(&view, axis).ok_or("empty")?;
            if got != want {
                return Err(format!("gpukern::argmax_axis({axis:?}) {what}: {got} vs {want}").into());
            }
        }
    }
    Ok(())
}

fn argmax_combine_is_commutative_and_associative() {
    let values = [f32::NAN, f32::NEG_INFINITY, -1.0, -0.0, 0.0, 1.0, f32::INFINITY];
    let mut items = Vec::new();
    for (i, &value) in values.iter().enumerate() {
        for index in [i as u32, 100 + i as u32] {
            items.push(Best { value, index });
        }
    }
    items.push(Best::NONE);
    let same =
        |a: Best, b: Best| a.index == b.index && (a.value == b.value || a.value.is_nan() && b.value.is_nan());
    for &a in &items {
        for &b in &items {
            assert!(same(argmax_combine(a, b), argmax_combine(b, a)), "{a:?} {b:?}");
            for &c in &items {
                let left = argmax_combine(argmax_combine(a, b), c);
                let right = argmax_combine(a, argmax_combine(b, c));
                assert!(same(left, right), "{a:?} {b:?} {c:?}: {left:?} vs {right:?}");
            }
        }
    }
    // The rule itself: NaN first, then the larger, then the lower index.
    let nan = Best {
        value: f32::NAN,
        index: 9,
    };
    let inf = Best {
        value: f32::INFINITY,
        index: 1,
    };
    assert_eq!(argmax_combine(inf, nan).index, 9);
    let zero = Best { value: 0.0, index: 4 };
    let negzero = Best {
        value: -0.0,
        index: 2,
    };
    assert_eq!(argmax_combine(zero, negzero).index, 2);
    assert_eq!(kr::VEC_BLOCK % 32, 0);
}

fn empty_inputs_follow_the_rules() {
    let gpu = Gpu::simulator();
    let empty = gpu.upload::<f32>(&[]).unwrap();
    for algorithm in ReduceAlgorithm::ALL {
        assert_eq!(gpu.sum_with(&empty, algorithm).unwrap(), 0.0);
        assert!(matches!(
            gpu.max_with(&empty, algorithm),
            Err(Error::InvalidArgument { .. })
        ));
    }
    assert!(matches!(gpu.argmax(&empty), Err(Error::InvalidArgument { .. })));
    assert!(matches!(
        gpukern::argmax(&Array1::<f32>::zeros(0)),
        Err(Error::InvalidArgument { .. })
    ));
    let m = gpu.upload_matrix(&ndarray::Array2::<f32>::zeros((3, 0))).unwrap();
    assert_eq!(gpu.sum_axis(&m, Axis(1)).unwrap().to_vec().unwrap(), vec![0.0; 3]);
    assert!(gpu.sum_axis(&m, Axis(0)).unwrap().is_empty());
    // An empty axis has no maximum where there is an output; no outputs, no error.
    assert!(matches!(
        gpu.max_axis(&m, Axis(1)),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        gpu.argmax_axis(&m, Axis(1)),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(gpu.max_axis(&m, Axis(0)).unwrap().is_empty());
    assert!(gpu.argmax_axis(&m, Axis(0)).unwrap().is_empty());
    assert!(matches!(
        gpukern::max_axis(&ndarray::Array2::<f32>::zeros((0, 4)), Axis(0)),
        Err(Error::InvalidArgument { .. })
    ));
    // An output of the wrong length is refused.
    let x = gpu.upload(&[1.0f32, 2.0]).unwrap();
    let mut two = gpu.upload(&[0.0f32, 0.0]).unwrap();
    assert!(matches!(
        gpu.sum_into_with(&x, &mut two, ReduceAlgorithm::Vec4),
        Err(Error::InvalidArgument { .. })
    ));
}
