//! The figure check: every measured figure written in the project's prose names the committed
//! record file it comes from, and that file (only that one) gives it; or the line says where
//! else the figure comes from.
//!
//! # What is scanned
//! Every line of `README.md`, `BENCHMARKS.md`, `bench/targets.md`, `kernels-gpu/README.md` and the
//! Markdown files under `docs/`, and the comment text (from the first `//` of a line on) of every
//! `.rs` file under `host/` and `kernels-gpu/src/` and `gpukern-device/src/`.
//!
//! # Which record file a figure comes from
//! The committed record files are the `.jsonl` files under `bench/results/` (baseline runs) and
//! `bench/experiments/` (A/B runs, sweeps; any depth). Prose names one by a path ending in
//! `.jsonl`, whole (`bench/results/6088228.jsonl`) or its last components (`6088228.jsonl`,
//! `h200-logs/914dda6-matmul-half.jsonl`), with `{a,b}` alternatives and `*` allowed
//! (`warp-packed-ab-{old,new}.jsonl`); a name must resolve to at least one committed file, and
//! a name that resolves to none is an offence itself (a moved or deleted record). The figures of a
//! line are checked against the files named:
//! 1. on the same line;
//! 2. else on the nearest line above it that names one in the same paragraph, and on the line
//!    below it if that is in the same paragraph (a name that wrapped onto the next line): the
//!    files of both (a paragraph ends at a blank line, a heading or the start of a list item; in a
//!    `.rs` file, at the end of a comment block);
//! 3. else in prose, the file of the last `<!-- figures: PATH -->` marker above the line
//!    (BENCHMARKS.md opens with the one of the run it renders; `bench/report.py` writes it).
//!
//! A figure with none of these in prose is an offence ("names no record file"). In code comments a
//! figure with none is still matched against every committed file, as before (measurements are
//! moving out of comments into `bench/targets.md`; a comment that names its file is held to it).
//!
//! # What a figure is
//! Only numbers carrying a measurement unit are figures; sizes (`4096^3`, `8192x128`,
//! `128 x 256`), counts, exponents and bounds without a unit are not checked.
//! * `NUMBER UNIT`: a decimal number (`46`, `46.13`; not glued to a letter, digit, `.`, `^` or
//!   `_`, nor to `:` as in a test path `softmax_plan::255x`, on its left) followed by at most one space and a unit: `TFLOP/s`, `GFLOP/s`, `TB/s`,
//!   `GB/s`, `ms`, `us`, `µs`; or followed directly (no space) by `%` or by `x` that is not
//!   followed by a letter or digit (`1.35x` is a ratio, `8192x128` a shape).
//! * A relative error written in scientific notation with a fractional mantissa (`6.9e-4`).
//! * Pairs and ranges: in `A - B UNIT`, `A-B UNIT`, `A / B UNIT`, `A -> B UNIT`, `A to B UNIT`,
//!   `A vs B UNIT` and `A against B UNIT` the bare number `A` is a figure of the same unit
//!   (chains such as `A -> B -> C UNIT` too).
//!
//! # What matches a record
//! The figure must equal, at the precision it is written with (half a unit of its last digit),
//! a value of some record of its file(s):
//! `TFLOP/s` <-> `tflops`, `GFLOP/s` <-> `tflops * 1000`, `TB/s` <-> `gbps / 1000`, `GB/s` <->
//! `gbps` (or an all-reduce's `busbw_gb_s` / `algbw_gb_s`), `ms` <-> `median_ms`, `us`/`µs` <->
//! `median_ms * 1000` (or a chain's `us_per_kernel`), scientific <-> `rel_err`.
//! A ratio `x` or a percentage `%` must be the ratio `q = a / b` of two records `a`, `b` of one
//! of its files, compared on `tflops`, `gbps` or `1 / median_ms`, where both have the same `shape`
//! or `b` is a device-to-device `copy` record (the memory-bound ceiling report.py uses); `x`
//! matches `q`, `%` matches `100 q`, `100 (q - 1)` or `100 (1 - q)` (a share or a change).
//!
//! # What is exempt (narrow, explicit)
//! * A number right after a comparison (`>=`, `<=`, `>`, `<`, `≥`, `≤`): a target, not a
//!   measurement (`>= 90% of cuBLAS`).
//! * Text inside an inline code span (backticks): a formula or code (`1e-3 + k * 1.2e-7`).
//! * A line that carries a source marker `quoted: <source>` (an external source: a datasheet,
//!   a paper; in prose written `[quoted: ...]`) or `derived: <how>` (a figure computed from
//!   other figures, not measured): the whole line is exempt, and the marker must name something
//!   (at least three characters after the colon).
//!
//! Every offending figure is printed with `file:line`.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The prose files checked line by line, relative to the repository root.
const PROSE: [&str; 4] = [
    "README.md",
    "BENCHMARKS.md",
    "bench/targets.md",
    "kernels-gpu/README.md",
];
/// Folders whose `.rs` files have their comments checked.
const CODE_DIRS: [&str; 3] = ["host", "kernels-gpu/src", "gpukern-device/src"];
/// Folders of Markdown files checked as prose, at any depth.
const PROSE_DIRS: [&str; 1] = ["docs"];
/// Folder of the committed baseline runs.
const RESULTS_DIR: &str = "bench/results";
/// Folders of the committed record files (`.jsonl`, at any depth): baselines and experiments.
const RECORD_DIRS: [&str; 2] = [RESULTS_DIR, "bench/experiments"];

/// The unit of a figure, and so the record field it is matched against.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Unit {
    Tflops,
    Gflops,
    TbPerS,
    GbPerS,
    Ms,
    Us,
    Percent,
    Ratio,
    RelErr,
}

impl Unit {
    /// Units written after a number (at most one space between), longest spelling first.
    const SPELLED: [(&'static str, Unit); 7] = [
        ("TFLOP/s", Unit::Tflops),
        ("GFLOP/s", Unit::Gflops),
        ("TB/s", Unit::TbPerS),
        ("GB/s", Unit::GbPerS),
        ("ms", Unit::Ms),
        ("us", Unit::Us),
        ("µs", Unit::Us),
    ];
}

/// One figure found in a line: its text, value, the half-unit of its last digit, its unit.
#[derive(Clone, Debug)]
struct Figure {
    text: String,
    value: f64,
    tolerance: f64,
    unit: Unit,
}

/// The records of one committed run (one `.jsonl` file), as the values the matcher needs.
#[derive(Debug, Default)]
struct Run {
    records: Vec<Rec>,
}

/// The fields of one record that figures are matched against.
#[derive(Clone, Debug, Default)]
struct Rec {
    shape: String,
    imp: String,
    median_ms: Option<f64>,
    gbps: Option<f64>,
    tflops: Option<f64>,
    rel_err: Option<f64>,
    /// Per-kernel time of a replayed or launched chain (`graph_replay`), in microseconds.
    us_per_kernel: Option<f64>,
    /// NCCL's bus and algorithm bandwidths of an all-reduce, GB/s.
    busbw: Option<f64>,
    algbw: Option<f64>,
}

impl Rec {
    fn from_json(v: &Value) -> Rec {
        let num = |k: &str| v.get(k).and_then(Value::as_f64).filter(|x| x.is_finite());
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        Rec {
            shape: text("shape"),
            imp: text("impl"),
            median_ms: num("median_ms"),
            gbps: num("gbps"),
            tflops: num("tflops"),
            rel_err: num("rel_err"),
            us_per_kernel: num("us_per_kernel"),
            busbw: num("busbw_gb_s"),
            algbw: num("algbw_gb_s"),
        }
    }

    /// The values a ratio may be taken of: rates, and `1 / median_ms` (a rate per call).
    fn rates(&self) -> [Option<f64>; 3] {
        [
            self.tflops,
            self.gbps,
            self.median_ms.filter(|&m| m > 0.0).map(|m| 1.0 / m),
        ]
    }
}

fn close(value: f64, figure: &Figure) -> bool {
    (value - figure.value).abs() <= figure.tolerance * (1.0 + 1e-9) + 1e-12 * value.abs()
}

/// Whether some record (or pair of records) of `run` gives `figure` at its precision.
fn matches(run: &Run, figure: &Figure) -> bool {
    let direct = |f: fn(&Rec) -> Option<f64>| run.records.iter().filter_map(f).any(|v| close(v, figure));
    match figure.unit {
        Unit::Tflops => direct(|r| r.tflops),
        Unit::Gflops => direct(|r| r.tflops.map(|t| t * 1e3)),
        Unit::TbPerS => direct(|r| r.gbps.map(|g| g / 1e3)),
        Unit::GbPerS => direct(|r| r.gbps) || direct(|r| r.busbw) || direct(|r| r.algbw),
        Unit::Ms => direct(|r| r.median_ms),
        Unit::Us => direct(|r| r.median_ms.map(|m| m * 1e3)) || direct(|r| r.us_per_kernel),
        Unit::RelErr => direct(|r| r.rel_err),
        Unit::Percent | Unit::Ratio => run.records.iter().any(|a| {
            run.records.iter().any(|b| {
                let comparable = a.shape == b.shape || b.imp == "copy";
                comparable
                    && a.rates().iter().zip(b.rates()).any(|(x, y)| match (x, y) {
                        (Some(x), Some(y)) if y > 0.0 => {
                            let q = x / y;
                            if figure.unit == Unit::Ratio {
                                close(q, figure)
                            } else {
                                [q, q - 1.0, 1.0 - q].iter().any(|&p| close(100.0 * p, figure))
                            }
                        }
                        _ => false,
                    })
            })
        }),
    }
}

// --- Scanning ---------------------------------------------------------------------------------

/// A number token in a line: byte range, text, value, decimals and (scientific) exponent.
#[derive(Clone, Debug)]
struct Number {
    start: usize,
    end: usize,
    text: String,
    value: f64,
    tolerance: f64,
    scientific: bool,
}

/// Every number of `line` that starts a token (not glued to a word, a decimal point, a `^`, an
/// `_` or a `:` on its left).
fn numbers(line: &str) -> Vec<Number> {
    let bytes = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let glued = i > 0 && {
            let p = bytes[i - 1];
            p.is_ascii_alphanumeric() || matches!(p, b'.' | b'^' | b'_' | b':') || p >= 0x80
        };
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let mut decimals = 0i32;
        if i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
                decimals += 1;
            }
        }
        let mut exponent = 0i32;
        let mut scientific = false;
        if decimals > 0 && i < bytes.len() && bytes[i] == b'e' {
            let mut j = i + 1;
            if j < bytes.len() && matches!(bytes[j], b'-' | b'+') {
                j += 1;
            }
            let digits = j;
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
            if j > digits {
                exponent = line[i + 1..j].parse().unwrap_or(0);
                scientific = true;
                i = j;
            }
        }
        if glued {
            continue;
        }
        let text = &line[start..i];
        let Ok(value) = text.parse::<f64>() else { continue };
        out.push(Number {
            start,
            end: i,
            text: text.to_string(),
            value,
            tolerance: 0.5 * 10f64.powi(exponent - decimals),
            scientific,
        });
    }
    out
}

/// The unit right after byte `end` of `line`, and where it ends.
fn unit_after(line: &str, end: usize) -> Option<(Unit, usize)> {
    let rest = &line[end..];
    let followed_by_word = |s: &str| s.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_');
    if rest.starts_with('%') {
        return Some((Unit::Percent, end + 1));
    }
    if let Some(after) = rest.strip_prefix('x')
        && !followed_by_word(after)
    {
        return Some((Unit::Ratio, end + 1));
    }
    let spaced = rest.strip_prefix(' ').unwrap_or(rest);
    let skipped = rest.len() - spaced.len();
    for (spelling, unit) in Unit::SPELLED {
        if let Some(after) = spaced.strip_prefix(spelling)
            && !followed_by_word(after)
        {
            return Some((unit, end + skipped + spelling.len()));
        }
    }
    None
}

/// Connectors that make the bare number on their left a figure of the unit on their right.
const CONNECTORS: [&str; 7] = ["->", "-", "–", "/", "to", "vs", "against"];

/// Whether the text before byte `start` ends with a comparison (a target, not a measurement).
fn after_comparison(line: &str, start: usize) -> bool {
    let before = line[..start].trim_end();
    [">=", "<=", "≥", "≤", ">", "<"]
        .iter()
        .any(|c| before.ends_with(c))
        && !before.ends_with("->")
}

/// Byte ranges of inline code spans (between backticks) in `line`.
fn code_spans(line: &str) -> Vec<(usize, usize)> {
    let ticks: Vec<usize> = line.match_indices('`').map(|(i, _)| i).collect();
    ticks.chunks_exact(2).map(|p| (p[0], p[1])).collect()
}

/// Whether `line` names a source for its figures (`quoted: <source>` or `derived: <how>`).
fn has_source_marker(line: &str) -> bool {
    ["quoted:", "derived:"].iter().any(|marker| {
        line.match_indices(marker).any(|(i, _)| {
            let named = line[i + marker.len()..].trim_start();
            named.chars().take_while(|&c| c != ']' && c != ')').count() >= 3
        })
    })
}

/// The figures of one line of prose or comment text, after the exemptions.
fn figures(line: &str) -> Vec<Figure> {
    if has_source_marker(line) {
        return Vec::new();
    }
    let spans = code_spans(line);
    let in_code = |pos: usize| spans.iter().any(|&(a, b)| a < pos && pos < b);
    let nums = numbers(line);
    let mut found: Vec<(usize, Figure)> = Vec::new();
    for (index, n) in nums.iter().enumerate() {
        let unit = if n.scientific {
            Some(Unit::RelErr)
        } else {
            unit_after(line, n.end).map(|(u, _)| u)
        };
        let Some(unit) = unit else { continue };
        // This number and the bare numbers chained to it on its left by connectors.
        let mut chain = vec![n.clone()];
        let mut k = index;
        while unit != Unit::RelErr && k > 0 {
            let left = &nums[k - 1];
            let between = line[left.end..chain[chain.len() - 1].start].trim();
            if unit_after(line, left.end).is_some() || !CONNECTORS.contains(&between) {
                break;
            }
            chain.push(left.clone());
            k -= 1;
        }
        for c in chain {
            if in_code(c.start) || after_comparison(line, c.start) || found.iter().any(|(s, _)| *s == c.start)
            {
                continue;
            }
            found.push((
                c.start,
                Figure {
                    text: format!("{} {unit:?}", c.text),
                    value: c.value,
                    tolerance: c.tolerance,
                    unit,
                },
            ));
        }
    }
    found.sort_by_key(|(s, _)| *s);
    found.into_iter().map(|(_, f)| f).collect()
}

/// The text of `line` that is checked in a `.rs` file: what follows its first `//`.
fn comment_text(line: &str) -> Option<&str> {
    line.find("//").map(|i| &line[i..])
}

/// An offending figure: where it is and what it is.
#[derive(Debug)]
struct Offence {
    place: String,
    /// The figure (`46.08 Tflops`) or the record name at fault.
    figure: String,
    /// What is wrong with it.
    why: String,
    line: String,
}

// --- Record files and the names prose gives them ----------------------------------------------

/// The committed record files: each path (relative to the root, `/`-separated) with its run.
#[derive(Debug, Default)]
struct Records {
    files: Vec<(String, Run)>,
}

/// Record names in other engineers' files that still give a moved record's old path (issue 33's
/// renovation moved the A/B runs to `bench/experiments/`): each resolves by its file name until
/// its file is edited, and an entry whose name is gone from its file fails the test, so the list
/// only shrinks. The edits are in the renovation's report.
const PENDING_PATH_FIXES: [(&str, &str); 0] = [];

/// The marker that names the record file of the figures below it (until the next marker).
const MARKER: &str = "<!-- figures:";

/// The names of record files in `line`: each run of path characters that ends in `.jsonl` and
/// starts with a letter, digit or `*` (`-peers.jsonl`, shorthand for a sibling of the file just
/// named, and templates such as `<rev>.jsonl` are not names).
fn record_names(line: &str) -> Vec<String> {
    let path_char = |c: char| c.is_ascii_alphanumeric() || "_./{},*-".contains(c);
    let mut out = Vec::new();
    for (end, _) in line.match_indices(".jsonl") {
        let after = &line[end + ".jsonl".len()..];
        if after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let start = line[..end]
            .char_indices()
            .rev()
            .take_while(|&(_, c)| path_char(c))
            .last()
            .map_or(end, |(i, _)| i);
        let name = line[start..end + ".jsonl".len()].trim_start_matches(['.', ',', '/', '}']);
        let template = line[..start].ends_with('>');
        if !template
            && name.len() > ".jsonl".len()
            && name.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '*')
        {
            out.push(name.to_string());
        }
    }
    out
}

/// `{a,b}` alternatives spelled out: `x-{a,b}.jsonl` -> `x-a.jsonl`, `x-b.jsonl`.
fn expand_braces(name: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (name.find('{'), name.find('}')) else {
        return vec![name.to_string()];
    };
    if close < open {
        return vec![name.to_string()];
    }
    name[open + 1..close]
        .split(',')
        .flat_map(|alt| expand_braces(&format!("{}{alt}{}", &name[..open], &name[close + 1..])))
        .collect()
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.starts_with(head)
                && (head.len()..=text.len())
                    .filter(|&i| text.is_char_boundary(i))
                    .any(|i| glob(tail, &text[i..]))
        }
    }
}

impl Records {
    /// The indices of the files `name` names: a file whose path is `name`, or ends with `/` and
    /// `name` (whole components), for each of its alternatives.
    fn resolve(&self, name: &str) -> Vec<usize> {
        let alternatives = expand_braces(name);
        (0..self.files.len())
            .filter(|&i| {
                let path = &self.files[i].0;
                alternatives
                    .iter()
                    .any(|alt| glob(alt, path) || glob(&format!("*/{alt}"), path))
            })
            .collect()
    }
}

/// Whether prose line `line` starts a paragraph of its own: a heading or a list item.
fn starts_paragraph(line: &str) -> bool {
    let t = line.trim_start();
    let numbered = t
        .split_once(". ")
        .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    t.starts_with('#') || t.starts_with("- ") || t.starts_with("* ") || numbered
}

/// The figures of `text` (a file's lines) that their record files do not give, and the names of
/// record files that name no committed file. `rust`: `text` is a `.rs` file, whose comments are
/// read and whose figures that name no file are matched against every file.
fn check_text(name: &str, text: &str, rust: bool, records: &Records) -> Vec<Offence> {
    let lines: Vec<&str> = text.lines().collect();
    let checked: Vec<Option<&str>> = lines
        .iter()
        .map(|&l| if rust { comment_text(l) } else { Some(l) })
        .collect();
    let mut out = Vec::new();
    let offence = |i: usize, figure: String, why: String| Offence {
        place: format!("{name}:{}", i + 1),
        figure,
        why,
        line: lines[i].trim().to_string(),
    };
    // The files each line names, and each line's paragraph.
    let mut named: Vec<Vec<usize>> = Vec::with_capacity(lines.len());
    let mut paragraph: Vec<usize> = Vec::with_capacity(lines.len());
    let mut current = 0;
    for (i, text) in checked.iter().enumerate() {
        let body = text.map(|t| t.trim_start_matches('/').trim_start_matches('!').trim());
        // A marker line is a paragraph of its own: it sets the default, it names no paragraph's file.
        let blank = body.is_none_or(|b| b.is_empty() || b.starts_with(MARKER));
        if blank || (!rust && starts_paragraph(text.unwrap_or_default())) {
            current += 1;
        }
        paragraph.push(current);
        if blank {
            current += 1;
        }
        let mut files = Vec::new();
        for n in text.map(record_names).unwrap_or_default() {
            let mut found = records.resolve(&n);
            if found.is_empty() && PENDING_PATH_FIXES.contains(&(name, n.as_str())) {
                found = records.resolve(n.rsplit('/').next().unwrap_or(&n));
            }
            if found.is_empty() {
                out.push(offence(i, n, "names no committed record file".to_string()));
            }
            files.extend(found);
        }
        named.push(files);
    }
    let every: Vec<usize> = (0..records.files.len()).collect();
    let mut default: Option<Vec<usize>> = None;
    for (i, text) in checked.iter().enumerate() {
        let Some(text) = text else { continue };
        if !rust && text.trim_start().starts_with(MARKER) {
            default = Some(named[i].clone());
        }
        let figures = figures(text);
        if figures.is_empty() {
            continue;
        }
        let above = (0..i)
            .rev()
            .take_while(|&j| paragraph[j] == paragraph[i])
            .find(|&j| !named[j].is_empty());
        let below =
            Some(i + 1).filter(|&j| j < lines.len() && paragraph[j] == paragraph[i] && !named[j].is_empty());
        let near: Vec<usize> = [above, below]
            .into_iter()
            .flatten()
            .flat_map(|j| named[j].iter().copied())
            .collect();
        let sources = if !named[i].is_empty() {
            Some(&named[i])
        } else if !near.is_empty() {
            Some(&near)
        } else if rust {
            Some(&every)
        } else {
            default.as_ref()
        };
        let Some(sources) = sources else {
            for figure in figures {
                out.push(offence(i, figure.text, "names no record file".to_string()));
            }
            continue;
        };
        for figure in figures {
            if !sources.iter().any(|&f| matches(&records.files[f].1, &figure)) {
                let files: Vec<&str> = sources.iter().map(|&f| records.files[f].0.as_str()).collect();
                out.push(offence(
                    i,
                    figure.text,
                    format!("matches no record of {}", files.join(", ")),
                ));
            }
        }
    }
    out
}

// --- The repository ---------------------------------------------------------------------------

/// The variable that names the repository's root for a test binary run from a copy elsewhere.
const ROOT_ENV: &str = "GPUKERN_REPO_ROOT";

/// The repository's root, whose prose and `bench/results/` the test reads: `GPUKERN_REPO_ROOT`
/// if set, else where the test was built if that still holds the records, else the current
/// directory if it does (a test binary carried to another machine and run from a copy of the
/// repository). Panics with the folders it looked in otherwise.
fn root() -> PathBuf {
    let has_records = |p: &Path| p.join(RESULTS_DIR).is_dir();
    if let Some(dir) = std::env::var_os(ROOT_ENV) {
        let dir = PathBuf::from(dir);
        assert!(
            has_records(&dir),
            "{ROOT_ENV}={} has no {RESULTS_DIR}/: it must name the repository's root",
            dir.display()
        );
        return dir;
    }
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let here = std::env::current_dir().unwrap_or_default();
    [built.clone(), here.clone()]
        .into_iter()
        .find(|p| has_records(p))
        .unwrap_or_else(|| {
            panic!(
                "the figure test needs the repository's prose and its {RESULTS_DIR}/ folder of \
                 committed records: neither {} (where it was built) nor {} (the current \
                 directory) has them; run it from the repository's root or set {ROOT_ENV}",
                built.display(),
                here.display()
            )
        })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `.jsonl` file under `dir`, at any depth.
fn jsonl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.is_dir() {
            jsonl_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

/// Every committed record file: the `.jsonl` files of `bench/results/` and `bench/experiments/`.
fn committed_records() -> Records {
    let root = root();
    let mut paths = Vec::new();
    for dir in RECORD_DIRS {
        jsonl_files(&root.join(dir), &mut paths);
    }
    paths.sort();
    let files = paths
        .into_iter()
        .map(|path| {
            let text = fs::read_to_string(&path).unwrap_or_default();
            let records = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .map(|v| Rec::from_json(&v))
                .collect();
            let name = path.strip_prefix(&root).unwrap_or(&path);
            let name = name
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            (name, Run { records })
        })
        .collect();
    Records { files }
}

/// The prose files: [`PROSE`] and the Markdown files under [`PROSE_DIRS`].
fn prose_files() -> Vec<String> {
    let mut names: Vec<String> = PROSE.iter().map(|s| s.to_string()).collect();
    for dir in PROSE_DIRS {
        let mut found = Vec::new();
        markdown_files(&root().join(dir), &mut found);
        found.sort();
        names.extend(
            found
                .iter()
                .map(|p| p.strip_prefix(root()).unwrap_or(p).display().to_string()),
        );
    }
    names
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

#[test]
fn every_figure_comes_from_the_record_file_it_names() {
    let records = committed_records();
    assert!(
        records.files.iter().any(|(_, run)| !run.records.is_empty()),
        "no records under {RECORD_DIRS:?}: the figure check has nothing to match against"
    );
    let mut offences = Vec::new();
    for name in prose_files() {
        let path = root().join(&name);
        let text =
            fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        offences.extend(check_text(&name, &text, false, &records));
    }
    let mut files = Vec::new();
    for dir in CODE_DIRS {
        rust_files(&root().join(dir), &mut files);
    }
    assert!(!files.is_empty(), "no .rs files found under {CODE_DIRS:?}");
    for path in files {
        let text =
            fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let name = path.strip_prefix(root()).unwrap_or(&path).display().to_string();
        offences.extend(check_text(&name, &text, true, &records));
    }
    for (file, name) in PENDING_PATH_FIXES {
        let text = fs::read_to_string(root().join(file)).unwrap_or_default();
        if !text.contains(name) {
            offences.push(Offence {
                place: file.to_string(),
                figure: name.to_string(),
                why: "is fixed: take it off PENDING_PATH_FIXES".to_string(),
                line: String::new(),
            });
        }
    }
    let report: Vec<String> = offences
        .iter()
        .map(|o| format!("{}: {} {}\n    {}", o.place, o.figure, o.why, o.line))
        .collect();
    assert!(
        offences.is_empty(),
        "{} figure(s) or record names do not check out. A figure names its record file (on its \
         line, its paragraph or a `<!-- figures: PATH -->` marker above) and must match a record \
         of that file: render it from a committed run (bench/report.py), name the file it comes \
         from, or mark the line `quoted: <external source>` / `derived: <how>` (tests/figures.rs \
         says what counts):\n{}",
        offences.len(),
        report.join("\n")
    );
}

// --- The matcher, on planted figures -----------------------------------------------------------

#[cfg(test)]
mod matcher {
    use super::*;

    fn rec(shape: &str, imp: &str, ms: f64, gbps: Option<f64>, tflops: Option<f64>) -> Rec {
        Rec {
            shape: shape.to_string(),
            imp: imp.to_string(),
            median_ms: Some(ms),
            gbps,
            tflops,
            ..Rec::default()
        }
    }

    /// A run like the committed one of 8f3a480 at 4096^3: gpukern 42.04, cuBLAS 51.39 TFLOP/s.
    fn run() -> Run {
        let mut records = vec![
            rec("4096x4096x4096", "gpukern:fast", 3.269, None, Some(42.04)),
            rec("4096x4096x4096", "cublas", 2.674, None, Some(51.39)),
            rec("268435456", "copy", 0.504, Some(4260.47), None),
            rec("8192x4096", "gpukern:one-pass", 0.0728, Some(3689.2), None),
            rec("1024", "gpukern:scalar", 0.003563, None, None),
            rec("1024", "cudarc", 0.003453, None, None),
        ];
        records.push(Rec {
            rel_err: Some(2.61e-4),
            ..rec("4096x4096x4096", "gpukern:tf32", 1.0, None, Some(144.3))
        });
        Run { records }
    }

    /// Two committed files: `bench/results/8f3a480.jsonl` ([`run`]) and an experiment whose
    /// gpukern row measured 46.08 TFLOP/s.
    fn records() -> Records {
        let other = Run {
            records: vec![rec("4096x4096x4096", "gpukern:fast", 2.983, None, Some(46.08))],
        };
        Records {
            files: vec![
                ("bench/experiments/tile/tile-ab-new.jsonl".to_string(), other),
                ("bench/results/8f3a480.jsonl".to_string(), run()),
            ],
        }
    }

    /// The offences of `text` (figures and names), after a marker naming 8f3a480's run.
    fn offending(text: &str) -> Vec<String> {
        let marked = format!("<!-- figures: bench/results/8f3a480.jsonl -->\n{text}");
        check_text("planted.md", &marked, false, &records())
            .into_iter()
            .map(|o| o.figure)
            .collect()
    }

    /// The offences of `text` as it is, no marker.
    fn unmarked(text: &str) -> Vec<String> {
        check_text("planted.md", text, false, &records())
            .into_iter()
            .map(|o| format!("{} {}", o.figure, o.why))
            .collect()
    }

    #[test]
    fn a_planted_unrecorded_figure_is_caught() {
        // The example: 46.08 TFLOP/s was never recorded (the run has 42.04).
        assert_eq!(
            offending("matmul: 46.08 / 51.39 TFLOP/s = 89.7%"),
            ["46.08 Tflops", "89.7 Percent"]
        );
        assert_eq!(offending("7.4 -> 6.5 us at 8192x128"), ["7.4 Us", "6.5 Us"]);
        assert_eq!(
            offending("truncating: 160-179 TFLOP/s"),
            ["160 Tflops", "179 Tflops"]
        );
        assert_eq!(
            offending("error 6.9e-4 for the truncating tiles"),
            ["6.9e-4 RelErr"]
        );
        assert_eq!(offending("1.35x faster"), ["1.35 Ratio"]);
        // In Rust, only comments are read, and a planted comment is caught there too.
        let code = "let x = 46.09; // 46.09 TFLOP/s on the H200\nlet y = \"3.3 ms\";";
        let found = check_text("planted.rs", code, true, &records());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].place, "planted.rs:1");
    }

    #[test]
    fn recorded_figures_pass_at_their_precision() {
        assert!(offending("42.04 / 51.39 TFLOP/s = 81.8%, 42.0 TFLOP/s, 42 TFLOP/s").is_empty());
        assert!(offending("3689 GB/s = 86.6% of copy (4260 GB/s), 3.69 TB/s").is_empty());
        assert!(offending("3.56 vs 3.45 us = +3%, 1.03x").is_empty());
        assert!(offending("rel_err 2.6e-4").is_empty());
        // One digit more than the record supports is a different figure.
        assert_eq!(offending("42.05 TFLOP/s"), ["42.05 Tflops"]);
    }

    #[test]
    fn exemptions_are_narrow() {
        // Targets, sizes, formulas and marked sources are not measurements.
        assert!(offending(">= 90% of cuBLAS at 4096^3, <= 5 us per call, ≥ 85%").is_empty());
        assert!(offending("8192x128 rows, 128 x 256 tiles, 4x4 per thread, 2^24 columns").is_empty());
        // A number glued to `::` is part of a name (a test path), not a figure.
        assert!(offending("softmax_plan::255x softmax_plan::256x").is_empty());
        assert_eq!(offending("plan: 255x"), ["255 Ratio"]);
        assert!(offending("about `1e-3 + k * 1.2e-7`, `u = 2^-11`").is_empty());
        assert!(offending("HBM ~4.8 TB/s [quoted: NVIDIA H200 datasheet]").is_empty());
        // A marker must name its source, and applies only to its own line.
        assert_eq!(offending("4.8 TB/s [quoted: ]"), ["4.8 TbPerS"]);
        assert_eq!(offending("[quoted: datasheet]\n4.8 TB/s").len(), 1);
        // A figure after "->" is not a target.
        assert_eq!(offending("x -> 99 us"), ["99 Us"]);
    }

    #[test]
    fn percentages_need_comparable_records() {
        // 3.269 ms / 0.0728 ms are of different shapes and neither is a copy: no ratio.
        let q = 100.0 * 0.0728 / 3.269;
        assert_eq!(offending(&format!("{q:.1}%")).len(), 1);
    }

    #[test]
    fn a_figure_is_checked_against_the_file_it_names_only() {
        // 46.08 is in the experiment, not in the run the marker names: caught...
        assert_eq!(offending("46.08 TFLOP/s"), ["46.08 Tflops"]);
        // ...and passes where its line or paragraph names the experiment.
        assert!(offending("46.08 TFLOP/s (`tile-ab-new.jsonl`)").is_empty());
        assert!(
            offending("In run `experiments/tile/tile-ab-{new,old}.jsonl` the tile\nreached 46.08 TFLOP/s")
                .is_empty()
        );
        assert!(offending("reached 46.08 TFLOP/s in the A/B\n(`tile-ab-*.jsonl`)").is_empty());
        // The file named governs, not any file: 42.04 is 8f3a480's figure, not the experiment's.
        assert_eq!(offending("42.04 TFLOP/s (`tile-ab-new.jsonl`)"), ["42.04 Tflops"]);
        // A paragraph ends at a blank line and at a list item; the marker applies after it.
        assert_eq!(
            offending("In `tile-ab-new.jsonl`.\n\n46.08 TFLOP/s"),
            ["46.08 Tflops"]
        );
        assert_eq!(
            offending("- In `tile-ab-new.jsonl`.\n- 46.08 TFLOP/s"),
            ["46.08 Tflops"]
        );
        // Without a marker, a figure must name its file.
        assert_eq!(
            unmarked("matmul 42.04 TFLOP/s"),
            ["42.04 Tflops names no record file"]
        );
        assert!(unmarked("matmul 42.04 TFLOP/s (`bench/results/8f3a480.jsonl`)").is_empty());
        // A name that no committed file answers to is caught (a moved or deleted record), and a
        // name must match whole path components.
        assert_eq!(
            unmarked("see `bench/results/tile-ab-new.jsonl`"),
            ["bench/results/tile-ab-new.jsonl names no committed record file"]
        );
        assert_eq!(
            unmarked("see `ab-new.jsonl`"),
            ["ab-new.jsonl names no committed record file"]
        );
        // Templates and sibling shorthands are not names.
        assert!(
            unmarked("kept as `bench/results/<rev>.jsonl` (`tile-ab-new.jsonl`, `-peers.jsonl`)").is_empty()
        );
    }

    #[test]
    fn record_names_expand_and_match() {
        assert_eq!(
            record_names("(`a-{old,new}.jsonl`, b.jsonl; x.jsonlz)"),
            ["a-{old,new}.jsonl", "b.jsonl"]
        );
        assert_eq!(expand_braces("a-{old,new}.jsonl"), ["a-old.jsonl", "a-new.jsonl"]);
        assert!(glob("x-*.jsonl", "x-ab.jsonl") && !glob("x-*.jsonl", "y-ab.jsonl"));
        assert_eq!(records().resolve("*.jsonl").len(), 2);
        assert_eq!(records().resolve("results/8f3a480.jsonl"), [1]);
    }
}
