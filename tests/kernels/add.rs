//! The element-wise family (`add`, `add_into`, `increment_by_one`) against `cpu::add` and
//! `cpu::increment_by_one`: the `Gpu` methods per backend (`{sim,cuda}::add::len_N`,
//! `{sim,cuda}::increment_by_one::len_N`), the free functions on views (`global::add`,
//! `global::increment_by_one`), and `add_vec4` launched straight through the simulator
//! (`sim::add::*`: ragged lengths, a grid smaller than the data, a misaligned buffer reported).

use gpukern::kernels::add as kadd;
use gpukern::kernels::sim::{Launch, Violation};
use gpukern::ops::add::AddAlgorithm;
use gpukern::{Gpu, cpu};
use libtest_mimic::Trial;
use ndarray::{Array1, Array2, ArrayView2, s};
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, global_trial, plain_trials, trial};
use crate::common::{launch_1d, lcg_vec, random_matrix, random_vec};
use crate::sizes::{CUDA_SIZES, SIM_SIZES, Sizes};

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, &SIM_SIZES);
    trials.extend(backend_trials(cuda, &CUDA_SIZES));
    trials.push(global_trial("add", global_add));
    trials.push(global_trial("increment_by_one", global_increment));
    trials.extend(plain_trials!(
        "add",
        [
            add_vec4_is_exact_on_ragged_lengths,
            add_vec4_with_a_grid_smaller_than_the_data_loops,
            increment_tiles_with_a_grid_smaller_than_the_data_loop,
            add_vec4_on_a_misaligned_buffer_is_reported,
        ]
    ));
    trials
}

/// One backend's trials: every length, both operations.
fn backend_trials(target: &Target, sizes: &'static Sizes) -> Vec<Trial> {
    let mut trials = Vec::new();
    for &n in sizes.lengths {
        trials.push(trial(target, &format!("add::len_{n}"), move |gpu, rng| {
            add_vectors(gpu, rng, n)
        }));
        trials.push(trial(
            target,
            &format!("increment_by_one::len_{n}"),
            move |gpu, rng| increment_vector(gpu, rng, n),
        ));
    }
    trials
}

/// `add`, `add_into` and `increment_by_one` must be exact: one IEEE f32 rounding per element, the
/// same on the device as in the reference.
const ELEMENTWISE_MAX_ABS: f64 = 0.0;

/// `add` and `add_into` (into a poisoned output) against `cpu::add`, and the length accessors.
fn add_vectors(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let (a, b) = (random_vec(rng, n), random_vec(rng, n));
    let want = cpu::add(&a, &b)?;
    let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
    if da.len() != n || da.is_empty() != (n == 0) {
        return Err(format!(
            "upload of {n}: len() = {}, is_empty() = {}",
            da.len(),
            da.is_empty()
        )
        .into());
    }
    let mut failures = Vec::new();
    let mut check = |variant: String, got: gpukern::Result<Vec<f32>>| {
        let what = format!("{variant}, n = {n}");
        let result = match got {
            Ok(got) => check_abs(&what, &got, &want, ELEMENTWISE_MAX_ABS),
            Err(e) => Err(format!("{what}: {e}").into()),
        };
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    };
    check("add".into(), gpu.add(&da, &db).and_then(|c| c.to_vec()));
    let into = |algorithm: Option<AddAlgorithm>| -> gpukern::Result<Vec<f32>> {
        let mut c = poisoned_vec(gpu, n)?;
        match algorithm {
            None => gpu.add_into(&da, &db, &mut c)?,
            Some(algorithm) => gpu.add_into_with(&da, &db, &mut c, algorithm)?,
        }
        c.to_vec()
    };
    check("add_into".into(), into(None));
    for algorithm in AddAlgorithm::ALL {
        let name = algorithm.name();
        check(
            format!("add_with({name})"),
            gpu.add_with(&da, &db, algorithm).and_then(|c| c.to_vec()),
        );
        check(format!("add_into_with({name})"), into(Some(algorithm)));
    }
    // A download into a host buffer that already holds other values.
    let mut host = vec![f32::NAN; n];
    let copied = gpu.add(&da, &db).and_then(|c| c.copy_to_host(&mut host));
    check("add, copy_to_host".into(), copied.map(|()| host));
    all_passed(failures)
}

/// `increment_by_one` in place against `cpu::increment_by_one`: twice with the default
/// algorithm, then twice with each algorithm (the scalar tutorial kernel and the 16-byte one).
fn increment_vector(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let x = random_vec(rng, n);
    let want = cpu::increment_by_one(&cpu::increment_by_one(&x));
    let mut failures = Vec::new();
    let run = |what: String, algorithm: Option<AddAlgorithm>| -> Check {
        let mut dx = gpu.upload(&x)?;
        for _ in 0..2 {
            match algorithm {
                None => gpu.increment_by_one(&mut dx)?,
                Some(algorithm) => gpu.increment_by_one_with(&mut dx, algorithm)?,
            }
        }
        check_abs(&what, &dx.to_vec()?, &want, ELEMENTWISE_MAX_ABS)
    };
    let mut cases = vec![(format!("increment_by_one twice, n = {n}"), None)];
    for algorithm in AddAlgorithm::ALL {
        cases.push((
            format!("increment_by_one_with({}) twice, n = {n}", algorithm.name()),
            Some(algorithm),
        ));
    }
    for (what, algorithm) in cases {
        if let Err(e) = run(what, algorithm) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// `gpukern::add` on 1-D, 2-D, transposed and sliced inputs against `cpu::add`.
fn global_add(rng: &mut StdRng) -> Check {
    let (a, b) = (
        Array1::from(random_vec(rng, 37)),
        Array1::from(random_vec(rng, 37)),
    );
    let got = gpukern::add(&a, &b)?;
    check_abs(
        "add 1-D",
        &logical(&got.view()),
        &cpu::add(&logical(&a.view()), &logical(&b.view()))?,
        ELEMENTWISE_MAX_ABS,
    )?;

    let base = random_matrix(rng, 9, 14);
    let other = random_matrix(rng, 14, 9);
    let cases: [(&str, ArrayView2<f32>, ArrayView2<f32>); 4] = [
        ("2-D", base.view(), base.view()),
        ("transposed + contiguous", other.t(), base.view()),
        (
            "sliced ..;2 + contiguous",
            base.slice(s![.., ..;2]),
            other.slice(s![..9, ..7]),
        ),
        ("transposed + sliced", other.t(), base.slice(s![.., ..])),
    ];
    for (what, a, b) in cases {
        let got = gpukern::add(&a, &b)?;
        check_dim(what, got.dim(), a.dim())?;
        let want = cpu::add(&logical(&a), &logical(&b))?;
        check_abs(
            &format!("add {what} {:?}", a.dim()),
            &logical(&got.view()),
            &want,
            ELEMENTWISE_MAX_ABS,
        )?;
    }
    expect_shape_mismatch("add", gpukern::add(&base, &other), &[9, 14], &[14, 9])
}

/// `gpukern::increment_by_one` in place on 1-D, 2-D, transposed and sliced views; elements
/// outside a slice stay as they were.
fn global_increment(rng: &mut StdRng) -> Check {
    let mut x = Array1::from(random_vec(rng, 41));
    let want = cpu::increment_by_one(&logical(&x.view()));
    gpukern::increment_by_one(&mut x)?;
    check_abs(
        "increment_by_one 1-D",
        &logical(&x.view()),
        &want,
        ELEMENTWISE_MAX_ABS,
    )?;

    let original = random_matrix(rng, 6, 10);
    let plus_one = Array2::from_shape_vec((6, 10), cpu::increment_by_one(&logical(&original.view())))?;

    let mut m = original.clone();
    gpukern::increment_by_one(&mut m)?;
    check_abs(
        "increment_by_one 2-D",
        &logical(&m.view()),
        &logical(&plus_one.view()),
        ELEMENTWISE_MAX_ABS,
    )?;

    let mut m = original.clone();
    let mut view = m.view_mut();
    view.swap_axes(0, 1);
    gpukern::increment_by_one(&mut view)?;
    check_abs(
        "increment_by_one transposed",
        &logical(&m.view()),
        &logical(&plus_one.view()),
        ELEMENTWISE_MAX_ABS,
    )?;

    let mut m = original.clone();
    gpukern::increment_by_one(&mut m.slice_mut(s![.., ..;2]))?;
    let mut want = original.clone();
    want.slice_mut(s![.., ..;2]).assign(&plus_one.slice(s![.., ..;2]));
    check_abs(
        "increment_by_one sliced ..;2",
        &logical(&m.view()),
        &logical(&want.view()),
        ELEMENTWISE_MAX_ABS,
    )
}

fn add_vec4_is_exact_on_ragged_lengths() {
    let gpu = Gpu::simulator();
    for n in [1, 3, 4, 5, 7, 1023, 1024, 1025, 4097, 4096 * 3 + 5] {
        let (a, b) = (lcg_vec(n as u64, n), lcg_vec(n as u64 + 1, n));
        let want = cpu::add(&a, &b).unwrap();
        let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
        for algorithm in AddAlgorithm::ALL {
            let got = gpu.add_with(&da, &db, algorithm).unwrap().to_vec().unwrap();
            assert_eq!(got, want, "{} at n = {n}", algorithm.name());
        }
        assert_eq!(
            gpu.add(&da, &db).unwrap().to_vec().unwrap(),
            want,
            "default at n = {n}"
        );
    }
    assert_eq!(AddAlgorithm::default(), AddAlgorithm::Vec4);
}

fn add_vec4_with_a_grid_smaller_than_the_data_loops() {
    // 2 blocks for 10 tiles of 1024 vectors: each thread goes round the grid-stride loop 5
    // times; plus a 3-element tail.
    let n = 4 * 1024 * 10 + 3;
    let (a, b) = (lcg_vec(1, n), lcg_vec(2, n));
    let mut c = vec![0.0f32; n];
    let mut l = Launch::new("add_vec4", launch_1d(2, kadd::BLOCK, 0));
    let (pa, pb, pc) = (l.input("a", &a), l.input("b", &b), l.output("c", &mut c));
    // SAFETY: n floats each; glibc's allocations are 16-byte aligned, checked below.
    assert!(
        [pa as usize, pb as usize, pc as usize]
            .iter()
            .all(|p| p % 16 == 0)
    );
    unsafe { l.run(|| kadd::add_vec4_loop::<false>(pa, pb, pc, n)) }.unwrap();
    assert_eq!(c, cpu::add(&a, &b).unwrap());
}

fn increment_tiles_with_a_grid_smaller_than_the_data_loop() {
    // The one-pass candidates on a grid smaller than the data: 2 blocks of 256 threads x 8
    // vectors, or 1 block of 512 x 4, for 5 tiles plus a ragged tile and a 3-element tail; the
    // full tiles take the unchecked path, the last one the checked path.
    let n = 4 * 2048 * 5 + 4 * 700 + 3;
    let x = lcg_vec(5, n);
    let want = cpu::increment_by_one(&x);
    type Kernel = unsafe fn(*mut f32, usize);
    let cases: [(&str, u32, Kernel); 3] = [
        (
            "increment_by_one_vec4_x8",
            kadd::BLOCK,
            kadd::increment_by_one_vec4_tile::<256, 8, false>,
        ),
        (
            "increment_by_one_vec4_b512",
            kadd::BLOCK_512,
            kadd::increment_by_one_vec4_tile::<512, 4, false>,
        ),
        (
            "increment_by_one_vec4_x4_cs_stores",
            kadd::BLOCK,
            kadd::increment_by_one_vec4_tile::<256, 4, true>,
        ),
    ];
    for (name, block, kernel) in cases {
        let mut got = x.clone();
        let blocks = if block == kadd::BLOCK { 2 } else { 1 };
        let mut l = Launch::new(name, launch_1d(blocks, block, 0));
        let px = l.output("x", &mut got);
        assert_eq!(px as usize % 16, 0, "glibc's allocations are 16-byte aligned");
        // SAFETY: n floats, 16-byte aligned (checked above); blocks of the kernel's size.
        unsafe { l.run(|| kernel(px, n)) }.unwrap();
        assert_eq!(got, want, "{name}");
    }
}

fn add_vec4_on_a_misaligned_buffer_is_reported() {
    // What the host's alignment check prevents: a 16-byte access at a 4-byte aligned address.
    // A float buffer is 4-byte aligned: start the input at the first element whose address is
    // 4 bytes past a 16-byte boundary, so the premise holds by construction (this test used to
    // return early, and pass, when an allocation happened not to be 16-byte aligned).
    let n = 64;
    let mut storage = vec![0.0f32; n + 4];
    let start = (0..4)
        .find(|&i| storage[i..].as_ptr() as usize % 16 == 4)
        .unwrap_or_else(|| panic!("no element 4 bytes past a 16-byte boundary among 4 floats"));
    storage[start..start + n].copy_from_slice(&lcg_vec(3, n));
    let a = &storage[start..start + n];
    assert_eq!(a.as_ptr() as usize % 16, 4, "the premise: a misaligned input");
    let b = lcg_vec(4, n);
    let mut c = vec![0.0f32; n];
    let mut l = Launch::new("add_vec4", launch_1d(1, kadd::BLOCK, 0));
    let (pa, pb, pc) = (l.input("a", a), l.input("b", &b), l.output("c", &mut c));
    // SAFETY: registered buffers of n floats; the misalignment is the planted bug, which the
    // simulator reports before dereferencing.
    let err = unsafe { l.run(|| kadd::add_vec4_loop::<false>(pa, pb, pc, n)) }.unwrap_err();
    println!("{err}");
    assert!(
        matches!(&err.violation, Violation::Panic { message } if message.contains("misaligned")),
        "{err}"
    );
}
