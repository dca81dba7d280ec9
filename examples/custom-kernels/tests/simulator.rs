//! The example's kernels, tested as a user would test their own, without a GPU: each kernel in
//! the simulator against a CPU reference on ragged sizes; a planted race and a planted
//! out-of-bounds write in user kernels reported with kernel, block, thread and index; and the
//! PTX that `build.rs` compiled assembled by ptxas without spills. (On a GPU, `cargo run`
//! checks every kernel on the device too.)

use gpukern::{Error, Gpu, LaunchConfig, Module, PtxSet};
use gpukern_device::sim::{Access, Dim3, SimError, Space, Violation};

static KERNELS: PtxSet = gpukern::include_ptx!(kernels);

/// The example's kernels in the simulator.
fn simulator() -> Module {
    Gpu::simulator()
        .load(&KERNELS)
        .expect("a simulator module needs no PTX")
}

fn linear(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (n.div_ceil(block as usize).max(1) as u32, 1, 1),
        block: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[test]
fn increment_by_one_adds_one_to_each_element_and_nothing_past_n() {
    let module = simulator();
    for n in [1, 255, 257, 1000] {
        // Two elements past `n` that the kernel must not touch.
        let host: Vec<f32> = (0..n + 2).map(|i| i as f32).collect();
        let mut x = module.gpu().upload(&host).unwrap();
        unsafe { kernels::increment_by_one::launch(&module, linear(n, 256), &mut x, n) }.unwrap();
        let got = x.to_vec().unwrap();
        let expected: Vec<f32> = (0..n + 2)
            .map(|i| i as f32 + if i < n { 1.0 } else { 0.0 })
            .collect();
        assert_eq!(got, expected, "n = {n}");
    }
}

#[test]
fn grayscale_matches_the_integer_formula_on_a_ragged_image() {
    let module = simulator();
    let (width, height) = (37, 19);
    let rgb: Vec<u8> = (0..3 * width * height).map(|i| (i * 91 % 256) as u8).collect();
    let input = module.gpu().upload(&rgb).unwrap();
    let mut gray = module.gpu().zeros_of::<u8>(width * height).unwrap();
    let config = LaunchConfig {
        grid: (width.div_ceil(16) as u32, height.div_ceil(16) as u32, 1),
        block: (16, 16, 1),
        shared_mem_bytes: 0,
    };
    unsafe { kernels::grayscale::launch(&module, config, &input, &mut gray, width, height) }.unwrap();
    let expected: Vec<u8> = rgb
        .chunks(3)
        .map(|p| ((77 * p[0] as u32 + 150 * p[1] as u32 + 29 * p[2] as u32 + 128) >> 8) as u8)
        .collect();
    assert_eq!(gray.to_vec().unwrap(), expected);
}

#[test]
fn block_sum_gives_each_block_its_sum_with_no_shared_memory_asked_for() {
    let module = simulator();
    let n = 1000; // 3 full blocks of 256 and a ragged one.
    let host: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let x = module.gpu().upload(&host).unwrap();
    let mut partial = module.gpu().zeros(4).unwrap();
    // The launch asks for no shared memory: the kernel declares its 1 KiB array, and the
    // launcher adds it (the simulator would report an access past the window otherwise).
    unsafe { kernels::block_sum::launch(&module, linear(n, 256), &x, &mut partial, n) }.unwrap();
    let expected: Vec<f32> = host.chunks(256).map(|c| c.iter().sum()).collect();
    assert_eq!(partial.to_vec().unwrap(), expected);
    assert_eq!(kernels::block_sum::KERNEL.facts.shared_bytes, 256 * 4);
}

/// `kernels::scale::<T>` against the f32 product rounded once to `T`, on a ragged length.
fn scale_of<T>(of: fn(f32) -> T)
where
    T: gpukern::Element + gpukern::gpukern_device::convert::Float + PartialEq + std::fmt::Debug,
    kernels::scale<T>: gpukern::gpukern_device::launch::Instance,
{
    let module = simulator();
    let n = 1001;
    let host: Vec<T> = (0..n).map(|i| of(i as f32 / 7.0 - 50.0)).collect();
    let x = module.gpu().upload(&host).unwrap();
    let mut y = module.gpu().zeros_of::<T>(n + 3).unwrap();
    unsafe { kernels::scale::<T>::launch(&module, linear(n, 256), &x, &mut y, -2.5, n) }.unwrap();
    let got = y.to_vec().unwrap();
    let want: Vec<T> = host.iter().map(|&v| of(v.to_f32() * -2.5)).collect();
    assert_eq!(&got[..n], &want[..]);
    // Nothing past `n`.
    assert_eq!(&got[n..], &[of(0.0); 3]);
}

#[test]
fn scale_is_one_generic_kernel_for_three_element_types() {
    scale_of::<f32>(|v| v);
    scale_of::<gpukern::bf16>(gpukern::bf16::from_f32);
    scale_of::<gpukern::f16>(gpukern::f16::from_f32);
    // One PTX entry per instance, in the registry with its facts.
    let names: Vec<&str> = gpukern::gpukern_device::launch::registered_in("kernels")
        .iter()
        .map(|k| k.name)
        .filter(|n| n.starts_with("scale"))
        .collect();
    assert_eq!(names, ["scale_bf16", "scale_f16", "scale_f32"]);
    assert_eq!(kernels::scale_bf16::KERNEL.facts.barriers, Some(0));
}

mod planted {
    use gpukern_device::shared::Array;
    use gpukern_device::{kernel, mem, thread};

    /// `block_sum`'s load into its shared array, with the array one element short of the block.
    ///
    /// # Safety
    /// None: thread 255 writes past the array.
    #[kernel(shared(sums: Array<f32, 255>))]
    pub unsafe fn shared_array_too_short(x: *const f32) {
        let tid = thread::thread_idx_x() as usize;
        unsafe { sums.store(tid, mem::load(x, tid)) }
    }

    /// The histogram with a plain read-modify-write instead of the atomic.
    ///
    /// # Safety
    /// As `kernels::histogram`.
    #[kernel]
    pub unsafe fn histogram_plain(x: *const u32, bins: *mut u32, n: usize, nbins: u32) {
        let i = thread::index_1d();
        if i < n {
            unsafe {
                let bin = (mem::load(x, i) % nbins) as usize;
                mem::store(bins, bin, mem::load(bins, bin) + 1);
            }
        }
    }

    /// `increment_by_one` without its `if i < n` guard.
    ///
    /// # Safety
    /// None: it writes past `x` whenever the grid has more threads than `x` has elements.
    #[kernel]
    pub unsafe fn increment_unguarded(x: *mut f32, n: usize) {
        let _ = n;
        let i = thread::index_1d();
        unsafe { mem::store(x, i, mem::load(x, i) + 1.0) }
    }
}

/// Planted kernels live in this test crate, so the module is this crate's, with no PTX.
fn planted_module() -> Module {
    Gpu::simulator()
        .load(&PtxSet::simulator_only(env!("CARGO_CRATE_NAME")))
        .unwrap()
}

fn report_of(result: gpukern::Result<()>) -> SimError {
    match result {
        Err(Error::Simulator(report)) => {
            println!("{report}");
            report
        }
        other => panic!("the simulator should have caught the planted bug, got {other:?}"),
    }
}

#[test]
fn a_histogram_without_atomics_is_reported_as_a_global_race() {
    let module = planted_module();
    let host = vec![3u32; 64];
    let x = module.gpu().upload(&host).unwrap();
    let mut bins = module.gpu().zeros_of::<u32>(16).unwrap();
    let report = report_of(unsafe {
        planted::histogram_plain::launch(&module, linear(64, 32), &x, &mut bins, 64, 16)
    });
    assert_eq!(report.kernel, "histogram_plain");
    assert_eq!(report.block, Dim3::new(0, 0, 0));
    assert!(
        matches!(&report.violation, Violation::GlobalRace { buffer, index: 3, .. } if buffer == "bins"),
        "{report}"
    );
}

#[test]
fn an_unguarded_increment_is_reported_out_of_bounds_at_the_first_index_past_the_end() {
    let module = planted_module();
    let mut x = module.gpu().upload(&[0.0f32; 100]).unwrap();
    let report =
        report_of(unsafe { planted::increment_unguarded::launch(&module, linear(100, 64), &mut x, 100) });
    assert_eq!(report.kernel, "increment_unguarded");
    assert_eq!(
        (report.block, report.thread),
        (Dim3::new(1, 0, 0), Dim3::new(36, 0, 0))
    );
    assert_eq!(
        report.violation,
        Violation::OutOfBounds {
            space: Space::Global,
            buffer: "x".into(),
            access: Access::Read,
            index: 100,
            len: 100,
        }
    );
}

#[test]
fn a_typed_shared_array_indexed_past_its_extent_is_reported() {
    let module = planted_module();
    let x = module.gpu().upload(&[1.0f32; 256]).unwrap();
    let report = report_of(unsafe { planted::shared_array_too_short::launch(&module, linear(256, 256), &x) });
    assert_eq!(report.kernel, "shared_array_too_short");
    assert_eq!(report.thread, Dim3::new(255, 0, 0));
    assert!(
        matches!(&report.violation, Violation::Panic { message } if message.contains("shared array index 255 is past its extent 255")),
        "{report}"
    );
}

#[test]
fn a_bad_launch_is_an_error_before_anything_runs() {
    let module = simulator();
    let mut x = module.gpu().upload(&[0.0f32; 4]).unwrap();
    let too_many_threads = LaunchConfig {
        grid: (1, 1, 1),
        block: (2048, 1, 1),
        shared_mem_bytes: 0,
    };
    let err = unsafe { kernels::increment_by_one::launch(&module, too_many_threads, &mut x, 4) }.unwrap_err();
    assert!(
        matches!(
            err,
            Error::TooLarge {
                op: "increment_by_one",
                ..
            }
        ),
        "{err}"
    );
    let no_blocks = LaunchConfig {
        grid: (0, 1, 1),
        ..linear(4, 32)
    };
    let err = unsafe { kernels::increment_by_one::launch(&module, no_blocks, &mut x, 4) }.unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                op: "increment_by_one",
                ..
            }
        ),
        "{err}"
    );
    // A module of another crate refuses the kernel.
    let other = planted_module();
    let err = unsafe { kernels::increment_by_one::launch(&other, linear(4, 32), &mut x, 4) }.unwrap_err();
    assert!(err.to_string().contains("from crate `kernels`"), "{err}");
}

/// ptxas: the one from `GPUKERN_PTXAS`, the repository's `.tools`, or PATH.
fn ptxas() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::var_os("GPUKERN_PTXAS")
        .map(Into::into)
        .or_else(|| Some(root.join(".tools/ptxas/bin/ptxas")).filter(|p| p.is_file()))
        .expect("ptxas not found: run `bash scripts/test.sh` (it installs it) or set GPUKERN_PTXAS")
}

#[test]
fn the_ptx_assembles_for_every_architecture_without_spills_or_stack() {
    assert!(!KERNELS.modules.is_empty());
    for module in KERNELS.modules {
        let names = gpukern::ptx::entry_names(module.ptx);
        let mut names = names;
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "advance",
                "block_sum",
                "grayscale",
                "hello",
                "histogram",
                "increment_by_one",
                "saxpy",
                "scale_bf16",
                "scale_f16",
                "scale_f32"
            ]
        );
        let file = std::env::temp_dir().join(format!(
            "custom-kernels-{}-{}.ptx",
            module.arch,
            std::process::id()
        ));
        std::fs::write(&file, module.ptx).unwrap();
        let out = std::process::Command::new(ptxas())
            .args(["-v", &format!("-arch={}", module.arch), "-o", "/dev/null"])
            .arg(&file)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&file);
        let report = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ptxas failed for {}: {report}", module.arch);
        for line in report.lines().filter(|l| l.contains("spill")) {
            // `hello` keeps its printf arguments on the stack, as CUDA's printf does; nothing spills.
            assert!(
                line.contains("0 bytes spill stores, 0 bytes spill loads"),
                "{}: {line}",
                module.arch
            );
        }
    }
}
