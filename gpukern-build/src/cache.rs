//! Where compiled PTX is kept between builds, and how much of it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::BuildError;

/// Overrides where compiled PTX is cached (default: `gpukern-ptx` in the target directory).
pub const CACHE_ENV: &str = "GPUKERN_PTX_CACHE";
/// PTX files kept per architecture (older ones are deleted after a build).
const KEEP: usize = 4;

/// The cache directory, created if missing: `GPUKERN_PTX_CACHE`, else `gpukern-ptx` in the
/// target directory that holds `out` (`<target>/<profile>/build/<package>/out`, one more level
/// with `--target`), so that every profile of one target directory shares it.
pub fn dir(out: &Path) -> Result<PathBuf, BuildError> {
    let dir = match std::env::var_os(CACHE_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => target_dir_of(out)
            .map(|target| target.join("gpukern-ptx"))
            .unwrap_or_else(|| out.join("gpukern-ptx")),
    };
    fs::create_dir_all(&dir).map_err(|e| BuildError(format!("creating {}: {e}", dir.display())))?;
    Ok(dir)
}

/// The target directory above a build script's `OUT_DIR`: the parent of the `<profile>` folder
/// that holds `build/`.
fn target_dir_of(out: &Path) -> Option<&Path> {
    out.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent()?.parent())
}

/// Keeps the newest [`KEEP`] PTX files of kernel crate `krate` for each of `archs` in `cache`
/// (`<krate>-<key>-<arch>.ptx`) and deletes the rest, so that edits to the kernels do not fill
/// the disk; other crates' files are left alone.
pub fn prune(cache: &Path, krate: &str, archs: &[&str]) {
    let Ok(entries) = fs::read_dir(cache) else {
        return;
    };
    let files: Vec<(PathBuf, std::time::SystemTime)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str()?.strip_prefix(krate)?.strip_prefix('-'))
                // `<key>-<arch>.ptx`: the key has no `-`, so `kernels` never matches `kernels-gpu`'s.
                .is_some_and(|rest| rest.matches('-').count() == 1)
        })
        .filter_map(|p| Some((p.clone(), fs::metadata(&p).ok()?.modified().ok()?)))
        .collect();
    for arch in archs {
        let suffix = format!("-{arch}.ptx");
        let mut mine: Vec<_> = files
            .iter()
            .filter(|(p, _)| p.to_string_lossy().ends_with(&suffix))
            .collect();
        mine.sort_by_key(|(_, modified)| std::cmp::Reverse(*modified));
        for (old, _) in mine.into_iter().skip(KEEP) {
            // A file another build removed first is gone either way.
            let _ = fs::remove_file(old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_directory_is_found_above_out_dir() {
        let out = Path::new("/w/target/debug/build/gpukern-0123/out");
        assert_eq!(target_dir_of(out), Some(Path::new("/w/target")));
        let cross = Path::new("/w/target/x86_64-unknown-linux-gnu/release/build/gpukern-0123/out");
        assert_eq!(
            target_dir_of(cross),
            Some(Path::new("/w/target/x86_64-unknown-linux-gnu"))
        );
        assert_eq!(target_dir_of(Path::new("/tmp/out")), None);
    }
}
