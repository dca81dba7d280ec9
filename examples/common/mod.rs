//! What the examples share: picking the device, simple `--name value` arguments, timing, and
//! checking a result against the CPU reference.
//!
//! Each example includes it with `mod common;` and uses the parts it needs.

#![allow(dead_code)]

use std::error::Error;
use std::process::ExitCode;
use std::time::Instant;

use gpukern::Gpu;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The error type of the examples: a gpukern error, a bad argument or a failed check.
pub type BoxError = Box<dyn Error>;

/// Runs an example's body: prints an error (with its causes) and exits non-zero on failure.
pub fn run(body: impl FnOnce() -> Result<(), BoxError>) -> ExitCode {
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = e.source();
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            ExitCode::FAILURE
        }
    }
}

/// The default device ([`Gpu::global`]: the GPU, or the CPU simulator without one), announced.
pub fn device() -> Result<&'static Gpu, BoxError> {
    let gpu = Gpu::global()?;
    println!("device: {}", gpu.describe());
    Ok(gpu)
}

/// Command-line options of the form `--name value` or `--name=value`.
pub struct Args {
    values: Vec<(String, String)>,
}

impl Args {
    /// Parses the process's arguments, accepting only the options in `options` (`(name, help)`
    /// pairs, names without the dashes). `--help` prints them and exits.
    pub fn parse(about: &str, options: &[(&str, &str)]) -> Result<Args, BoxError> {
        let mut values = Vec::new();
        // `args_os`, not `args`: a non-UTF-8 argument is an error here, not a panic.
        let mut args = std::env::args_os().skip(1).map(|a| {
            a.into_string()
                .map_err(|a| format!("argument {a:?} is not valid UTF-8"))
        });
        while let Some(arg) = args.next().transpose()? {
            if arg == "--help" || arg == "-h" {
                println!("{about}\n\noptions:");
                for (name, help) in options {
                    println!("  --{name:<10} {help}");
                }
                std::process::exit(0);
            }
            let Some(option) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument `{arg}` (try --help)").into());
            };
            let (name, value) = match option.split_once('=') {
                Some((name, value)) => (name.to_string(), value.to_string()),
                None => {
                    let value = args
                        .next()
                        .transpose()?
                        .ok_or_else(|| format!("--{option} needs a value"))?;
                    (option.to_string(), value)
                }
            };
            if !options.iter().any(|(known, _)| *known == name) {
                return Err(format!("unknown option --{name} (try --help)").into());
            }
            values.push((name, value));
        }
        Ok(Args { values })
    }

    /// The positive integer given as `--name`, if it was given (the last one wins).
    pub fn usize(&self, name: &str) -> Result<Option<usize>, BoxError> {
        let Some((_, value)) = self.values.iter().rev().find(|(n, _)| n == name) else {
            return Ok(None);
        };
        match value.parse::<usize>() {
            Ok(v) if v > 0 => Ok(Some(v)),
            _ => Err(format!("--{name} {value}: expected a positive integer").into()),
        }
    }

    /// The value given as `--name`, if it was given (the last one wins).
    pub fn string(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value given as `--name` parsed as a `T` (any number, a path), if it was given.
    pub fn parsed<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, BoxError> {
        match self.string(name) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("--{name} {v}: not a valid value").into()),
        }
    }

    /// `--reps` if given; else `default` on a GPU and 1 in the (slow) simulator.
    pub fn reps(&self, gpu: &Gpu, default: usize) -> Result<usize, BoxError> {
        let fallback = if gpu.is_simulator() { 1 } else { default };
        Ok(self.usize("reps")?.unwrap_or(fallback))
    }

    /// `--name` if given; else `full` on a GPU and `small` in the simulator, saying so.
    ///
    /// `show` formats a size for the message, e.g. `|n| format!("{n}x{n}")`.
    pub fn size_or(
        &self,
        gpu: &Gpu,
        name: &str,
        full: usize,
        small: usize,
        show: impl Fn(usize) -> String,
    ) -> Result<usize, BoxError> {
        if let Some(v) = self.usize(name)? {
            return Ok(v);
        }
        if gpu.is_simulator() {
            println!("CPU simulator: using {} instead of {}", show(small), show(full));
            Ok(small)
        } else {
            Ok(full)
        }
    }
}

/// The median wall-clock time in milliseconds of `reps` calls of `f`, each followed by
/// [`Gpu::synchronize`] so that the kernels it queued are inside the measurement.
///
/// Does no warm-up of its own: call `f` once before (the call whose result is checked).
pub fn time_ms<T>(
    gpu: &Gpu,
    reps: usize,
    mut f: impl FnMut() -> gpukern::Result<T>,
) -> Result<f64, BoxError> {
    let mut times = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        let out = f()?;
        gpu.synchronize()?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
        drop(out);
    }
    Ok(median(times))
}

/// The median of some times (the upper one of the middle two for an even count; 0 for none).
pub fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(0.0)
}

/// Wall-clock milliseconds of one call of `f` (for work that ends on the host, like the CPU
/// reference), with its result.
pub fn time_once<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed().as_secs_f64() * 1e3)
}

/// "median of 10 timed runs" or "1 timed run", for the headings.
pub fn runs(reps: usize) -> String {
    if reps == 1 {
        "1 timed run".to_string()
    } else {
        format!("median of {reps} timed runs")
    }
}

/// `bytes` moved in `ms` milliseconds, in GB/s.
pub fn gb_per_s(bytes: f64, ms: f64) -> f64 {
    bytes / (ms * 1e-3) / 1e9
}

/// `flops` done in `ms` milliseconds, in GFLOP/s.
pub fn gflop_per_s(flops: f64, ms: f64) -> f64 {
    flops / (ms * 1e-3) / 1e9
}

/// Fails unless the relative error `err` of `what` is within `tolerance` (NaN fails).
pub fn ensure(what: &str, err: f64, tolerance: f64) -> Result<(), BoxError> {
    if err <= tolerance {
        Ok(())
    } else {
        Err(format!("{what}: relative error {err:.2e} exceeds the tolerance {tolerance:.0e}").into())
    }
}

/// A random-number generator with a fixed seed, so that every run sees the same inputs.
pub fn rng() -> StdRng {
    StdRng::seed_from_u64(2024)
}

/// `len` random values, uniform in `[-1, 1)`.
pub fn random_vec(rng: &mut impl Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// A `rows x cols` matrix of random values, uniform in `[-1, 1)`.
pub fn random_matrix(rng: &mut impl Rng, rows: usize, cols: usize) -> ndarray::Array2<f32> {
    ndarray::Array2::from_shape_simple_fn((rows, cols), || rng.random_range(-1.0..1.0))
}
