//! The host's imports run one way: every module of `host/` stands on a floor of [`FLOORS`], and
//! none imports a module of a higher floor, nor do any modules import each other in a circle.
//!
//! The imports are read from the source: every `crate::` and `super::` path (in `use` items and
//! in code, `use` groups included) and every path through a child module the file declares
//! (`mod x;` then `x::f()`), with comments and string literals left out. A parent's `pub use` of
//! its own children is its face (it hands their names on) and is no import. A path is charged to
//! the longest module of `host/` it names; one that names only the crate root (a re-export there)
//! is refused: name the module that defines the item.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors from the ground up; each names the modules standing on it (a module and its
/// children). A module may import its own floor and those below, never one above.
const FLOORS: &[(&str, &[&str])] = &[
    ("errors and faults", &["error", "fault"]),
    ("launch configuration", &["launch_config"]),
    ("capture state", &["capture"]),
    ("PTX sets and their loading", &["ptx"]),
    ("the device and its per-handle caches", &["cache", "device"]),
    (
        "buffers and streams",
        &["stream", "buffer", "view", "copy", "tensor_map"],
    ),
    ("pinned memory", &["pinned"]),
    ("modules, their launch pipeline and launch counting", &["module"]),
    ("graphs and several GPUs", &["graph", "multi", "dist"]),
    ("operations", &["ops"]),
    ("the free functions and CPU references", &["api", "cpu"]),
    ("the crate root", &[""]),
];

/// Circles allowed for now: none. (When the check was written there were five, in `host/ops/`
/// and `host/raw/`; they went with the folder per family, whose `plan.rs` holds the family's
/// algorithm enum so that `mod.rs` and `kernels.rs` import the plan, never the reverse.) A circle
/// listed here that no longer exists fails the check, so the list only shrinks.
const KNOWN_CIRCLES: &[&[&str]] = &[];

#[test]
fn host_imports_run_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("host");
    let sources = read_host(&root);
    let report = check(&sources, KNOWN_CIRCLES);
    assert!(report.is_empty(), "host imports:\n{}", report.join("\n"));
}

/// A planted upward import (the device importing the graph) and a planted circle are caught.
#[test]
fn an_upward_import_and_a_circle_are_caught() {
    let mut sources = BTreeMap::new();
    sources.insert("".to_string(), "mod device;\nmod graph;\n".to_string());
    sources.insert(
        "device".to_string(),
        "use crate::graph::Graph;\npub struct Gpu;\n".to_string(),
    );
    sources.insert(
        "graph".to_string(),
        "use crate::device::Gpu;\n/// crate::ops in a comment is no import\npub struct Graph;\n".to_string(),
    );
    let report = check(&sources, &[]);
    assert!(report.iter().any(|l| l.contains("device -> graph")), "{report:?}");
    assert!(report.iter().any(|l| l.contains("circle")), "{report:?}");
    assert!(!report.iter().any(|l| l.contains("ops")), "{report:?}");
}

/// Every `.rs` file under `root`, by module path (`""` the crate root, `a::b` for `a/b.rs` or
/// `a/b/mod.rs`).
fn read_host(root: &Path) -> BTreeMap<String, String> {
    let mut files = Vec::new();
    walk(root, &mut files);
    files
        .into_iter()
        .map(|path| {
            let rel = path.strip_prefix(root).expect("under host/");
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).expect("readable source");
            (parts.join("::"), text)
        })
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("readable folder")
        .map(|e| e.expect("readable entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The floor of `module`: the index of the entry of [`FLOORS`] naming it or its nearest
/// ancestor.
fn floor_of(module: &str) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (floor, (_, prefixes)) in FLOORS.iter().enumerate() {
        for prefix in *prefixes {
            let names = module == *prefix
                || prefix.is_empty()
                || module.strip_prefix(prefix).is_some_and(|r| r.starts_with("::"));
            if names && best.is_none_or(|(len, _)| prefix.len() > len) {
                best = Some((prefix.len(), floor));
            }
        }
    }
    best.map(|(_, floor)| floor)
}

/// What is wrong with the imports of `sources` (module path -> text), one line each; the
/// circles of `known` are allowed, and reported when gone.
fn check(sources: &BTreeMap<String, String>, known_circles: &[&[&str]]) -> Vec<String> {
    let modules: BTreeSet<&str> = sources.keys().map(String::as_str).collect();
    let mut report = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in sources {
        let Some(floor) = floor_of(module) else {
            report.push(format!("`{module}` stands on no floor: add it to FLOORS"));
            continue;
        };
        for path in imports(module, text) {
            let target = longest_module(&modules, &path);
            if target.is_empty() {
                report.push(format!(
                    "{module} -> the crate root (`crate::{}`): name the module that defines it",
                    path.join("::")
                ));
                continue;
            }
            if target == *module {
                continue;
            }
            let to = floor_of(target).unwrap_or(usize::MAX);
            if to > floor && to != usize::MAX {
                report.push(format!(
                    "{module} -> {target}: `{}` ({}) imports `{}` ({}), a higher floor",
                    module, FLOORS[floor].0, target, FLOORS[to].0
                ));
            }
            edges
                .entry(module.clone())
                .or_default()
                .insert(target.to_string());
        }
    }
    let known: Vec<BTreeSet<String>> = known_circles
        .iter()
        .map(|c| c.iter().map(|m| m.to_string()).collect())
        .collect();
    let mut seen_known = vec![false; known.len()];
    for circle in circles(&edges) {
        let set: BTreeSet<String> = circle.iter().cloned().collect();
        match known.iter().position(|k| *k == set) {
            Some(i) => seen_known[i] = true,
            None => report.push(format!("circle: {}", circle.join(" -> "))),
        }
    }
    for (i, seen) in seen_known.iter().enumerate() {
        if !seen {
            report.push(format!(
                "the known circle {:?} is gone: take it off KNOWN_CIRCLES",
                known_circles[i]
            ));
        }
    }
    report
}

/// The longest module of `modules` that `path` (segments after `crate::`) starts with.
fn longest_module<'m>(modules: &BTreeSet<&'m str>, path: &[String]) -> &'m str {
    (0..=path.len())
        .rev()
        .find_map(|n| modules.get(path[..n].join("::").as_str()).copied())
        .unwrap_or("")
}

/// The strongly connected components of more than one module (Tarjan), each in order.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'e> {
        edges: &'e BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'e str, usize>,
        low: BTreeMap<&'e str, usize>,
        stack: Vec<&'e str>,
        on_stack: BTreeSet<&'e str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'e>(s: &mut State<'e>, v: &'e str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(next) = s.edges.get(v) {
            for w in next {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let low = s.low[v].min(s.low[w]);
                    s.low.insert(v, low);
                } else if s.on_stack.contains(w) {
                    let low = s.low[v].min(s.index[w]);
                    s.low.insert(v, low);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// A token of Rust source with comments and literals left out: an identifier, `::`, or one
/// punctuation character.
#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    Colons,
    Punct(char),
}

fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' || (c == 'b' && next == Some('"')) {
            i += if c == 'b' { 2 } else { 1 };
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if (c == 'r' || c == 'b') && matches!(next, Some('#') | Some('r')) && raw_string_at(&chars, i)
        {
            let mut j = i + 1;
            if chars[j] == 'r' {
                j += 1;
            }
            let hashes = chars[j..].iter().take_while(|&&h| h == '#').count();
            j += hashes + 1;
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            while j < chars.len() && !chars[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else if c == ':' && next == Some(':') {
            out.push(Token::Colons);
            i += 2;
        } else if c.is_whitespace() || c.is_ascii_digit() {
            i += 1;
        } else {
            out.push(Token::Punct(c));
            i += 1;
        }
    }
    out
}

fn raw_string_at(chars: &[char], i: usize) -> bool {
    let mut j = i + 1;
    if chars[i] == 'b' {
        if chars.get(j) != Some(&'r') {
            return false;
        }
        j += 1;
    }
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    chars.get(j) == Some(&'"')
}

/// The module paths (as segments from the crate root) that `module`'s source names: read twice,
/// the second time with the names its `use` items bind (`use crate::raw;` then `raw::add::f()`).
fn imports(module: &str, text: &str) -> Vec<Vec<String>> {
    let tokens = tokens(text);
    let (_, bindings) = read_paths(module, &tokens, &BTreeMap::new());
    read_paths(module, &tokens, &bindings).0
}

/// The paths of [`imports`] given the names bound by `use` (`bindings`), and the names bound by
/// the `use` items read (the last segment of each path a `use` names, `self` in a group included).
fn read_paths(
    module: &str,
    tokens: &[Token],
    bindings: &BTreeMap<String, Vec<String>>,
) -> (Vec<Vec<String>>, BTreeMap<String, Vec<String>>) {
    let mut bound = BTreeMap::new();
    let ident = |i: usize| match tokens.get(i) {
        Some(Token::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    let base: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(String::from).collect()
    };
    // Child modules this file declares (`mod x;`), and inline modules open at each brace depth.
    let mut children = BTreeSet::new();
    for i in 0..tokens.len() {
        if ident(i) == Some("mod") && tokens.get(i + 2) == Some(&Token::Punct(';')) {
            if let Some(name) = ident(i + 1) {
                children.insert(name.to_string());
            }
        }
    }
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut paths = Vec::new();
    // Whether the statement being read is a `pub use` (a face re-export), or any `use`.
    let mut reexport = false;
    let mut in_use = false;
    let mut statement_start = true;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Punct('{') => {
                depth += 1;
                statement_start = true;
            }
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth + 1) {
                    inline.pop();
                }
                statement_start = true;
            }
            Token::Punct(';') => {
                reexport = false;
                in_use = false;
                statement_start = true;
            }
            Token::Ident(word) => {
                if statement_start && word == "pub" {
                    // `pub use`, `pub(crate) use`, `pub(super) use`.
                    let mut j = i + 1;
                    if tokens.get(j) == Some(&Token::Punct('(')) {
                        while j < tokens.len() && tokens[j] != Token::Punct(')') {
                            j += 1;
                        }
                        j += 1;
                    }
                    reexport = ident(j) == Some("use");
                }
                if word == "use" {
                    in_use = true;
                }
                if word == "mod" && ident(i + 1).is_some() && tokens.get(i + 2) == Some(&Token::Punct('{')) {
                    inline.push((ident(i + 1).unwrap_or_default().to_string(), depth + 1));
                }
                let previous_is_colons = i > 0 && tokens[i - 1] == Token::Colons;
                if !previous_is_colons && tokens.get(i + 1) == Some(&Token::Colons) {
                    let here: Vec<String> = base
                        .iter()
                        .cloned()
                        .chain(inline.iter().map(|(m, _)| m.clone()))
                        .collect();
                    let start = match word.as_str() {
                        "crate" => Some(Vec::new()),
                        "super" => Some(here[..here.len().saturating_sub(1)].to_vec()),
                        w if inline.is_empty() && children.contains(w) && !reexport => {
                            let mut p = here.clone();
                            p.push(w.to_string());
                            Some(p)
                        }
                        w if !in_use => bindings.get(w).cloned(),
                        _ => None,
                    };
                    if let Some(mut prefix) = start {
                        let mut j = i + 2;
                        if word == "super" {
                            while ident(j) == Some("super") && tokens.get(j + 1) == Some(&Token::Colons) {
                                prefix.pop();
                                j += 2;
                            }
                        }
                        let first = paths.len();
                        j = tree(tokens, j, prefix, &mut paths);
                        if in_use {
                            for path in &paths[first..] {
                                if let Some(name) = path.last() {
                                    bound.insert(name.clone(), path.clone());
                                }
                            }
                        }
                        i = j;
                        statement_start = false;
                        continue;
                    }
                }
                statement_start = false;
            }
            _ => statement_start = false,
        }
        i += 1;
    }
    (paths, bound)
}

/// Reads the path tree at `tokens[i..]` below `prefix` (`a::b`, `{a, b::{c, d}}`, `*`), pushing
/// each leaf's segments (identifiers that continue a path) to `out`; returns the index after it.
fn tree(tokens: &[Token], mut i: usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    loop {
        match tokens.get(i) {
            Some(Token::Ident(name)) if name != "self" => {
                prefix.push(name.clone());
                i += 1;
                if tokens.get(i) == Some(&Token::Punct('!')) {
                    // A macro (`crate::include_ptx!`): `#[macro_export]` puts it at the root.
                    return i;
                }
                if tokens.get(i) == Some(&Token::Colons) {
                    i += 1;
                    continue;
                }
                out.push(prefix);
                return i;
            }
            Some(Token::Punct('{')) => {
                i += 1;
                loop {
                    match tokens.get(i) {
                        Some(Token::Punct('}')) => return i + 1,
                        Some(Token::Punct(',')) => i += 1,
                        None => return i,
                        _ => {
                            let before = i;
                            i = tree(tokens, i, prefix.clone(), out);
                            // Skip `as name` and anything else up to the next item.
                            while !matches!(tokens.get(i), Some(Token::Punct(',' | '}')) | None) {
                                i += 1;
                            }
                            if i == before {
                                i += 1;
                            }
                        }
                    }
                }
            }
            _ => {
                out.push(prefix);
                return i + usize::from(tokens.get(i).is_some_and(|t| *t == Token::Ident("self".into())));
            }
        }
    }
}
