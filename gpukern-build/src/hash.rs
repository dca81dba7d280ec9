//! The cache key: a hash of everything the PTX depends on.

use std::fs;
use std::path::{Path, PathBuf};

use crate::BuildError;

/// A 64-bit FNV-1a hash of each input file's path (relative to the kernel crate) and contents,
/// in sorted order, of the lock file and of `parts` (the nightly and the flags). The architecture
/// is not in it: it goes into the cache file's name.
pub fn source_hash(
    krate: &Path,
    inputs: &[PathBuf],
    lock: Option<&Path>,
    parts: &[&str],
) -> Result<u64, BuildError> {
    let mut files = Vec::new();
    for input in inputs {
        collect_files(&krate.join(input), &mut files);
    }
    files.sort();
    let mut hash = Fnv::new();
    for file in &files {
        let rel = file.strip_prefix(krate).unwrap_or(file);
        hash.write(rel.to_string_lossy().as_bytes());
        hash.write(&[0]);
        let bytes = fs::read(file).map_err(|e| BuildError(format!("reading {}: {e}", file.display())))?;
        hash.write(&(bytes.len() as u64).to_le_bytes());
        hash.write(&bytes);
    }
    // The lock file pins the kernel crate's dependencies (a proc macro's among them).
    if let Some(lock) = lock.and_then(|l| fs::read(l).ok()) {
        hash.write(&lock);
    }
    for part in parts {
        hash.write(part.as_bytes());
        hash.write(&[0]);
    }
    Ok(hash.0)
}

/// A short hash of the workspace the kernel crate is built in (the nearest manifest in it or
/// above it that declares `[workspace]`, else the crate itself), by its canonical path: the
/// name of the nested build's target directory. Cargo names a workspace member's outputs by its
/// path relative to the workspace root, so two checkouts of one project (git worktrees) sharing a
/// cache directory would otherwise build into, and overwrite, the same files. Every kernel crate
/// and feature set of one workspace builds in the same directory (one `core` per architecture;
/// cargo keeps each feature set's outputs apart by its metadata hash, and the build finds its own
/// through cargo's artifact message, [`crate::asm_of`]).
pub fn workspace_key(krate: &Path) -> u64 {
    let krate = krate.canonicalize().unwrap_or_else(|_| krate.to_path_buf());
    let root = krate
        .ancestors()
        .find(|dir| {
            fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|m| m.lines().any(|l| l.trim() == "[workspace]"))
        })
        .unwrap_or(&krate);
    let mut hash = Fnv::new();
    hash.write(root.to_string_lossy().as_bytes());
    hash.0
}

/// The `Cargo.lock` that governs the kernel crate: the nearest one in it or above it.
pub fn lock_file(krate: &Path) -> Option<PathBuf> {
    krate
        .ancestors()
        .map(|dir| dir.join("Cargo.lock"))
        .find(|lock| lock.is_file())
}

/// Every file under `path` (or `path` itself if it is a file); a `target` folder is skipped.
fn collect_files(path: &Path, files: &mut Vec<PathBuf>) {
    if path.is_file() {
        files.push(path.to_path_buf());
        return;
    }
    if path.file_name().is_some_and(|n| n == "target") {
        return;
    }
    let Ok(entries) = fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        collect_files(&entry.path(), files);
    }
}

/// 64-bit FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_published_test_vectors() {
        let of = |s: &str| {
            let mut h = Fnv::new();
            h.write(s.as_bytes());
            h.0
        };
        assert_eq!(of(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(of("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(of("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_key_follows_contents_paths_and_parts() {
        let dir = std::env::temp_dir().join(format!("gpukern-build-hash-{}", std::process::id()));
        let src = dir.join("src");
        fs::create_dir_all(&src)
            .map_err(|e| e.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        let write = |name: &str, text: &str| {
            fs::write(src.join(name), text).unwrap_or_else(|e| panic!("writing {name}: {e}"))
        };
        let key = |parts: &[&str]| {
            source_hash(&dir, &[PathBuf::from("src")], None, parts).unwrap_or_else(|e| panic!("{e}"))
        };
        write("lib.rs", "pub fn k() {}");
        let first = key(&["nightly"]);
        assert_eq!(first, key(&["nightly"]), "the same sources give the same key");
        assert_ne!(first, key(&["other nightly"]), "the toolchain is part of the key");
        write("lib.rs", "pub fn k() { }");
        let edited = key(&["nightly"]);
        assert_ne!(first, edited, "an edit changes the key");
        write("more.rs", "");
        assert_ne!(
            edited,
            key(&["nightly"]),
            "a new (even empty) file changes the key"
        );
        let _ = fs::remove_dir_all(&dir);
    }
}
