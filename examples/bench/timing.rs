//! Timing: CUDA events around launches on the Gpu's stream, and wall-clock per-call timing.
//!
//! One sample is: a large device-to-device copy (it evicts L2 and keeps the GPU busy while the
//! host queues the next launches, so host launch cost never shows as idle GPU time), then
//! ([`Flush::Clean`], the default) a read of another buffer larger than L2 (the copy's last
//! writes sit dirty in L2, and without the read the timed launches would write them back: 2-8 us
//! of a decode-attention call on the H200, `bench/experiments/third-wave/65a7f49-flush-*.jsonl`),
//! a start event, `batch` launches, an end event. The sample's time is the elapsed time over
//! `batch`.
//! `batch` is more than 1 only for kernels of a few microseconds, where one launch is close to
//! the events' resolution; callers rotate among input buffers so batched launches still read
//! from DRAM, not from L2.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, sys::CUevent_flags};

use crate::record::Res;

/// Bytes copied before each sample: well over the H200's L2 (60 MB), and ~150 us of GPU work,
/// longer than queueing `MAX_BATCH` launches takes on the host.
const FLUSH_BYTES: usize = 256 << 20;
/// Kernels shorter than this are launched several times per sample.
const BATCH_TARGET_MS: f64 = 0.02;
/// The most launches per sample.
const MAX_BATCH: usize = 8;
/// A launch this slow (ms) gets one warm-up run and at least 3 samples, not more.
const SLOW_MS: f64 = 50.0;

/// How long one measurement may take.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Warm-up runs (timed, discarded; the first also gives the batch size).
    pub warmup: usize,
    /// Stop after this many samples...
    pub max_reps: usize,
    /// ...or once the samples add up to this much GPU time (seconds)...
    pub target_s: f64,
    /// ...or this much wall time (seconds) has passed, with at least `min_reps` samples.
    pub max_wall_s: f64,
    /// Samples taken at least (3 for slow kernels).
    pub min_reps: usize,
}

impl Budget {
    /// The full run: 3-5 warm-ups, up to 100 samples or ~0.4 s.
    pub const FULL: Budget = Budget {
        warmup: 4,
        max_reps: 100,
        target_s: 0.4,
        max_wall_s: 2.5,
        min_reps: 10,
    };
    /// `--quick`: a smoke test.
    pub const QUICK: Budget = Budget {
        warmup: 2,
        max_reps: 20,
        target_s: 0.05,
        max_wall_s: 0.5,
        min_reps: 5,
    };
}

/// Statistics of one measurement, in milliseconds per launch.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    pub median_ms: f64,
    pub p10_ms: f64,
    pub p90_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Samples taken.
    pub reps: usize,
    /// Launches per sample.
    pub batch: usize,
    /// Warm-up runs.
    pub warmup: usize,
    /// How it was timed.
    pub timer: &'static str,
}

impl Stats {
    /// Statistics of `times` (ms, not empty).
    pub fn of(mut times: Vec<f64>, batch: usize, warmup: usize, timer: &'static str) -> Res<Stats> {
        if times.is_empty() {
            return Err("no samples".into());
        }
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        let n = times.len();
        let median = if n % 2 == 1 {
            times[n / 2]
        } else {
            0.5 * (times[n / 2 - 1] + times[n / 2])
        };
        Ok(Stats {
            median_ms: median,
            p10_ms: at(0.1),
            p90_ms: at(0.9),
            min_ms: times[0],
            max_ms: times[n - 1],
            reps: n,
            batch,
            warmup,
            timer,
        })
    }
}

/// What runs before each sample's start event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// The copy alone: L2 left holding the copy's last writes, dirty, so that the timed launches
    /// also pay for writing them back (timer `cuda_events`; every record before this choice
    /// existed was timed so).
    Copy,
    /// The copy, then a read of another buffer larger than L2: L2 left holding clean lines, the
    /// copy's write-back done before the start event (timer `cuda_events_clean_l2`; the default).
    Clean,
}

impl Flush {
    /// The flush `GPUKERN_BENCH_FLUSH` names: `clean` (the default, also when unset) or `copy`.
    pub fn from_env() -> Res<Flush> {
        match std::env::var("GPUKERN_BENCH_FLUSH").as_deref() {
            Err(_) | Ok("") | Ok("clean") => Ok(Flush::Clean),
            Ok("copy") => Ok(Flush::Copy),
            Ok(other) => Err(format!("GPUKERN_BENCH_FLUSH={other}: expected `clean` or `copy`").into()),
        }
    }
}

/// The read-only pass of [`Flush::Clean`], queued on the timer's stream.
pub type CleanPass = Box<dyn FnMut() -> Res<()>>;

/// Times launches queued on one stream with CUDA events.
pub struct Timer {
    stream: Arc<CudaStream>,
    start: CudaEvent,
    end: CudaEvent,
    flush_src: CudaSlice<u8>,
    flush_dst: CudaSlice<u8>,
    clean: Option<CleanPass>,
    pub budget: Budget,
}

impl Timer {
    /// A timer for work queued on `stream`; `clean` (for [`Flush::Clean`]) reads a buffer larger
    /// than L2 on the same stream after each flush copy.
    pub fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        budget: Budget,
        clean: Option<CleanPass>,
    ) -> Res<Timer> {
        // Events made without flags cannot time (cudarc defaults to DISABLE_TIMING).
        let event = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT));
        Ok(Timer {
            stream: stream.clone(),
            start: event().map_err(|e| format!("creating a timing event: {e}"))?,
            end: event().map_err(|e| format!("creating a timing event: {e}"))?,
            flush_src: stream
                .alloc_zeros::<u8>(FLUSH_BYTES)
                .map_err(|e| format!("allocating the L2 flush buffer: {e}"))?,
            flush_dst: stream
                .alloc_zeros::<u8>(FLUSH_BYTES)
                .map_err(|e| format!("allocating the L2 flush buffer: {e}"))?,
            clean,
            budget,
        })
    }

    /// The records' `timer` for a measurement named `timer` under this timer's flush.
    fn timer_name(&self, timer: &'static str) -> &'static str {
        match (self.clean.is_some(), timer) {
            (false, t) => t,
            (true, "cuda_events") => "cuda_events_clean_l2",
            (true, "cuda_events_interleaved") => "cuda_events_interleaved_clean_l2",
            (true, t) => t,
        }
    }

    /// One sample: flush, start event, `batch` launches (`launch(i)` with consecutive `i`
    /// from `next`), end event; returns ms per launch.
    fn sample(
        &mut self,
        launch: &mut dyn FnMut(usize) -> Res<()>,
        next: &mut usize,
        batch: usize,
    ) -> Res<f64> {
        self.stream.memcpy_dtod(&self.flush_src, &mut self.flush_dst)?;
        if let Some(clean) = &mut self.clean {
            clean()?;
        }
        self.start.record(&self.stream)?;
        for _ in 0..batch {
            launch(*next)?;
            *next += 1;
        }
        self.end.record(&self.stream)?;
        let ms = self.start.elapsed_ms(&self.end)?;
        Ok(f64::from(ms) / batch as f64)
    }

    /// Times `launch(i)` (`i` counts launches, for rotating among buffers): warm-up, then samples
    /// until the budget is spent; the median is per launch.
    pub fn measure(&mut self, mut launch: impl FnMut(usize) -> Res<()>) -> Res<Stats> {
        let mut stats = self.measure_in_turn(&mut [&mut launch], "cuda_events")?;
        stats.pop().ok_or_else(|| "no statistics".into())
    }

    /// Times two implementations of one operation in alternating samples (`a`, `b`, `a`, ...),
    /// each sample with its own flush, so that both see the same clocks and power state: a GPU at
    /// its power limit moves its clock by several percent over a second, and two rows timed one
    /// after the other can land on either side of such a move. Returns `(a's, b's)` statistics,
    /// timer `cuda_events_interleaved`.
    pub fn measure_pair(
        &mut self,
        mut a: impl FnMut(usize) -> Res<()>,
        mut b: impl FnMut(usize) -> Res<()>,
    ) -> Res<(Stats, Stats)> {
        let mut stats = self
            .measure_in_turn(&mut [&mut a, &mut b], "cuda_events_interleaved")?
            .into_iter();
        match (stats.next(), stats.next()) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => Err("no statistics".into()),
        }
    }

    /// Times `a` and `b` where each is given: in alternation when both are
    /// ([`Timer::measure_pair`]), on its own when only one is.
    pub fn measure_given(
        &mut self,
        a: Option<impl FnMut(usize) -> Res<()>>,
        b: Option<impl FnMut(usize) -> Res<()>>,
    ) -> Res<(Option<Stats>, Option<Stats>)> {
        Ok(match (a, b) {
            (Some(a), Some(b)) => {
                let (a, b) = self.measure_pair(a, b)?;
                (Some(a), Some(b))
            }
            (Some(a), None) => (Some(self.measure(a)?), None),
            (None, Some(b)) => (None, Some(self.measure(b)?)),
            (None, None) => (None, None),
        })
    }

    /// The measurement of [`Timer::measure`] for each of `launches`, their samples taken in turn
    /// (one of each, then again), each with its own flush: warm-up in turn (each launch's
    /// estimate the fastest of its warm-ups, which also gives its batch size), then samples
    /// until every launch has `min_reps` and together they have spent `launches.len()` times one
    /// measurement's budget, or each has `max_reps`. Statistics in the order of `launches`.
    fn measure_in_turn(
        &mut self,
        launches: &mut [&mut dyn FnMut(usize) -> Res<()>],
        timer: &'static str,
    ) -> Res<Vec<Stats>> {
        let budget = self.budget;
        let scale = launches.len() as f64;
        let wall = Instant::now();
        let mut next = vec![0; launches.len()];
        let mut estimates = Vec::with_capacity(launches.len());
        for (launch, next) in launches.iter_mut().zip(&mut next) {
            estimates.push(self.sample(*launch, next, 1)?);
        }
        let slowest = |e: &[f64]| e.iter().copied().fold(0.0, f64::max);
        let mut warmup = 1;
        if slowest(&estimates) < SLOW_MS {
            while warmup < budget.warmup {
                for ((launch, next), estimate) in launches.iter_mut().zip(&mut next).zip(&mut estimates) {
                    *estimate = estimate.min(self.sample(*launch, next, 1)?);
                }
                warmup += 1;
            }
        }
        let batches: Vec<usize> = estimates.iter().map(|&e| batch_for(e)).collect();
        let min_reps = if slowest(&estimates) >= SLOW_MS {
            3
        } else {
            budget.min_reps
        };
        let mut times = vec![Vec::with_capacity(budget.max_reps); launches.len()];
        let mut gpu_s = 0.0;
        while times[0].len() < budget.max_reps {
            for (((launch, next), &batch), times) in
                launches.iter_mut().zip(&mut next).zip(&batches).zip(&mut times)
            {
                let ms = self.sample(*launch, next, batch)?;
                times.push(ms);
                gpu_s += ms * batch as f64 * 1e-3;
            }
            let spent =
                gpu_s >= scale * budget.target_s || wall.elapsed().as_secs_f64() >= scale * budget.max_wall_s;
            if times[0].len() >= min_reps && spent {
                break;
            }
        }
        times
            .into_iter()
            .zip(batches)
            .map(|(times, batch)| Stats::of(times, batch, warmup, self.timer_name(timer)))
            .collect()
    }
}

/// How many launches per sample a kernel of `estimate` ms gets.
fn batch_for(estimate: f64) -> usize {
    if estimate > 0.0 && estimate < BATCH_TARGET_MS {
        ((BATCH_TARGET_MS / estimate) as usize).clamp(1, MAX_BATCH)
    } else {
        1
    }
}

/// Mean wall time per call of `call` (ms), over up to `calls` calls or `max_s` seconds, after
/// `warmup` calls; `finish` (e.g. a synchronize) runs after the warm-up and after the last call
/// and is inside the timed span. Returns (ms per call, calls timed).
pub fn wall_per_call(
    calls: usize,
    warmup: usize,
    max_s: f64,
    mut call: impl FnMut() -> Res<()>,
    mut finish: impl FnMut() -> Res<()>,
) -> Res<(f64, usize)> {
    for _ in 0..warmup {
        call()?;
    }
    finish()?;
    // Check the clock every `CHUNK` calls only, so reading it costs nothing measurable.
    const CHUNK: usize = 100;
    let start = Instant::now();
    let mut done = 0;
    while done < calls {
        for _ in 0..CHUNK.min(calls - done) {
            call()?;
            done += 1;
        }
        if start.elapsed().as_secs_f64() >= max_s {
            break;
        }
    }
    finish()?;
    Ok((start.elapsed().as_secs_f64() * 1e3 / done as f64, done))
}

/// Median wall time (ms) of `run`, repeated up to `max_reps` times or `max_s` seconds (at least
/// 3 times), after one warm-up run.
pub fn wall_median(max_reps: usize, max_s: f64, mut run: impl FnMut() -> Res<()>) -> Res<Stats> {
    run()?;
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < max_reps {
        let t = Instant::now();
        run()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if times.len() >= 3 && start.elapsed().as_secs_f64() >= max_s {
            break;
        }
    }
    Stats::of(times, 1, 1, "wall_clock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_median_and_spread() {
        let s = Stats::of(vec![5.0, 1.0, 3.0, 2.0, 4.0], 1, 1, "t").unwrap();
        assert_eq!((s.median_ms, s.min_ms, s.max_ms, s.reps), (3.0, 1.0, 5.0, 5));
        let s = Stats::of(vec![4.0, 1.0, 3.0, 2.0], 1, 1, "t").unwrap();
        assert_eq!(s.median_ms, 2.5);
        let s = Stats::of((1..=11).map(f64::from).collect(), 1, 1, "t").unwrap();
        assert_eq!((s.p10_ms, s.p90_ms), (2.0, 10.0));
        assert!(Stats::of(vec![], 1, 1, "t").is_err());
    }

    #[test]
    fn wall_per_call_counts_calls() {
        let mut n = 0;
        let (ms, done) = wall_per_call(
            250,
            10,
            10.0,
            || {
                n += 1;
                Ok(())
            },
            || Ok(()),
        )
        .unwrap();
        assert_eq!((done, n), (250, 260));
        assert!(ms >= 0.0);
    }
}
