//! The rules at the edges (infinities, all-equal rows, `t = 0`, NaN confined to its row, values
//! near `f32::MAX`) for both [`SoftmaxAlgorithm`]s, with the special entries placed in different
//! lanes, warps and chunks so that every merge of partial statistics sees them; and the row
//! kernels on buffers that start off a 16-byte boundary (straight through the simulator).

use gpukern::kernels::sim::{Launch, LaunchConfig};
use gpukern::kernels::softmax as ksoft;
use gpukern::ops::softmax::OnePassConfig;
use gpukern::{Gpu, SoftmaxAlgorithm, cpu};
use libtest_mimic::Trial;
use ndarray::Array2;

use super::fixtures::*;
use crate::common::trial::plain_trials;
use crate::common::{launch_1d, lcg_matrix, lcg_vec};

/// The trials of this file.
pub(super) fn trials() -> Vec<Trial> {
    plain_trials!(
        "softmax",
        [
            edge_rules_hold_for_block_reduce,
            edge_rules_hold_for_every_one_pass_path,
            nan_stays_in_its_row_on_every_path,
            a_persistent_warp_carries_nothing_from_one_row_to_the_next,
            the_free_function_takes_an_algorithm,
            row_kernels_on_buffers_that_start_off_a_16_byte_boundary,
        ]
    )
}

/// Rows of `cols` entries, each testing one rule; the special entries sit at the first and the
/// last column and in the middle, so that on every path they fall in different lanes, warps and
/// chunks than the bulk of the row.
fn edge_rows(cols: usize) -> Array2<f32> {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let base = lcg_vec(11, cols);
    let mid = cols / 2;
    let mut rows: Vec<Vec<f32>> = Vec::new();
    let with = |points: &[(usize, f32)]| {
        let mut r = base.clone();
        for &(i, v) in points {
            r[i] = v;
        }
        r
    };
    rows.push(base.clone()); // plain
    rows.push(with(&[(0, inf), (cols - 1, inf)])); // +inf entries share the mass
    rows.push(with(&[(mid, inf)])); // one +inf takes it all
    rows.push(vec![3.5; cols]); // all equal: uniform
    rows.push(vec![-inf; cols]); // all -inf: uniform
    rows.push(vec![inf; cols]); // all +inf: uniform
    rows.push(with(&[(0, -inf), (mid, -inf)])); // -inf entries get 0 (share the mass for t < 0)
    rows.push(with(&[(mid, nan)])); // NaN: the whole row NaN
    rows.push(with(&[(0, inf), (cols - 1, -inf), (mid, nan)])); // NaN wins over infinities
    rows.push(
        with(&[(0, -inf), (cols - 1, inf)])
            .iter()
            .map(|&v| if v.is_finite() { -inf } else { v })
            .collect(),
    ); // only infinities
    let big: Vec<f32> = base.iter().map(|&v| v * 3.0e38).collect();
    rows.push(big); // near f32::MAX: t * x would overflow, t * (x - m) must not
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    Array2::from_shape_vec((rows.len(), cols), flat).unwrap()
}

/// Checks the edge rows at every temperature with `run`, against the reference, and the rules
/// themselves on the reference (so that a shared mistake cannot pass).
#[track_caller]
fn check_edges(name: &str, cols: usize, run: impl Fn(&Array2<f32>, f32) -> Array2<f32>) {
    let x = edge_rows(cols);
    for t in TEMPERATURES {
        let want = cpu::softmax_rows(&x, t);
        let got = run(&x, t);
        assert_softmax_close(&format!("{name} edges cols={cols} t={t}"), &got, &want);
        // The rules, on what the kernel returned.
        let n = cols as f32;
        let row = |r: usize| got.row(r).to_vec();
        let uniform = |r: usize| row(r).iter().all(|&v| (v - 1.0 / n).abs() <= 1e-6 / n);
        assert!(
            uniform(3) && uniform(4) && uniform(5),
            "{name} t={t}: all-equal rows are uniform"
        );
        assert!(
            row(7).iter().all(|v| v.is_nan()) && row(8).iter().all(|v| v.is_nan()),
            "{name} t={t}: NaN rows"
        );
        for r in [0, 1, 2, 3, 4, 5, 6, 9, 10] {
            assert!(
                row(r).iter().all(|v| !v.is_nan()),
                "{name} t={t}: row {r} has no NaN"
            );
            let sum: f64 = row(r).iter().map(|&v| f64::from(v)).sum();
            assert!((sum - 1.0).abs() < 1e-5, "{name} t={t}: row {r} sums to {sum}");
        }
        if t == 0.0 {
            assert!(uniform(1) && uniform(2) && uniform(9), "{name}: t = 0 is uniform");
        } else if t > 0.0 && cols > 1 {
            let r1 = row(1);
            assert_eq!(
                (r1[0], r1[cols - 1]),
                (0.5, 0.5),
                "{name} t={t}: two +inf entries"
            );
            assert_eq!(row(2)[cols / 2], 1.0, "{name} t={t}: one +inf entry");
        } else if t < 0.0 && cols > 2 && cols / 2 != 0 {
            let r6 = row(6);
            assert_eq!(
                (r6[0], r6[cols / 2]),
                (0.5, 0.5),
                "{name} t={t}: two -inf entries"
            );
        }
    }
}

fn edge_rules_hold_for_block_reduce() {
    let gpu = Gpu::simulator();
    for cols in [1, 2, 67, 300] {
        check_edges("block-reduce", cols, |x, t| {
            let dx = gpu.upload_matrix(x).unwrap();
            gpu.softmax_with(&dx, t, SoftmaxAlgorithm::BlockReduce)
                .unwrap()
                .to_array()
                .unwrap()
        });
    }
}

fn edge_rules_hold_for_every_one_pass_path() {
    let gpu = Gpu::simulator();
    let paths: [(&str, OnePassConfig, &[usize]); 13] = [
        ("warp", classic(), &[1, 2, 67, 300, 1023]),
        ("group-8", groups(8), &[1, 2, 67, 131]),
        ("group-16", groups(16), &[2, 67]),
        ("persistent-warp", persistent(), &[600, 1023]),
        ("persistent-block-4", persistent_blocks_only(), &[2, 67, 1030]),
        ("persistent-block-8", persistent(), &[8199]),
        ("block-4", blocks_only(), &[2, 67, 1030]),
        ("block-8", classic(), &[8199]),
        ("stream", stream_only(), &[2, 67, 2051]),
        ("split", split_only(8), &[2, 67]),
        ("split", split_only(64), &[301]),
        ("cluster-8", clusters_only(8), &[2, 67, 1030]),
        ("cluster-4", clusters_only(4), &[67, 2051]),
    ];
    for (name, config, widths) in paths {
        for &cols in widths {
            check_edges(name, cols, |x, t| one_pass(&gpu, x, t, &config));
        }
    }
}

fn nan_stays_in_its_row_on_every_path() {
    let gpu = Gpu::simulator();
    for (name, config) in [
        ("warp", classic()),
        ("group-8", groups(8)),
        ("group-16", groups(16)),
        ("persistent-block", persistent_blocks_only()),
        ("block", blocks_only()),
        ("stream", stream_only()),
        ("split", split_only(8)),
        ("cluster", clusters_only(8)),
    ] {
        let mut x = lcg_matrix(5, 9, 45);
        x[(4, 44)] = f32::NAN;
        let y = one_pass(&gpu, &x, 1.0, &config);
        for (r, row) in y.rows().into_iter().enumerate() {
            assert_eq!(row.iter().all(|v| v.is_nan()), r == 4, "{name}: row {r}");
            assert!(r == 4 || row.iter().all(|v| !v.is_nan()), "{name}: row {r}");
        }
    }
}

fn a_persistent_warp_carries_nothing_from_one_row_to_the_next() {
    // 40 rows on the simulator's 16 warps: warp 4 takes rows 4, 20 and 36. Row 4 is NaN, row 20
    // has two +inf entries, row 36 is plain; each must come out as if alone.
    let gpu = Gpu::simulator();
    let mut x = lcg_matrix(6, 40, 600);
    x[(4, 599)] = f32::NAN;
    x[(20, 0)] = f32::INFINITY;
    x[(20, 300)] = f32::INFINITY;
    for t in [1.0, -0.5] {
        let y = one_pass(&gpu, &x, t, &persistent());
        assert_softmax_close(&format!("persistent-warp t={t}"), &y, &cpu::softmax_rows(&x, t));
        for (r, row) in y.rows().into_iter().enumerate() {
            assert_eq!(row.iter().any(|v| v.is_nan()), r == 4, "row {r}");
        }
        if t > 0.0 {
            assert_eq!((y[(20, 0)], y[(20, 300)]), (0.5, 0.5));
        }
    }
}

fn the_free_function_takes_an_algorithm() {
    // The global device is the simulator on a machine without a GPU, CUDA where there is one.
    let x = lcg_matrix(9, 5, 77);
    for algorithm in SoftmaxAlgorithm::ALL {
        let got = gpukern::softmax_with(&x, -1.5, algorithm).unwrap();
        assert_softmax_close(algorithm.name(), &got, &cpu::softmax_rows(&x, -1.5));
    }
}

/// A buffer holding `values` from index `start`, where element `start` lies `4 * pad` bytes past
/// a 16-byte boundary (`pad < 4`): found in the buffer, so it holds whatever alignment the
/// allocator gave (a float buffer is 4-byte aligned, which is all this needs).
fn offset_buffer(values: &[f32], pad: usize) -> (Vec<f32>, usize) {
    let mut buffer = vec![0.0f32; values.len() + 8];
    let base = (0..4)
        .find(|&i| buffer[i..].as_ptr() as usize % 16 == 0)
        .unwrap_or_else(|| panic!("no 16-byte boundary among 4 floats"));
    let start = base + pad;
    buffer[start..start + values.len()].copy_from_slice(values);
    (buffer, start)
}

fn row_kernels_on_buffers_that_start_off_a_16_byte_boundary() {
    type Kernel = unsafe fn(*const f32, *mut f32, usize, usize, f32);
    let (rows, cols) = (5, 70);
    let x = lcg_vec(21, rows * cols);
    let want = cpu::softmax_rows(&Array2::from_shape_vec((rows, cols), x.clone()).unwrap(), 1.0);
    let kernels: [(&str, Kernel, LaunchConfig); 5] = [
        (
            "softmax_group_8x4",
            ksoft::softmax_group::<8, 4>,
            launch_1d((rows as u32).div_ceil(32), 256, 0),
        ),
        (
            "softmax_persist_block_4",
            ksoft::softmax_persist_block::<4>,
            launch_1d(2, 32, ksoft::persist_block_shared_bytes(4, 32)),
        ),
        (
            "softmax_warp_1",
            ksoft::softmax_warp::<1>,
            launch_1d((rows as u32).div_ceil(8), 256, 0),
        ),
        (
            "softmax_block_4",
            ksoft::softmax_block::<4, false>,
            launch_1d(rows as u32, 32, ksoft::STATS_SHARED_BYTES),
        ),
        (
            "softmax_stream",
            ksoft::softmax_stream,
            launch_1d(rows as u32, 64, ksoft::STATS_SHARED_BYTES),
        ),
    ];
    for pad in 1..4 {
        for &(name, kernel, cfg) in &kernels {
            let (xs, x_start) = offset_buffer(&x, pad);
            let (mut ys, y_start) = offset_buffer(&vec![0.0; x.len()], pad);
            let xv = &xs[x_start..x_start + x.len()];
            let yv = &mut ys[y_start..y_start + x.len()];
            assert_eq!(
                xv.as_ptr() as usize % 16,
                4 * pad,
                "the premise: x off a 16-byte boundary"
            );
            assert_eq!(
                yv.as_ptr() as usize % 16,
                4 * pad,
                "the premise: y as x modulo 16"
            );
            let mut l = Launch::new(name, cfg);
            let (px, py) = (l.input("x", xv), l.output("y", yv));
            // SAFETY: rows*cols floats each, at the same address modulo 16; launch shapes as
            // the kernels' doc comments give.
            unsafe { l.run(|| kernel(px, py, rows, cols, 1.0)) }.unwrap();
            let got = Array2::from_shape_vec((rows, cols), yv.to_vec()).unwrap();
            assert_softmax_close(&format!("{name}, base off by {pad} floats"), &got, &want);
        }
    }
}
