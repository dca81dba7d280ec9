//! The trials that run in a child process: this binary started again with [`CHILD_ENV`] set to
//! a job, no arguments (so it works the same when `scripts/gpu-check.sh` runs the binary bare).
//!
//! * `print-cuda` / `print-sim`: `print_values` on 4 blocks, synchronise, `print_once`,
//!   synchronise. The driver writes device `printf` output to fd 1 at synchronisation, past any
//!   capture in this process; the parent checks the child's stdout is exactly the expected lines.
//! * `assert-cuda`: `assert_non_negative` on good input, then with x[300] = -1: the
//!   synchronisation must fail with a sticky `KernelFailed` naming the kernel, code 710
//!   (`CUDA_ERROR_ASSERT`). That poisons CUDA for the whole process, hence the child: a new
//!   `Gpu::new(0)` there must be a clear sticky `KernelFailed` (CUDA: "to continue using CUDA,
//!   the process must be terminated and relaunched"), and the simulator must still run (and
//!   report the assertion); the parent, a new process, goes on using the GPU.
//!
//! The child reports on stderr, one `child: ...` line each, including the kernels it launched
//! (the parent's coverage check counts them).

use std::io::Write;
use std::process::Command;

use gpukern::{Error, Gpu, LaunchConfig};
use gpukern_device_checks::print::{assert_non_negative, print_once, print_values};
use gpukern_device_checks::tables::{PRINT_ONCE_LINE, PRINT_VALUES_LINES};
use libtest_mimic::{Failed, Trial};

use crate::{CHECKS, CHILD_ENV, CHILD_LAUNCHES, Check, Target, trial};

/// `blocks` blocks of `threads` threads.
fn grid(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (blocks, 1, 1),
        block: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// `gpukern::cuda_launch_counts` or `gpukern::sim_launch_counts`.
type LaunchCounts = fn(&str) -> Vec<(&'static str, u64)>;

/// Runs the child job `job`; returns the exit status.
pub fn run_child(job: &str) -> i32 {
    let (result, counts): (Result<(), String>, LaunchCounts) = match job {
        "print-cuda" => (
            Gpu::new(0).map_err(|e| e.to_string()).and_then(print_job),
            gpukern::cuda_launch_counts,
        ),
        "print-sim" => (print_job(Gpu::simulator()), gpukern::sim_launch_counts),
        "assert-cuda" => (assert_job(), gpukern::cuda_launch_counts),
        other => (Err(format!("unknown job {other:?}")), gpukern::cuda_launch_counts),
    };
    for (name, count) in counts(CHECKS.krate) {
        eprintln!("child: launched {name} {count}");
    }
    let _ = std::io::stdout().flush();
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("child: error {e}");
            1
        }
    }
}

fn print_job(gpu: Gpu) -> Result<(), String> {
    let module = gpu.load(&CHECKS).map_err(|e| e.to_string())?;
    // SAFETY: the kernels take no pointers.
    unsafe { print_values::launch(&module, grid(4, 64)) }.map_err(|e| e.to_string())?;
    gpu.synchronize().map_err(|e| e.to_string())?;
    // SAFETY: as above.
    unsafe { print_once::launch(&module, grid(3, 32)) }.map_err(|e| e.to_string())?;
    gpu.synchronize().map_err(|e| e.to_string())
}

/// `assert_non_negative` over 1000 elements on a fresh `Gpu::new(0)`, with `x[bad] = -1` if
/// given; the error of the launch or of the synchronisation after it.
fn assert_launch(bad: Option<usize>) -> Result<(), Error> {
    let gpu = Gpu::new(0)?;
    let module = gpu.load(&CHECKS)?;
    let mut x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    if let Some(i) = bad {
        x[i] = -1.0;
    }
    let x = gpu.upload(&x)?;
    // SAFETY: `x` holds 1000 elements.
    unsafe { assert_non_negative::launch(&module, grid(4, 256), &x, 1000) }?;
    gpu.synchronize()
    // The Gpu, its module and its buffer are dropped here, whatever happened.
}

fn assert_job() -> Result<(), String> {
    assert_launch(None).map_err(|e| format!("good input before: {e}"))?;
    eprintln!("child: good ok");
    match assert_launch(Some(300)) {
        Ok(()) => eprintln!("child: failed none"),
        Err(
            ref e @ Error::KernelFailed {
                ref kernels,
                sticky,
                ref source,
                ..
            },
        ) => {
            eprintln!(
                "child: failed sticky={sticky} code={} kernels={kernels}",
                source.0 as i32
            );
            eprintln!("child: message {e}");
        }
        Err(e) => eprintln!("child: failed other {e}"),
    }
    // CUDA's rule for this error: "the device cannot be used again... to continue using CUDA,
    // the process must be terminated and relaunched". A new Gpu in this process must be a clear
    // error (not a crash or a hang); the simulator still works; the parent, a new process, goes
    // on using the GPU.
    match Gpu::new(0) {
        Err(Error::KernelFailed { sticky: true, .. }) => eprintln!("child: reopen refused sticky"),
        Ok(_) => eprintln!("child: reopen ok"),
        Err(e) => eprintln!("child: reopen other {e}"),
    }
    let sim = Gpu::simulator();
    let module = sim.load(&CHECKS).map_err(|e| e.to_string())?;
    let mut x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    x[300] = -1.0;
    let x = sim.upload(&x).map_err(|e| e.to_string())?;
    // SAFETY: `x` holds 1000 elements.
    match unsafe { assert_non_negative::launch(&module, grid(4, 256), &x, 1000) } {
        Err(Error::Simulator(report)) if report.thread.x == 44 && report.block.x == 1 => {
            eprintln!("child: simulator ok")
        }
        other => eprintln!("child: simulator other {other:?}"),
    }
    Ok(())
}

/// Runs this binary as a child doing `job`; records the kernels it launched on `backend` and
/// returns its stdout and its `child: ` lines, or why it failed.
fn spawn(job: &str, backend: &'static str) -> Result<(String, Vec<String>), String> {
    let exe = std::env::current_exe().map_err(|e| format!("no path to this test binary: {e}"))?;
    let output = Command::new(exe)
        .env(CHILD_ENV, job)
        .output()
        .map_err(|e| format!("starting the child {job}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let lines: Vec<String> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("child: "))
        .map(str::to_string)
        .collect();
    {
        let mut launches = CHILD_LAUNCHES.lock().unwrap_or_else(|p| p.into_inner());
        for line in &lines {
            let mut words = line.split(' ');
            if let (Some("launched"), Some(name), Some(Ok(count))) =
                (words.next(), words.next(), words.next().map(str::parse))
            {
                launches.push((backend, name.to_string(), count));
            }
        }
    }
    if !output.status.success() {
        return Err(format!(
            "child {job} exited with {}:\nstdout:\n{stdout}\nstderr:\n{stderr}",
            output.status
        ));
    }
    Ok((stdout, lines))
}

/// `None` if `stdout` is exactly `print_values`'s 4 lines and `print_once`'s, in any order.
pub fn print_output_problem(stdout: &str) -> Option<String> {
    let mut got: Vec<&str> = stdout.lines().collect();
    got.sort_unstable();
    let mut want: Vec<&str> = PRINT_VALUES_LINES
        .iter()
        .copied()
        .chain([PRINT_ONCE_LINE])
        .collect();
    want.sort_unstable();
    (got != want).then(|| format!("the child printed {got:#?}\nwant (in any order) {want:#?}"))
}

/// `None` if the assert child's report lines say: good input passed, the planted element
/// failed the synchronisation with a sticky `KernelFailed` naming `assert_non_negative` with
/// `CUDA_ERROR_ASSERT` (710), a new `Gpu` in that process was refused with a sticky
/// `KernelFailed`, and the simulator then reported the assertion.
pub fn assert_report_problem(lines: &[String]) -> Option<String> {
    let want = [
        "good ok",
        "failed sticky=true code=710 kernels=assert_non_negative",
        "reopen refused sticky",
        "simulator ok",
    ];
    let got: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .filter(|l| !l.starts_with("launched ") && !l.starts_with("message "))
        .collect();
    if got == want {
        return None;
    }
    let hint = if got.iter().any(|l| l.contains("code=719")) {
        " (719 is CUDA_ERROR_LAUNCH_FAILED: the `trap` after `__assertfail` fired instead of the \
         assertion being reported as such)"
    } else {
        ""
    };
    Some(format!(
        "the assert child reported {lines:#?}\nwant {want:#?}{hint}"
    ))
}

fn print_trial(target: &Target) -> Trial {
    let (job, backend) = match target.prefix {
        "sim" => ("print-sim", "sim"),
        _ => ("print-cuda", "cuda"),
    };
    trial(
        target,
        "print::values_and_once_in_a_child",
        move |_, _, _| -> Check {
            let (stdout, _) = spawn(job, backend)?;
            print_output_problem(&stdout).map_or(Ok(()), |p| Err(p.into()))
        },
    )
}

/// The child-process trials of one backend.
pub fn trials(target: &Target) -> Vec<Trial> {
    let mut trials = vec![print_trial(target)];
    if target.prefix == "cuda" {
        trials.push(trial(
            target,
            "assert::a_negative_element_is_sticky_and_the_simulator_still_runs",
            |_, _, _| -> Check {
                let (_, lines) = spawn("assert-cuda", "cuda")?;
                assert_report_problem(&lines).map_or(Ok(()), |p| Err(p.into()))
            },
        ));
    }
    trials
}

/// The checks of the children's output, shown able to fail on planted output.
pub fn planted_trials() -> Vec<Trial> {
    vec![Trial::test(
        "planted::child_output_checks_refuse_wrong_output",
        || {
            let all: Vec<&str> = PRINT_VALUES_LINES
                .iter()
                .copied()
                .chain([PRINT_ONCE_LINE])
                .collect();
            let mut reversed = all.clone();
            reversed.reverse();
            if let Some(p) = print_output_problem(&(reversed.join("\n") + "\n")) {
                return Err(Failed::from(format!("the right lines in another order: {p}")));
            }
            let missing = all[1..].join("\n");
            let extra = all.join("\n") + "\nprint_once: no conversions\n";
            let wrong = all.join("\n").replace("0.125", "0.12");
            for (what, out) in [
                ("a missing line", missing),
                ("a repeated line", extra),
                ("a wrong value", wrong),
            ] {
                if print_output_problem(&out).is_none() {
                    return Err(Failed::from(format!("{what} passes the print check")));
                }
            }
            let good: Vec<String> = [
                "good ok",
                "failed sticky=true code=710 kernels=assert_non_negative",
                "reopen refused sticky",
                "simulator ok",
            ]
            .map(String::from)
            .to_vec();
            if let Some(p) = assert_report_problem(&good) {
                return Err(Failed::from(format!("the right report: {p}")));
            }
            let with = |failed: &str, recovered: bool| {
                let mut lines = good.clone();
                lines[1] = failed.to_string();
                lines.truncate(if recovered { 4 } else { 2 });
                lines
            };
            match assert_report_problem(&with(
                "failed sticky=true code=719 kernels=assert_non_negative",
                true,
            )) {
                Some(p) if p.contains("trap") => {}
                other => {
                    return Err(Failed::from(format!(
                        "a 719 gives {other:?}, want a refusal naming the trap"
                    )));
                }
            }
            for lines in [
                with("failed none", true),
                with("failed sticky=false code=710 kernels=assert_non_negative", true),
                with("failed sticky=true code=710 kernels=assert_non_negative", false),
            ] {
                if assert_report_problem(&lines).is_none() {
                    return Err(Failed::from(format!("{lines:?} passes the assert check")));
                }
            }
            Ok(())
        },
    )]
}
