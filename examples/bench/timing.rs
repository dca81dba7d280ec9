//! Timing: CUDA events around launches on the Gpu's stream, and wall-clock per-call timing.
//!
//! One sample is: a large device-to-device copy (it evicts L2 and keeps the GPU busy while the
//! host queues the next launches, so host launch cost never shows as idle GPU time), a start
//! event, `batch` launches, an end event. The sample's time is the elapsed time over `batch`.
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

/// Times launches queued on one stream with CUDA events.
pub struct Timer {
    stream: Arc<CudaStream>,
    start: CudaEvent,
    end: CudaEvent,
    flush_src: CudaSlice<u8>,
    flush_dst: CudaSlice<u8>,
    pub budget: Budget,
}

impl Timer {
    /// A timer for work queued on `stream`.
    pub fn new(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>, budget: Budget) -> Res<Timer> {
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
            budget,
        })
    }

    /// One sample: flush, start event, `batch` launches (`launch(i)` with consecutive `i`
    /// from `next`), end event; returns ms per launch.
    fn sample(
        &mut self,
        launch: &mut impl FnMut(usize) -> Res<()>,
        next: &mut usize,
        batch: usize,
    ) -> Res<f64> {
        self.stream.memcpy_dtod(&self.flush_src, &mut self.flush_dst)?;
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
        let budget = self.budget;
        let wall = Instant::now();
        let mut next = 0;
        let mut estimate = self.sample(&mut launch, &mut next, 1)?;
        let mut warmup = 1;
        if estimate < SLOW_MS {
            while warmup < budget.warmup {
                estimate = estimate.min(self.sample(&mut launch, &mut next, 1)?);
                warmup += 1;
            }
        }
        let batch = batch_for(estimate);
        let min_reps = if estimate >= SLOW_MS { 3 } else { budget.min_reps };
        let mut times = Vec::with_capacity(budget.max_reps);
        let mut gpu_s = 0.0;
        while times.len() < budget.max_reps {
            let ms = self.sample(&mut launch, &mut next, batch)?;
            times.push(ms);
            gpu_s += ms * batch as f64 * 1e-3;
            let spent = gpu_s >= budget.target_s || wall.elapsed().as_secs_f64() >= budget.max_wall_s;
            if times.len() >= min_reps && spent {
                break;
            }
        }
        Stats::of(times, batch, warmup, "cuda_events")
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

impl Timer {
    /// Times two implementations of one operation in alternating samples (`a`, `b`, `a`, ...),
    /// each sample with its own flush, so that both see the same clocks and power state: a GPU at
    /// its power limit moves its clock by several percent over a second, and two rows timed one
    /// after the other can land on either side of such a move. Warm-up alternates too; each side
    /// keeps its own batch size. Stops once both have `min_reps` samples and the pair has spent
    /// twice one measurement's budget, or at `max_reps` samples each. Returns `(a's, b's)`
    /// statistics, timer `cuda_events_interleaved`.
    pub fn measure_pair(
        &mut self,
        mut a: impl FnMut(usize) -> Res<()>,
        mut b: impl FnMut(usize) -> Res<()>,
    ) -> Res<(Stats, Stats)> {
        let budget = self.budget;
        let wall = Instant::now();
        let (mut next_a, mut next_b) = (0, 0);
        let mut est_a = self.sample(&mut a, &mut next_a, 1)?;
        let mut est_b = self.sample(&mut b, &mut next_b, 1)?;
        let mut warmup = 1;
        if est_a.max(est_b) < SLOW_MS {
            while warmup < budget.warmup {
                est_a = est_a.min(self.sample(&mut a, &mut next_a, 1)?);
                est_b = est_b.min(self.sample(&mut b, &mut next_b, 1)?);
                warmup += 1;
            }
        }
        let (batch_a, batch_b) = (batch_for(est_a), batch_for(est_b));
        let min_reps = if est_a.max(est_b) >= SLOW_MS {
            3
        } else {
            budget.min_reps
        };
        let (mut times_a, mut times_b) = (Vec::new(), Vec::new());
        let mut gpu_s = 0.0;
        while times_a.len() < budget.max_reps {
            let ms_a = self.sample(&mut a, &mut next_a, batch_a)?;
            let ms_b = self.sample(&mut b, &mut next_b, batch_b)?;
            times_a.push(ms_a);
            times_b.push(ms_b);
            gpu_s += (ms_a * batch_a as f64 + ms_b * batch_b as f64) * 1e-3;
            let spent =
                gpu_s >= 2.0 * budget.target_s || wall.elapsed().as_secs_f64() >= 2.0 * budget.max_wall_s;
            if times_a.len() >= min_reps && spent {
                break;
            }
        }
        const TIMER: &str = "cuda_events_interleaved";
        Ok((
            Stats::of(times_a, batch_a, warmup, TIMER)?,
            Stats::of(times_b, batch_b, warmup, TIMER)?,
        ))
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
