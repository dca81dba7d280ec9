//! Docs that cannot go stale: the README's "How it works" tree and the crate-level module lists
//! are checked against the real tree, and the counts of entry points in prose against the kernel
//! registry.
//!
//! # The README's tree
//! The fenced block after `## How it works` lists entries, a path at the start of a line
//! (indented by 0, 2 or 4 spaces), each followed by its description; an entry without indentation
//! is relative to the root, an indented one to the folder entry above it. The test fails when
//! * an entry names a path that does not exist (a file or folder moved or deleted);
//! * a folder at the root (not hidden, not `target`) or `build.rs` is not named;
//! * a module of `host/`, `kernels-gpu/src/` or `gpukern-device/src/`, or a child of a folder
//!   entry inside one of them (`ops/`, `raw/`, ...), is not named in its folder's part of the
//!   tree (its line, the lines of its description and of its children): as `name`, `name.rs` or
//!   `name/`, a whole word.
//!
//! It compares the doc with whatever the tree is, so after a restructuring it prints what each
//! folder holds now: refresh the README from that.
//!
//! # The crate-level module lists
//! Every `mod` declared in `host/lib.rs` and `kernels-gpu/src/lib.rs` is named in that file's
//! `//!` docs (a whole word, as [`name`] or `name`).
//!
//! # Counts
//! A count of entry points in prose (`183 entry points`, outside fenced blocks, which quote logs
//! named by commit) equals the number of kernels `#[kernel]` registered for `kernels-gpu`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use gpukern::gpukern_device::launch::registered_in;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// Whether `word` occurs in `text` as a whole word (not inside a longer name).
fn names(text: &str, word: &str) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// Whether the root folder `name` (`"docs/"`) holds a file git tracks: a folder of build
/// outputs or device-call archives that `.git/info/exclude` or `.gitignore` keeps out of the
/// repository is not part of the tree. Outside a git checkout every folder counts.
fn holds_tracked_files(name: &str) -> bool {
    let out = std::process::Command::new("git")
        .args(["ls-files", "--", name])
        .current_dir(root())
        .output();
    match out {
        Ok(o) if o.status.success() => !o.stdout.is_empty(),
        _ => true,
    }
}

/// The modules of a folder: its `.rs` files (not `lib.rs`, `mod.rs`, `main.rs`) by stem and its
/// folders, deduplicated (`block.rs` and `block/` are one module), sorted.
fn modules(dir: &Path) -> Vec<String> {
    let mut out = BTreeSet::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            out.insert(name);
        } else if let Some(stem) = name.strip_suffix(".rs")
            && !["lib", "mod", "main"].contains(&stem)
        {
            out.insert(stem.to_string());
        }
    }
    out.into_iter().collect()
}

// --- The README's tree ---------------------------------------------------------------------------

/// One entry of the tree: its path from the root and its part of the text.
#[derive(Debug)]
struct Entry {
    path: String,
    text: String,
}

/// The fenced block after `## How it works`.
fn tree_block(readme: &str) -> String {
    let start = readme
        .find("## How it works")
        .expect("README.md has a \"How it works\" section");
    let rest = &readme[start..];
    let open = rest.find("```").expect("a fenced block in \"How it works\"");
    let body = &rest[open..];
    let body = &body[body.find('\n').unwrap_or(0) + 1..];
    body[..body.find("```").expect("the tree's block is closed")].to_string()
}

fn looks_like_path(token: &str) -> bool {
    token.ends_with('/') || token.ends_with(".rs") || token.ends_with(".md")
}

/// The entries of the tree, each with its own text (its line and its description's lines).
fn entries(block: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    let mut parents: Vec<(usize, String)> = Vec::new();
    for line in block.lines() {
        let indent = line.len() - line.trim_start().len();
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let first = tokens.first().copied().unwrap_or_default();
        if indent > 4 || !looks_like_path(first) {
            if let Some(last) = out.last_mut() {
                last.text.push('\n');
                last.text.push_str(line);
            }
            continue;
        }
        // A line of several paths and nothing else (`examples/ tests/ bench/`) names each.
        let paths: Vec<&str> = if tokens.iter().all(|t| looks_like_path(t)) {
            tokens
        } else {
            vec![first]
        };
        parents.retain(|(i, _)| *i < indent);
        let prefix = parents.last().map(|(_, p)| p.clone()).unwrap_or_default();
        for p in &paths {
            out.push(Entry {
                path: format!("{prefix}{p}"),
                text: line.to_string(),
            });
        }
        if paths.len() == 1 && first.ends_with('/') {
            parents.push((indent, format!("{prefix}{first}")));
        }
    }
    out
}

/// The text of folder entry `path` and of every entry under it.
fn folder_text(entries: &[Entry], path: &str) -> String {
    entries
        .iter()
        .filter(|e| e.path.starts_with(path))
        .map(|e| e.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The folders whose modules the tree must name: (the entry, the folder its modules are in).
fn checked_folders(entries: &[Entry]) -> Vec<(String, PathBuf)> {
    let mut out = vec![
        ("host/".to_string(), root().join("host")),
        ("kernels-gpu/".to_string(), root().join("kernels-gpu/src")),
        ("gpukern-device/".to_string(), root().join("gpukern-device/src")),
    ];
    for e in entries {
        let crate_folder = ["host/", "kernels-gpu/", "gpukern-device/"]
            .into_iter()
            .find(|c| e.path.starts_with(c) && e.path != *c);
        let dir = root().join(&e.path);
        if crate_folder.is_some() && e.path.ends_with('/') && dir.is_dir() && !dir.join("Cargo.toml").exists()
        {
            out.push((e.path.clone(), dir));
        }
    }
    out
}

/// What is wrong with the tree in `readme` against the files under the root.
fn tree_gaps(readme: &str) -> (Vec<String>, Vec<String>) {
    let block = tree_block(readme);
    let entries = entries(&block);
    let mut gaps = Vec::new();
    for e in &entries {
        if !root().join(&e.path).exists() {
            gaps.push(format!("the tree names {}, which does not exist", e.path));
        }
    }
    let mut top: Vec<String> = fs::read_dir(root())
        .expect("the root")
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| format!("{}/", e.file_name().to_string_lossy()))
        .filter(|n| !n.starts_with('.') && n != "target/")
        .filter(|n| holds_tracked_files(n))
        .collect();
    top.push("build.rs".to_string());
    top.sort();
    for name in &top {
        if !entries.iter().any(|e| e.path.starts_with(name.as_str())) {
            gaps.push(format!("the tree does not name {name}"));
        }
    }
    let mut expected = Vec::new();
    for (entry, dir) in checked_folders(&entries) {
        let text = folder_text(&entries, &entry);
        let found = modules(&dir);
        expected.push(format!("{entry}: {}", found.join(", ")));
        for m in found {
            if !names(&text, &m) {
                gaps.push(format!("{entry}'s part of the tree does not name {m}"));
            }
        }
    }
    (gaps, expected)
}

#[test]
fn the_readme_tree_names_every_folder_and_module() {
    let (gaps, expected) = tree_gaps(&read("README.md"));
    assert!(
        gaps.is_empty(),
        "README.md's \"How it works\" tree is stale:\n  {}\n\nWhat the folders hold now (refresh the \
         tree from this):\n  {}",
        gaps.join("\n  "),
        expected.join("\n  ")
    );
}

#[test]
fn a_planted_gap_in_the_tree_is_caught() {
    let readme = read("README.md");
    // A module dropped from host/'s part of the tree, and a stale entry added.
    let dropped = readme.replacen("  view.rs ", "  gone.rs ", 1);
    assert_ne!(dropped, readme, "the planted edit must change the README");
    let (gaps, _) = tree_gaps(&dropped);
    assert!(
        gaps.iter().any(|g| g.contains("gone.rs, which does not exist")),
        "{gaps:?}"
    );
    assert!(gaps.iter().any(|g| g.contains("does not name view")), "{gaps:?}");
    assert!(names("thread, shared, mem,", "mem") && !names("simulator", "sim") && names("sim/ (the", "sim"));
}

// --- The crate-level module lists ----------------------------------------------------------------

/// The modules `lib` declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_modules(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub ")
                .or_else(|| l.strip_prefix("pub(crate) "))
                .unwrap_or(l);
            let name = rest.strip_prefix("mod ")?.trim_end_matches(';').trim();
            (l.ends_with(';') && !name.contains(' ')).then(|| name.to_string())
        })
        .collect()
}

fn crate_docs(lib: &str) -> String {
    lib.lines()
        .filter_map(|l| l.trim_start().strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Modules whose mention in the crate docs is still to come: the docs are another engineer's to
/// edit. Each one listed must be missing (an entry that the docs now name fails the test, so the
/// list only shrinks); the new doc text is in the renovation's report (issue 33).
const NOT_YET_IN_CRATE_DOCS: [(&str, &str); 0] = [];

fn undocumented_modules(path: &str) -> Vec<String> {
    let lib = read(path);
    let docs = crate_docs(&lib);
    declared_modules(&lib)
        .into_iter()
        .filter(|m| !names(&docs, m))
        .collect()
}

#[test]
fn the_crate_docs_name_every_module() {
    let mut gaps = Vec::new();
    for path in ["host/lib.rs", "kernels-gpu/src/lib.rs"] {
        let missing = undocumented_modules(path);
        for m in &missing {
            if !NOT_YET_IN_CRATE_DOCS.contains(&(path, m.as_str())) {
                gaps.push(format!("{path}'s crate docs do not name module {m}"));
            }
        }
        for (p, m) in NOT_YET_IN_CRATE_DOCS {
            if p == path && !missing.iter().any(|x| x == m) {
                gaps.push(format!(
                    "{path} no longer leaves out {m} (named, or the module is gone): take it off \
                     NOT_YET_IN_CRATE_DOCS"
                ));
            }
        }
    }
    assert!(gaps.is_empty(), "{}", gaps.join("\n"));
}

#[test]
fn a_module_missing_from_the_crate_docs_is_caught() {
    let lib =
        "//! The crate: [`alpha`] and `beta`.\npub mod alpha;\nmod beta;\npub mod gamma;\nmod inline {}\n";
    let docs = crate_docs(lib);
    let missing: Vec<String> = declared_modules(lib)
        .into_iter()
        .filter(|m| !names(&docs, m))
        .collect();
    assert_eq!(missing, ["gamma"]);
}

// --- Counts ------------------------------------------------------------------------------------

/// The counts of entry points in `text` outside fenced blocks: (line, count).
fn entry_point_counts(text: &str) -> Vec<(usize, usize)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line
            .trim_start()
            .trim_start_matches("//!")
            .trim_start_matches("///");
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for (at, _) in line.match_indices(" entry points") {
            let digits: String = line[..at]
                .chars()
                .rev()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.chars().rev().collect::<String>().parse() {
                out.push((i + 1, n));
            }
        }
    }
    out
}

#[test]
fn counts_of_entry_points_in_prose_match_the_registry() {
    let registered = registered_in("kernels_gpu").len();
    assert!(registered > 0, "no kernels registered for kernels_gpu");
    let mut files = vec![
        "README.md".to_string(),
        "kernels-gpu/README.md".to_string(),
        "host/lib.rs".to_string(),
        "kernels-gpu/src/lib.rs".to_string(),
    ];
    let mut docs: Vec<String> = fs::read_dir(root().join("docs"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    docs.retain(|n| n.ends_with(".md"));
    files.extend(docs.into_iter().map(|n| format!("docs/{n}")));
    let mut wrong = Vec::new();
    for f in &files {
        for (line, n) in entry_point_counts(&read(f)) {
            if n != registered {
                wrong.push(format!(
                    "{f}:{line}: {n} entry points (the registry has {registered})"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_stale_count_is_found() {
    let text = "It has 108 entry points.\n```text\nall 36 entry points launched  # at 5a510ff\n```\n";
    assert_eq!(entry_point_counts(text), [(1, 108)]);
}
