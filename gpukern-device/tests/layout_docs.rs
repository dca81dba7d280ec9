//! The crate documentation against the tree: every module `src/lib.rs` declares is named in the
//! crate docs' module list (a module added without its line fails here).

use std::fs;
use std::path::Path;

#[test]
fn crate_docs_name_every_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let docs: String = lib.lines().filter(|l| l.starts_with("//!")).collect();
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .filter_map(|rest| rest.strip_suffix(';'))
        .collect();
    assert!(!modules.is_empty());
    let missing: Vec<_> = modules
        .iter()
        .filter(|m| !docs.contains(&format!("[`{m}`]")) && !docs.contains(&format!("`{m}` (host only)")))
        .collect();
    assert!(
        missing.is_empty(),
        "src/lib.rs's crate docs do not name {missing:?}"
    );
}
