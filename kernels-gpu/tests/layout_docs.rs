//! The crate's layout docs against the tree: every module `src/lib.rs` declares is named in its
//! crate documentation, and every source file and folder is named in the README's layout table,
//! so that a module or rung added without its line fails here rather than leaving the docs
//! stale.

use std::fs;
use std::path::Path;

/// The `pub mod NAME;` declarations of a `lib.rs`.
fn declared_modules(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .filter_map(|rest| rest.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

#[test]
fn crate_docs_name_every_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let docs: String = lib.lines().filter(|l| l.starts_with("//!")).collect();
    let modules = declared_modules(&lib);
    assert!(!modules.is_empty());
    let missing: Vec<_> = modules
        .iter()
        .filter(|m| !docs.contains(&format!("[`{m}`]")))
        .collect();
    assert!(
        missing.is_empty(),
        "src/lib.rs's crate docs do not name {missing:?}"
    );
}

#[test]
fn readme_names_every_source_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let mut missing = Vec::new();
    for entry in fs::read_dir(root.join("src")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let path = format!("src/{name}");
        if entry.file_type().unwrap().is_dir() {
            if !readme.contains(&format!("`{path}/`")) {
                missing.push(format!("{path}/"));
            }
            for file in fs::read_dir(entry.path()).unwrap() {
                let file = file.unwrap();
                let mut name = file.file_name().into_string().unwrap();
                if file.file_type().unwrap().is_dir() {
                    name.push('/');
                }
                if name != "mod.rs" && !readme.contains(&format!("`{name}`")) {
                    missing.push(format!("{path}/{name}"));
                }
            }
        } else if !readme.contains(&format!("`{path}`")) {
            missing.push(path);
        }
    }
    assert!(missing.is_empty(), "README.md's layout does not name {missing:?}");
}
