//! The per-kernel modules a `Gpu` loads (`gpukern::ptx::EntryModules`): each entry point of
//! gpukern's PTX cut out with everything it reaches, for every architecture. Every one must hold
//! exactly its entry, define or declare every function it calls and every variable it names, and
//! keep the entry's text byte for byte; the entries that reach helper functions (the split's hard
//! case) and a sample of the rest must assemble alone with ptxas. (All 183 entries of the sm_90a
//! module assembled alone in 28 s on the build machine; the full run is in the record of the
//! commit that added this.)

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use gpukern::ptx::{EntryModules, entry_names, modules};
use libtest_mimic::Trial;

use crate::common::trial::plain_trial;

/// Every trial of this file.
pub(crate) fn trials() -> Vec<Trial> {
    vec![
        plain_trial("entry_modules", "every_entry_is_whole", every_entry_is_whole),
        plain_trial(
            "entry_modules",
            "helpers_and_a_sample_assemble",
            helpers_and_a_sample_assemble,
        ),
    ]
}

/// The names a module declares or defines: functions (`.func`, `.entry`) and variables.
fn declared(module: &str) -> HashSet<String> {
    let mut names = HashSet::new();
    for line in module.lines().filter(|l| !l.starts_with([' ', '\t'])) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let Some(at) = words.iter().position(|w| *w == ".func" || *w == ".entry") {
            // `.func (.param .b32 retval) name`: the name follows the return values.
            let rest = words[at + 1..].join(" ");
            let rest = match rest.strip_prefix('(') {
                Some(r) => r.split_once(')').map_or("", |(_, n)| n).trim().to_string(),
                None => rest,
            };
            names.insert(rest.split('(').next().unwrap_or("").trim().to_string());
        } else if [".global", ".shared", ".const", ".extern"]
            .iter()
            .any(|d| line.starts_with(d))
        {
            let decl = line.split(['[', '=', ';']).next().unwrap_or(line);
            if let Some(last) = decl.split_whitespace().last() {
                names.insert(last.to_string());
            }
        }
    }
    names
}

/// The functions a module calls (`call.uni name,`, `call.uni (retval), name,`).
fn called(module: &str) -> Vec<String> {
    module
        .lines()
        .filter_map(|l| l.trim().strip_prefix("call"))
        .filter_map(|rest| {
            let rest = rest.split_once(char::is_whitespace)?.1.trim();
            let rest = match rest.strip_prefix('(') {
                Some(r) => r.split_once(')')?.1.trim_start_matches([',', ' ']),
                None => rest,
            };
            Some(rest.split([',', ' ', ';']).next()?.to_string())
        })
        .collect()
}

/// The text of every entry in `ptx`, by name: from its `.entry` line to its closing brace (one
/// pass over the module, not one search of it per entry).
fn entry_texts(ptx: &str) -> HashMap<&str, &str> {
    ptx.match_indices(".entry ")
        .filter_map(|(start, _)| {
            let name = ptx[start + ".entry ".len()..].split('(').next()?.trim();
            let end = ptx[start..].find("\n}\n").map_or(ptx.len(), |e| start + e + 2);
            Some((name, &ptx[start..end]))
        })
        .collect()
}

fn every_entry_is_whole() {
    for module in modules() {
        let split = EntryModules::new(module.ptx);
        let texts = entry_texts(module.ptx);
        for name in entry_names(module.ptx) {
            let text = split
                .module_of(name)
                .unwrap_or_else(|| panic!("{}: no module for {name}", module.arch));
            assert_eq!(
                entry_names(&text),
                [name],
                "{}: the module of {name}",
                module.arch
            );
            assert!(
                text.starts_with(".version"),
                "{}: {name} lacks the header",
                module.arch
            );
            let names = declared(&text);
            for callee in called(&text) {
                assert!(
                    names.contains(&callee),
                    "{}: {name} calls {callee}, which its module lacks",
                    module.arch
                );
            }
            let entry = texts.get(name).expect("the entry is in the module");
            assert!(
                text.contains(entry),
                "{}: the entry {name} changed in its module",
                module.arch
            );
        }
        assert!(split.module_of("no_such_kernel").is_none());
    }
}

/// ptxas: `GPUKERN_PTXAS`, the repository's `.tools`, or PATH.
fn ptxas() -> PathBuf {
    std::env::var_os("GPUKERN_PTXAS")
        .map(PathBuf::from)
        .or_else(|| {
            let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/ptxas/bin/ptxas");
            local.is_file().then_some(local)
        })
        .unwrap_or_else(|| PathBuf::from("ptxas"))
}

fn helpers_and_a_sample_assemble() {
    let ptxas = ptxas();
    for module in modules() {
        let split = EntryModules::new(module.ptx);
        let names = entry_names(module.ptx);
        for (k, name) in names.iter().enumerate() {
            let text = split.module_of(name).expect("every entry has a module");
            // Every entry whose module holds a helper function, and every 25th of the others.
            if !text.contains(".func") && k % 25 != 0 {
                continue;
            }
            let file = std::env::temp_dir().join(format!(
                "gpukern-entry-{}-{}-{name}.ptx",
                std::process::id(),
                module.arch
            ));
            std::fs::write(&file, &text).expect("writing a temporary PTX file");
            let out = std::process::Command::new(&ptxas)
                .args([&format!("-arch={}", module.arch), "-o", "/dev/null"])
                .arg(&file)
                .output()
                .unwrap_or_else(|e| panic!("running {} ({e}): set GPUKERN_PTXAS", ptxas.display()));
            let _ = std::fs::remove_file(&file);
            assert!(
                out.status.success(),
                "{}: the module of {name} does not assemble alone: {}",
                module.arch,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
