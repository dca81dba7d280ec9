//! The simulator, tested two ways.
//!
//! 1. Kernels run through [`Launch`] on small ragged shapes, with the launch shape their doc
//!    comments give, and match an f64 computation: in this crate's `add.rs`, `matmul.rs`,
//!    `matmul_tf32.rs` and `softmax.rs` (what spans families, here). Every entry point of every
//!    family runs in the simulator through gpukern's own suite (the repository's
//!    `tests/kernels/`, whose coverage check fails for an entry no trial launched).
//! 2. Each check is proved on a test-only kernel with one planted bug, written with the same
//!    `gpu` helpers as the real kernels: the report must name the exact violation, kernel, block
//!    and thread. Next to each buggy kernel runs its fixed version, which must pass. One module
//!    per concern: `simulator/shared_memory.rs` (races, unwritten words, bounds),
//!    `simulator/global_memory.rs` (bounds, inputs, unregistered pointers, panics) and
//!    `simulator/barriers.rs`.
//!
//! Then, in this file, the rules of a whole launch: invalid configurations, several failing
//! blocks (the lowest is reported), and `GPUKERN_SIM_THREADS` (the number of OS threads changes
//! nothing).
//!
//! One test binary, not one per module: `sim_threads_env_changes_nothing` reruns this binary
//! (`sim_threads_child`) in a subprocess, and the fingerprint it compares spans the modules'
//! kernels.

#[path = "simulator/barriers.rs"]
mod barriers;
mod common;
#[path = "simulator/global_memory.rs"]
mod global_memory;
#[path = "simulator/shared_memory.rs"]
mod shared_memory;

use std::collections::HashSet;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::matmul::{naive_config, run_matmul, tiled_config};
use common::softmax::{run_softmax, softmax_config};
use common::{assert_report, config, random, report};
use global_memory::iota;
use kernels_gpu::gpu::{mem, thread};
use kernels_gpu::matmul;
use kernels_gpu::sim::{Access, Launch, SimError, Space, Violation};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Threads per block of the planted-bug kernels: small, so that reports name small indices.
const T: u32 = 8;

/// Shared memory for one float per thread of a `T`-thread block.
const T_FLOATS: u32 = T * 4;

/// FNV-1a over the bits of `values`: equal hashes mean bit-identical results.
fn hash(values: &[f32]) -> u64 {
    values.iter().fold(0xcbf2_9ce4_8422_2325, |h, v| {
        (h ^ v.to_bits() as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Runs `f` on another thread and returns its result, failing the test if it takes longer than
/// `seconds` (a simulator that hung at a barrier would otherwise hang the test run).
fn within<R: Send + 'static>(seconds: u64, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(Duration::from_secs(seconds))
        .expect("the launch did not return: the simulator hung")
}

// ---------------------------------------------------------------------------------------------
// Whole launches
// ---------------------------------------------------------------------------------------------

#[test]
fn invalid_launches_are_refused_before_any_thread_runs() {
    let cases = [
        (config((0, 1), (32, 1), 0), "grid (0, 1, 1) has no blocks"),
        (config((4, 0), (32, 1), 0), "grid (4, 0, 1) has no blocks"),
        (config((1, 1), (0, 1), 0), "block (0, 1, 1) has no threads"),
        (
            config((1, 1), (1025, 1), 0),
            "block (1025, 1, 1) has 1025 threads, more than 1024",
        ),
        (
            config((1, 1), (33, 32), 0),
            "block (33, 32, 1) has 1056 threads, more than 1024",
        ),
    ];
    for (cfg, reason) in cases {
        let ran = Mutex::new(false);
        let launch = Launch::new("nothing", cfg);
        let expected = report(
            "nothing",
            (0, 0),
            (0, 0),
            Violation::InvalidLaunch {
                reason: reason.into(),
            },
        );
        // SAFETY: the body touches no kernel memory.
        assert_report(unsafe { launch.run(|| *ran.lock().unwrap() = true) }, expected);
        assert!(!*ran.lock().unwrap(), "a thread of an invalid launch ran");
    }
}

/// Blocks 3, 5 and 6 write past the end of `y` (`4 * gridDim.x` floats); the others write
/// `y[i] = 1`. Block 3 first waits at `slow_rounds` barriers, so blocks 5 and 6 usually fail
/// before it does.
///
/// # Safety
/// `y` holds `4 * gridDim.x` floats; blocks of 4 threads.
unsafe fn fail_in_blocks(y: *mut f32, slow_rounds: u32) {
    let b = thread::block_idx_x();
    let i = thread::index_1d();
    if b == 3 {
        for _ in 0..slow_rounds {
            thread::sync_threads();
        }
    }
    let past_end = 4 * thread::grid_dim_x() as usize;
    // SAFETY: none for blocks 3, 5, 6 (the planted bug).
    unsafe { mem::store(y, if matches!(b, 3 | 5 | 6) { past_end + i } else { i }, 1.0) }
}

/// Runs [`fail_in_blocks`] on 8 blocks of 4 threads.
fn run_fail_in_blocks() -> Result<(), SimError> {
    let mut y = vec![0.0f32; 32];
    let mut launch = Launch::new("fail_in_blocks", config((8, 1), (4, 1), 0));
    let py = launch.output("y", &mut y);
    // SAFETY: `y` holds 32 floats and is registered; the stores past it are caught.
    unsafe { launch.run(|| fail_in_blocks(py, 300)) }
}

#[test]
fn several_failing_blocks_report_the_lowest() {
    let expected = report(
        "fail_in_blocks",
        (3, 0),
        (0, 0),
        Violation::OutOfBounds {
            space: Space::Global,
            buffer: "y".into(),
            access: Access::Write,
            index: 44,
            len: 32,
        },
    );
    for _ in 0..10 {
        assert_report(run_fail_in_blocks(), expected.clone());
    }
}

/// Results of correct and failing launches on several blocks, as one line.
fn fingerprint() -> String {
    let shape @ (m, n, k) = (33, 17, 65);
    let (a, b) = (random(70, m * k), random(71, k * n));
    let naive = run_matmul(
        "matmul_naive",
        matmul::matmul_naive,
        naive_config(m, n),
        (&a, &b),
        shape,
    );
    let tiled = run_matmul(
        "matmul_tiled",
        matmul::matmul_tiled,
        tiled_config(m, n),
        (&a, &b),
        shape,
    );
    let x = random(72, 5 * 300);
    let soft = run_softmax(softmax_config(5), &x, 5, 300, 1.0);
    let err = run_fail_in_blocks().unwrap_err();
    format!(
        "{:016x} {:016x} {:016x} {err}",
        hash(&naive.unwrap()),
        hash(&tiled.unwrap()),
        hash(&soft.unwrap())
    )
}

/// How many OS threads ran the blocks of a 32-block launch whose blocks each take 2 ms.
fn os_threads_used() -> usize {
    let seen = Mutex::new(HashSet::new());
    let mut y = vec![0.0f32; 32 * 4];
    let mut launch = Launch::new("iota", config((32, 1), (4, 1), 0));
    let py = launch.output("y", &mut y);
    let body = || {
        seen.lock().unwrap().insert(std::thread::current().id());
        if thread::thread_idx_x() == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
        // SAFETY: `y` holds 128 floats and is registered.
        unsafe { iota(py, 128) }
    };
    // SAFETY: the body only launches `iota` on the registered buffer.
    unsafe { launch.run(body) }.unwrap();
    let used = seen.lock().unwrap().len();
    used
}

#[test]
#[ignore = "run by `sim_threads_env_changes_nothing`, in a subprocess with GPUKERN_SIM_THREADS set"]
fn sim_threads_child() {
    println!("\nfingerprint: {}", fingerprint());
    println!("os threads: {}", os_threads_used());
}

#[test]
fn sim_threads_env_changes_nothing() {
    let here = fingerprint();
    assert_eq!(fingerprint(), here, "two runs in one process differ");
    let exe = std::env::current_exe().unwrap();
    for workers in [1, 3] {
        let out = Command::new(&exe)
            .args([
                "sim_threads_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("GPUKERN_SIM_THREADS", workers.to_string())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let field = |name: &str| {
            stdout
                .lines()
                .find_map(|l| l.split_once(name).map(|(_, v)| v.to_string()))
                .unwrap_or_else(|| panic!("no {name:?} in the child's output:\n{stdout}"))
        };
        assert_eq!(field("fingerprint: "), here, "GPUKERN_SIM_THREADS={workers}");
        let threads: usize = field("os threads: ").parse().unwrap();
        if workers == 1 {
            assert_eq!(
                threads, 1,
                "GPUKERN_SIM_THREADS=1 ran blocks on {threads} OS threads"
            );
        } else {
            assert!(
                (2..=workers).contains(&threads),
                "{threads} OS threads for {workers} workers"
            );
        }
    }
}
