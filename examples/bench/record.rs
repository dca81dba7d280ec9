//! One measurement as a JSON Lines record, the run's metadata, and the sink that writes records
//! as they come (so a run cut short still leaves what it measured), shows progress and prints
//! the summary table.

use std::fmt::Display;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::timing::Stats;

/// The bench's error type: any error, with a message meant for the person running it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// `Result` with [`BoxError`].
pub type Res<T> = Result<T, BoxError>;

/// Element type of every kernel measured here.
pub const DTYPE: &str = "f32";

/// What is the same for every record of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Meta {
    /// Device name, e.g. "NVIDIA H200".
    pub gpu: String,
    /// Kernel-module driver version and the CUDA version the driver supports,
    /// e.g. "580.159.04 (CUDA 13.0)".
    pub driver: String,
    /// The commit measured.
    pub git_rev: String,
    /// UTC start of the run, ISO 8601.
    pub date: String,
}

/// One measurement. `median_ms: None` means "not timed" (a failed check, an error, a skip);
/// `error` or `skipped` among the extras says why.
#[derive(Clone, Debug, Serialize)]
pub struct Record {
    pub kernel: String,
    #[serde(rename = "impl")]
    pub imp: String,
    pub shape: String,
    pub dtype: &'static str,
    pub median_ms: Option<f64>,
    pub gbps: Option<f64>,
    pub tflops: Option<f64>,
    pub rel_err: Option<f64>,
    #[serde(flatten)]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Record {
    /// A record of `kernel` by `imp` at `shape`, nothing measured yet.
    pub fn new(kernel: &str, imp: impl Into<String>, shape: impl Into<String>) -> Record {
        Record {
            kernel: kernel.to_string(),
            imp: imp.into(),
            shape: shape.into(),
            dtype: DTYPE,
            median_ms: None,
            gbps: None,
            tflops: None,
            rel_err: None,
            meta: None,
            extra: Map::new(),
        }
    }

    /// Adds an extra key.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Record {
        self.extra.insert(key.to_string(), value.into());
        self
    }

    /// Adds the outcome of a reference check.
    pub fn checked(mut self, check: &Check) -> Record {
        self.rel_err = check.rel_err.is_finite().then_some(check.rel_err);
        self.with("check", if check.passed() { "pass" } else { "fail" })
            .with("tol", check.tol)
            .with("ref", check.reference)
    }

    /// Adds timing statistics, and the rates from the minimum bytes moved and the flops.
    pub fn timed(mut self, stats: &Stats, bytes: Option<f64>, flops: Option<f64>) -> Record {
        let s = stats.median_ms * 1e-3;
        self.median_ms = Some(stats.median_ms);
        self.gbps = bytes.map(|b| b / s / 1e9);
        self.tflops = flops.map(|f| f / s / 1e12);
        self.with("p10_ms", stats.p10_ms)
            .with("p90_ms", stats.p90_ms)
            .with("min_ms", stats.min_ms)
            .with("max_ms", stats.max_ms)
            .with("reps", stats.reps)
            .with("batch", stats.batch)
            .with("warmup", stats.warmup)
            .with("timer", stats.timer)
    }

    /// One record of a pair ([`crate::timing::Timer::measure_given`]): [`Record::timed`] where
    /// it was timed (as it is where not), naming `partner`, the row it was timed in alternation
    /// with, if it was.
    pub fn timed_beside(
        self,
        stats: Option<Stats>,
        partner: Option<&str>,
        bytes: Option<f64>,
        flops: Option<f64>,
    ) -> Record {
        let Some(stats) = stats else { return self };
        let record = match partner {
            Some(p) => self.with("interleaved_with", p),
            None => self,
        };
        record.timed(&stats, bytes, flops)
    }

    /// Marks the record as not timed because of `err`.
    pub fn failed(self, err: impl Display) -> Record {
        self.with("error", err.to_string())
    }

    /// One line for the log.
    fn log_line(&self) -> String {
        let mut s = format!("{} {} {}", self.kernel, self.imp, self.shape);
        for key in ["t", "mode"] {
            if let Some(v) = self.extra.get(key) {
                s.push_str(&format!(" {key}={v}"));
            }
        }
        match self.median_ms {
            Some(ms) => {
                s.push_str(&format!(": {}", fmt_ms(ms)));
                if let Some(g) = self.gbps {
                    s.push_str(&format!(", {g:.0} GB/s"));
                }
                if let Some(t) = self.tflops {
                    s.push_str(&format!(", {t:.2} TFLOP/s"));
                }
            }
            None => s.push_str(": not timed"),
        }
        if let Some(e) = self.rel_err {
            s.push_str(&format!(", rel_err {e:.1e}"));
        }
        if let Some(Value::String(e)) = self.extra.get("error").or_else(|| self.extra.get("skipped")) {
            s.push_str(&format!(" ({e})"));
        }
        s
    }
}

/// The outcome of comparing an output with its reference.
#[derive(Clone, Copy, Debug)]
pub struct Check {
    /// `||out - ref|| / ||ref||`; NaN if the output holds a NaN.
    pub rel_err: f64,
    /// The largest relative error that passes.
    pub tol: f64,
    /// What the reference was: "cpu_f64", "cublas_f64" (both the f64 result of the same inputs).
    pub reference: &'static str,
}

impl Check {
    /// Compares `out` with `reference` (see [`gpukern::cpu::rel_error`]).
    pub fn new(out: &[f32], reference: &[f32], tol: f64, what: &'static str) -> Check {
        Check {
            rel_err: gpukern::cpu::rel_error(out, reference),
            tol,
            reference: what,
        }
    }

    /// Whether the output is close enough to be timed.
    pub fn passed(&self) -> bool {
        self.rel_err.is_finite() && self.rel_err <= self.tol
    }
}

/// Writes records, shows progress, keeps them for the summary.
pub struct Sink {
    meta: Meta,
    /// Measurements not started by then are recorded as skipped.
    deadline: Instant,
    file: BufWriter<File>,
    progress: Progress,
    records: Vec<Record>,
}

impl Sink {
    /// Creates (truncates) `path`, making its folder if needed.
    pub fn create(path: &Path, meta: Meta, planned: u64, budget_s: f64) -> Res<Sink> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create the folder {}: {e}", dir.display()))?;
        }
        let file = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let budget = std::time::Duration::try_from_secs_f64(budget_s.max(0.0))
            .map_err(|e| format!("invalid time budget {budget_s}: {e}"))?;
        Ok(Sink {
            meta,
            deadline: Instant::now() + budget,
            file: BufWriter::new(file),
            progress: Progress::new(planned),
            records: Vec::new(),
        })
    }

    /// Writes one record (with the run's metadata) and flushes it to disk.
    pub fn emit(&mut self, mut record: Record) -> Res<()> {
        record.meta = Some(self.meta.clone());
        serde_json::to_writer(&mut self.file, &record)?;
        self.file.write_all(b"\n")?;
        self.file.flush()?;
        self.progress.record(&record.log_line());
        self.records.push(record);
        Ok(())
    }

    /// Runs `measure`, emitting what it returns; an error or a panic inside is emitted as a
    /// failed `base` record, and the run goes on. Past the deadline it is skipped.
    pub fn item(&mut self, base: Record, measure: impl FnOnce() -> Res<Record>) -> Res<()> {
        if self.expired() {
            return self.emit(base.with("skipped", "time budget spent"));
        }
        self.progress.status(&base.log_line_head());
        let record = catch(measure).unwrap_or_else(|e| base.failed(e));
        self.emit(record)
    }

    /// Runs `measure` for two records measured together (timed in alternation,
    /// [`crate::timing::Timer::measure_pair`]), emitting both; an error or a panic inside is
    /// emitted as both bases failed. Past the deadline both are skipped.
    pub fn item_pair(
        &mut self,
        (base_a, base_b): (Record, Record),
        measure: impl FnOnce() -> Res<(Record, Record)>,
    ) -> Res<()> {
        if self.expired() {
            self.emit(base_a.with("skipped", "time budget spent"))?;
            return self.emit(base_b.with("skipped", "time budget spent"));
        }
        self.progress
            .status(&format!("{} + {}", base_a.log_line_head(), base_b.imp));
        let (a, b) = catch(measure).unwrap_or_else(|e| {
            let e = e.to_string();
            (base_a.failed(&e), base_b.failed(&e))
        });
        self.emit(a)?;
        self.emit(b)
    }

    /// Whether the time budget is spent (every further item is skipped).
    pub fn expired(&self) -> bool {
        Instant::now() > self.deadline
    }

    /// Prints a message above the progress bar.
    pub fn note(&self, message: &str) {
        self.progress.println(message);
    }

    /// Ends the progress display; returns every record written.
    pub fn finish(self) -> Vec<Record> {
        self.progress.finish();
        self.records
    }
}

impl Record {
    fn log_line_head(&self) -> String {
        let mut s = format!("{} {} {}", self.kernel, self.imp, self.shape);
        for key in ["t", "mode"] {
            if let Some(v) = self.extra.get(key) {
                s.push_str(&format!(" {key}={v}"));
            }
        }
        s
    }
}

/// Runs `f`, turning a panic inside it into an error.
pub fn catch<T>(f: impl FnOnce() -> Res<T>) -> Res<T> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|panic| Err(format!("panicked: {}", panic_message(&panic)).into()))
}

/// The text of a panic payload.
fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// A progress bar on a terminal; one line per record otherwise (a log keeps them).
struct Progress {
    bar: Option<ProgressBar>,
    done: u64,
    planned: u64,
    start: Instant,
}

impl Progress {
    fn new(planned: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(planned);
            if let Ok(style) =
                ProgressStyle::with_template("{elapsed_precise} [{bar:40.cyan/blue}] {pos}/{len} {wide_msg}")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        });
        Progress {
            bar,
            done: 0,
            planned,
            start: Instant::now(),
        }
    }

    fn status(&self, message: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(message.to_string());
        }
    }

    fn record(&mut self, line: &str) {
        self.done += 1;
        let line = format!(
            "[{:>3}/{} {:>6.1}s] {line}",
            self.done,
            self.planned,
            self.start.elapsed().as_secs_f64()
        );
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                bar.inc(1);
            }
            None => eprintln!("{line}"),
        }
    }

    fn println(&self, message: &str) {
        match &self.bar {
            Some(bar) => bar.println(message),
            None => eprintln!("{message}"),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Milliseconds, with enough digits for microsecond-scale times.
pub fn fmt_ms(ms: f64) -> String {
    if ms < 0.1 {
        format!("{:.2} us", ms * 1e3)
    } else {
        format!("{ms:.3} ms")
    }
}

/// The summary table of a run, for stdout.
pub fn summary(records: &[Record]) -> String {
    let header = [
        "kernel", "impl", "shape", "t/mode", "median", "GB/s", "TFLOP/s", "rel_err", "note",
    ];
    let rows: Vec<[String; 9]> = records
        .iter()
        .map(|r| {
            let param = ["t", "mode"]
                .iter()
                .filter_map(|k| {
                    r.extra
                        .get(*k)
                        .map(|v| v.to_string().trim_matches('"').to_string())
                })
                .collect::<Vec<_>>()
                .join(" ");
            let note = ["error", "skipped"]
                .iter()
                .find_map(|k| r.extra.get(*k).and_then(Value::as_str))
                .map(|s| s.chars().take(60).collect())
                .or_else(|| {
                    (r.extra.get("check").and_then(Value::as_str) == Some("fail"))
                        .then(|| "failed the check".to_string())
                })
                .unwrap_or_default();
            [
                r.kernel.clone(),
                r.imp.clone(),
                r.shape.clone(),
                param,
                r.median_ms.map(fmt_ms).unwrap_or_else(|| "-".into()),
                r.gbps.map(|g| format!("{g:.0}")).unwrap_or_else(|| "-".into()),
                r.tflops.map(|t| format!("{t:.2}")).unwrap_or_else(|| "-".into()),
                r.rel_err
                    .map(|e| format!("{e:.1e}"))
                    .unwrap_or_else(|| "-".into()),
                note,
            ]
        })
        .collect();
    let mut width = header.map(str::len);
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&width).enumerate() {
            // Names left, numbers right.
            if (4..8).contains(&i) {
                s.push_str(&format!("{cell:>w$}  "));
            } else {
                s.push_str(&format!("{cell:<w$}  "));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&header.map(String::from));
    out.push_str(&line(&width.map(|w| "-".repeat(w))));
    for row in &rows {
        out.push_str(&line(row));
    }
    out
}

pub use crate::provenance::{driver_version, git_rev, utc_now};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_serialise_with_the_schema_keys() {
        let check = Check::new(&[1.0, f32::NAN], &[1.0, 2.0], 1e-4, "cpu_f64");
        assert!(!check.passed());
        let mut r = Record::new("add", "gpukern:add", "1024")
            .checked(&check)
            .with("n", 1024);
        r.meta = Some(Meta {
            gpu: "G".into(),
            driver: "D".into(),
            git_rev: "R".into(),
            date: utc_now(),
        });
        let v: Value = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        for key in [
            "kernel",
            "impl",
            "shape",
            "dtype",
            "median_ms",
            "gbps",
            "tflops",
            "rel_err",
            "gpu",
            "driver",
            "git_rev",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["impl"], "gpukern:add");
        assert_eq!(v["rel_err"], Value::Null);
        assert_eq!(v["check"], "fail");
        assert!(summary(&[r]).contains("failed the check"));
    }

    #[test]
    fn timed_records_get_rates() {
        let stats = crate::timing::Stats::of(vec![1.0], 1, 1, "t").unwrap();
        let r = Record::new("matmul", "cublas", "x").timed(&stats, Some(1e9), Some(2e12));
        assert_eq!((r.gbps, r.tflops), (Some(1000.0), Some(2000.0)));
    }

    #[test]
    fn dates_are_iso_utc() {
        let d = utc_now();
        assert_eq!(d.len(), 20, "{d}");
        assert!(
            d.starts_with("20") && d.ends_with('Z') && d.as_bytes()[10] == b'T',
            "{d}"
        );
    }

    #[test]
    fn panics_become_errors() {
        let r: Res<()> = catch(|| panic!("boom"));
        assert!(r.unwrap_err().to_string().contains("boom"));
    }

    #[test]
    fn a_failed_pair_records_both() {
        let meta = Meta {
            gpu: "g".into(),
            driver: "d".into(),
            git_rev: "r".into(),
            date: "t".into(),
        };
        let path = std::env::temp_dir().join(format!("gpukern-pair-{}.jsonl", std::process::id()));
        let mut sink = Sink::create(&path, meta, 4, 60.0).unwrap();
        let pair = (Record::new("k", "a", "1"), Record::new("k", "b", "1"));
        sink.item_pair(pair.clone(), || panic!("boom")).unwrap();
        sink.item_pair(pair, || {
            Ok((
                Record::new("k", "a", "1"),
                Record::new("k", "b", "1").with("x", 1),
            ))
        })
        .unwrap();
        let records = sink.finish();
        let _ = std::fs::remove_file(&path);
        let imps: Vec<&str> = records.iter().map(|r| r.imp.as_str()).collect();
        assert_eq!(imps, ["a", "b", "a", "b"]);
        assert!(records[..2].iter().all(|r| {
            r.extra
                .get("error")
                .is_some_and(|e| e.to_string().contains("boom"))
        }));
        assert!(records[3].extra.contains_key("x"));
    }
}
