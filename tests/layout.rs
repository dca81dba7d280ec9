//! The bench's layout, checked: `bench/results/` holds the committed baseline runs only, every
//! folder of `bench/experiments/` has its line in `bench/experiments/README.md`, and the Python
//! peers import one way (`peers_common` <- the family files <- the driver `peers.py`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn file_names(dir: &str) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("cannot read {dir}: {e}"))
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// Whether `name` may sit in `bench/results/`: a full run of a commit (`<rev>.jsonl`,
/// `<rev>-repeat.jsonl`), the last run and its repeat, or a plot rendered from the last run.
fn is_baseline(name: &str) -> bool {
    let rev = |s: &str| (7..=12).contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit());
    if let Some(stem) = name.strip_suffix(".jsonl") {
        return ["latest", "repeat"].contains(&stem)
            || rev(stem)
            || stem.strip_suffix("-repeat").is_some_and(rev);
    }
    name.ends_with(".png")
}

#[test]
fn bench_results_holds_baseline_runs_only() {
    let strays: Vec<String> = file_names("bench/results")
        .into_iter()
        .filter(|n| !is_baseline(n))
        .collect();
    assert!(
        strays.is_empty(),
        "bench/results/ keeps the baseline runs only (<rev>.jsonl, <rev>-repeat.jsonl, latest.jsonl, \
         repeat.jsonl, the plots of latest.jsonl); move these to bench/experiments/<topic>/ (git mv) \
         and give the topic a line in bench/experiments/README.md: {strays:?}"
    );
}

#[test]
fn a_stray_result_is_caught() {
    assert!(
        is_baseline("6088228.jsonl") && is_baseline("6cb8481-repeat.jsonl") && is_baseline("latest.jsonl")
    );
    assert!(is_baseline("matmul.png"));
    for stray in [
        "axis-vec-ab-new.jsonl",
        "5e7f33d-plans.jsonl",
        "h200-logs",
        "build-times-1b5bebf.md",
        "quick.jsonl",
    ] {
        assert!(!is_baseline(stray), "{stray}");
    }
}

#[test]
fn every_experiment_has_its_readme_line() {
    let readme =
        fs::read_to_string(root().join("bench/experiments/README.md")).expect("bench/experiments/README.md");
    let listed: BTreeSet<String> = readme
        .lines()
        .filter_map(|l| {
            l.strip_prefix("| `")?
                .split_once("/`")
                .map(|(name, _)| name.to_string())
        })
        .collect();
    let folders: BTreeSet<String> = file_names("bench/experiments")
        .into_iter()
        .filter(|n| root().join("bench/experiments").join(n).is_dir())
        .collect();
    let missing: Vec<_> = folders.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&folders).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "bench/experiments/README.md has a line (| `topic/` | what it holds |) per folder: \
         folders without a line {missing:?}, lines without a folder {stale:?}"
    );
}

/// The bench modules each Python file under `bench/` imports (`import peers_x`, `from peers_x
/// import ...`), by file stem.
fn python_imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for name in file_names("bench") {
        let Some(stem) = name.strip_suffix(".py") else {
            continue;
        };
        let text = fs::read_to_string(root().join("bench").join(&name)).unwrap_or_default();
        out.insert(stem.to_string(), imports_of(&text));
    }
    out
}

fn imports_of(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let l = line.trim();
        let module = if let Some(rest) = l.strip_prefix("import ") {
            rest.split([' ', ',']).next()
        } else if let Some(rest) = l.strip_prefix("from ") {
            rest.split(' ').next()
        } else {
            None
        };
        if let Some(m) = module
            && (m == "peers" || m.starts_with("peers_") || m.starts_with("report"))
        {
            found.insert(m.to_string());
        }
    }
    found
}

/// What breaks the one-way rule: `peers_common` importing a peers file, a family file importing
/// the driver, or a circle among the family files.
fn import_faults(imports: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut faults = Vec::new();
    for (file, deps) in imports {
        if !file.starts_with("peers") {
            continue;
        }
        for dep in deps {
            if file == "peers_common" && dep.starts_with("peers") {
                faults.push(format!(
                    "peers_common imports {dep}: it imports nothing of the bench"
                ));
            }
            if dep == "peers" {
                faults.push(format!("{file} imports the driver peers.py"));
            }
        }
    }
    // A circle: a file that reaches itself through the imports.
    for start in imports.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&String> = imports[start].iter().collect();
        while let Some(next) = stack.pop() {
            if next == start {
                faults.push(format!("{start} imports itself through a circle"));
                break;
            }
            if seen.insert(next.clone())
                && let Some(deps) = imports.get(next)
            {
                stack.extend(deps.iter());
            }
        }
    }
    faults
}

#[test]
fn python_peers_import_one_way() {
    let imports = python_imports();
    assert!(
        imports.contains_key("peers_common"),
        "bench/peers_common.py is missing"
    );
    let faults = import_faults(&imports);
    assert!(faults.is_empty(), "the Python bench's imports: {faults:#?}");
}

#[test]
fn a_planted_import_circle_is_caught() {
    let mut imports = python_imports();
    imports
        .get_mut("peers_common")
        .unwrap()
        .insert("peers_matmul".to_string());
    let faults = import_faults(&imports);
    assert!(
        faults
            .iter()
            .any(|f| f.contains("peers_common imports peers_matmul")),
        "{faults:?}"
    );
    assert!(faults.iter().any(|f| f.contains("circle")), "{faults:?}");
    assert_eq!(
        imports_of("import peers_common as C\nfrom peers_matmul import x\nimport torch\n"),
        BTreeSet::from(["peers_common".to_string(), "peers_matmul".to_string()])
    );
}
