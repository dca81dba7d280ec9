//! `gpukern-build`: compiles a `no_std` Rust kernel crate to PTX from a build script, the role
//! `cuda_builder` plays in rust-cuda.
//!
//! In the `build.rs` of a crate whose kernels live in `./kernels`:
//!
//! ```no_run
//! if let Err(e) = gpukern_build::Builder::new("kernels").build() {
//!     e.exit();
//! }
//! ```
//!
//! For each architecture (default `sm_80,sm_90`, or `GPUKERN_PTX_ARCHS`), a nested
//! `cargo rustc --target nvptx64-nvidia-cuda -Zbuild-std=core -- --emit=asm` on the pinned
//! nightly (installed through rustup, with a message, if it is missing), all architectures at
//! once, each in a target directory of its own. The PTX is cached under a hash of everything it
//! depends on ([`hash`]) in `<target dir>/gpukern-ptx/` (or `GPUKERN_PTX_CACHE`), shared by the
//! debug, release, clippy and test builds: a build that changes only host code compiles no
//! kernel. [`Builder::build`] writes `$OUT_DIR/ptx_modules.rs`, a table of
//! `PtxModule { arch, compute_capability, ptx }` (oldest architecture first) for the host crate
//! to `include!` where a `PtxModule` type with those fields is in scope.

mod cache;
mod hash;
mod nightly;

use std::env;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::thread;

pub use nightly::NIGHTLY;

/// Architectures built when neither [`Builder::archs`] nor `GPUKERN_PTX_ARCHS` says otherwise:
/// Ampere (runs on Ampere and newer through the driver's JIT) and Hopper.
pub const DEFAULT_ARCHS: &str = "sm_80,sm_90";
/// The variable that overrides the architectures.
pub const ARCHS_ENV: &str = "GPUKERN_PTX_ARCHS";
/// Flags of every nested build; `-Ctarget-cpu` is added per architecture.
const RUSTFLAGS: &str = "-Zunstable-options -Cpanic=immediate-abort";

/// Why the PTX build failed; its text says what to do.
#[derive(Debug)]
pub struct BuildError(String);

impl BuildError {
    /// Prints the error the way cargo shows a build script's failure and exits with status 1.
    pub fn exit(&self) -> ! {
        eprintln!("error: gpukern build: {}", self.0);
        std::process::exit(1)
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BuildError {}

fn err<T>(msg: impl Into<String>) -> Result<T, BuildError> {
    Err(BuildError(msg.into()))
}

/// One PTX module that [`Builder::build`] produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    /// The architecture, e.g. `sm_90`.
    pub arch: String,
    /// Its compute capability, `(major, minor)`.
    pub compute_capability: (i32, i32),
    /// The PTX file (in the cache).
    pub path: PathBuf,
}

/// What to compile: a kernel crate, for some architectures.
#[derive(Clone, Debug)]
pub struct Builder {
    krate: PathBuf,
    extra_inputs: Vec<PathBuf>,
    archs: Option<String>,
}

impl Builder {
    /// The kernel crate at `path`, relative to the calling package's `CARGO_MANIFEST_DIR`.
    pub fn new(path: impl AsRef<Path>) -> Builder {
        Builder {
            krate: path.as_ref().to_path_buf(),
            extra_inputs: Vec::new(),
            archs: None,
        }
    }

    /// Another file or folder (relative to the kernel crate) whose contents the PTX depends on,
    /// besides the crate's `src/` and `Cargo.toml` and those of its path dependencies (found in
    /// the manifests, `gpukern-device` and its macros among them). It is hashed into the cache
    /// key and watched for changes.
    pub fn input(mut self, path: impl AsRef<Path>) -> Builder {
        self.extra_inputs.push(path.as_ref().to_path_buf());
        self
    }

    /// The architectures, comma-separated (`"sm_80,sm_90"`); `GPUKERN_PTX_ARCHS` still wins.
    pub fn archs(mut self, archs: &str) -> Builder {
        self.archs = Some(archs.to_string());
        self
    }

    /// Compiles (or takes from the cache) the PTX of every architecture and writes
    /// `$OUT_DIR/ptx_modules.rs`. Prints cargo's `rerun-if-changed` lines for every input.
    pub fn build(self) -> Result<Vec<Module>, BuildError> {
        let manifest_dir = env::var_os("CARGO_MANIFEST_DIR")
            .map(PathBuf::from)
            .ok_or_else(|| {
                BuildError("CARGO_MANIFEST_DIR is unset: call gpukern-build from a build script".into())
            })?;
        let out = env::var_os("OUT_DIR")
            .map(PathBuf::from)
            .ok_or_else(|| BuildError("OUT_DIR is unset: call gpukern-build from a build script".into()))?;
        let krate = manifest_dir.join(&self.krate);
        if !krate.join("Cargo.toml").is_file() {
            return err(format!(
                "no kernel crate at {} (expected a Cargo.toml there)",
                krate.display()
            ));
        }
        let mut inputs = vec![PathBuf::from("src"), PathBuf::from("Cargo.toml")];
        inputs.extend(path_dependencies(&krate)?);
        inputs.extend(self.extra_inputs.iter().cloned());
        for input in &inputs {
            println!("cargo:rerun-if-changed={}", krate.join(input).display());
        }
        let lock = hash::lock_file(&krate);
        if let Some(lock) = &lock {
            println!("cargo:rerun-if-changed={}", lock.display());
        }
        println!("cargo:rerun-if-env-changed={ARCHS_ENV}");
        println!("cargo:rerun-if-env-changed={}", cache::CACHE_ENV);

        let archs = match env::var(ARCHS_ENV) {
            Ok(v) => v,
            Err(_) => self.archs.clone().unwrap_or_else(|| DEFAULT_ARCHS.to_string()),
        };
        let archs = parse_archs(&archs)?;
        let key = hash::source_hash(&krate, &inputs, lock.as_deref(), &[NIGHTLY, RUSTFLAGS])?;
        let cache = cache::dir(&out)?;
        let entry = |arch: &str| cache.join(format!("{key:016x}-{arch}.ptx"));

        let missing: Vec<&str> = archs
            .iter()
            .map(|(a, _)| a.as_str())
            .filter(|a| !entry(a).is_file())
            .collect();
        if !missing.is_empty() {
            nightly::ensure()?;
            // One nested cargo per architecture, all at once: each compiles the kernel crate in
            // one codegen unit on one core.
            let results: Vec<Result<(), BuildError>> = thread::scope(|s| {
                let jobs: Vec<_> = missing
                    .iter()
                    .map(|&arch| {
                        let (krate, cache, dest) = (&krate, &cache, entry(arch));
                        s.spawn(move || build_ptx(krate, cache, arch, &dest))
                    })
                    .collect();
                jobs.into_iter()
                    .map(|j| j.join().unwrap_or_else(|_| err("a PTX build thread panicked")))
                    .collect()
            });
            let errors: Vec<String> = results.into_iter().filter_map(|r| r.err().map(|e| e.0)).collect();
            if !errors.is_empty() {
                return err(errors.join("\n"));
            }
            cache::prune(&cache, &missing);
        }

        let modules: Vec<Module> = archs
            .into_iter()
            .map(|(arch, cc)| Module {
                path: entry(&arch),
                arch,
                compute_capability: cc,
            })
            .collect();
        write_table(&out.join("ptx_modules.rs"), &modules)?;
        Ok(modules)
    }
}

/// An architecture's name (`sm_90`) and compute capability (`(9, 0)`).
pub type Arch = (String, (i32, i32));

/// `"sm_80, sm_90"` -> the architectures with their compute capabilities, oldest first, without
/// repeats; an error for an empty list or a name that is not `sm_XY` (or `sm_XYa`).
pub fn parse_archs(list: &str) -> Result<Vec<Arch>, BuildError> {
    let mut archs = Vec::new();
    for arch in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        archs.push((arch.to_string(), compute_capability(arch)?));
    }
    if archs.is_empty() {
        return err(format!(
            "{ARCHS_ENV} names no architecture; use e.g. {ARCHS_ENV}={DEFAULT_ARCHS}"
        ));
    }
    archs.sort_by_key(|(_, cc)| *cc);
    archs.dedup();
    Ok(archs)
}

/// `sm_XY` -> `(X, Y)`.
fn compute_capability(arch: &str) -> Result<(i32, i32), BuildError> {
    let digits = arch.strip_prefix("sm_").map(|d| d.trim_end_matches('a'));
    match digits.and_then(|d| d.parse::<i32>().ok()) {
        Some(n) if n >= 10 => Ok((n / 10, n % 10)),
        _ => err(format!(
            "{ARCHS_ENV}: `{arch}` is not an architecture like sm_80 or sm_90"
        )),
    }
}

/// Writes the `PTX_MODULES` table that the host crate includes.
fn write_table(file: &Path, modules: &[Module]) -> Result<(), BuildError> {
    let mut entries = String::new();
    for m in modules {
        entries.push_str(&format!(
            "    PtxModule {{ arch: {:?}, compute_capability: ({}, {}), ptx: include_str!({:?}) }},\n",
            m.arch,
            m.compute_capability.0,
            m.compute_capability.1,
            m.path.display().to_string()
        ));
    }
    let code = format!(
        "/// The PTX modules built by gpukern-build, oldest architecture first.\n\
         static PTX_MODULES: &[PtxModule] = &[\n{entries}];\n"
    );
    fs::write(file, code).or_else(|e| err(format!("writing {}: {e}", file.display())))
}

/// Compiles the kernel crate for `arch` in its own target directory under `cache` and writes its
/// PTX to `dest` (through a temporary file, so that a cache entry is always whole).
fn build_ptx(krate: &Path, cache: &Path, arch: &str, dest: &Path) -> Result<(), BuildError> {
    let target_dir = cache.join(format!("build-{arch}"));
    let output = nightly::command("rustup")
        .args(["run", NIGHTLY, "cargo", "rustc", "--release", "--lib"])
        .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
        .arg("--manifest-path")
        .arg(krate.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .args(["--", "--emit=asm"])
        .env("RUSTFLAGS", format!("{RUSTFLAGS} -Ctarget-cpu={arch}"))
        .output()
        .or_else(|e| {
            err(format!(
                "could not run rustup ({e}); gpukern needs rustup to build kernels"
            ))
        })?;
    if !output.status.success() {
        return err(format!(
            "compiling {} to PTX for {arch} failed:\n{}",
            krate.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let deps = target_dir.join("nvptx64-nvidia-cuda/release/deps");
    let stem = lib_name(krate)?;
    let newest = fs::read_dir(&deps)
        .or_else(|e| err(format!("reading {}: {e}", deps.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "s")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{stem}-")))
        })
        .max_by_key(|p| fs::metadata(p).and_then(|m| m.modified()).ok());
    let Some(asm) = newest else {
        return err(format!(
            "the PTX build for {arch} left no {stem}-*.s in {}",
            deps.display()
        ));
    };
    let tmp = dest.with_extension(format!("tmp{}", std::process::id()));
    fs::copy(&asm, &tmp).or_else(|e| err(format!("copying {}: {e}", asm.display())))?;
    fs::rename(&tmp, dest).or_else(|e| err(format!("renaming {}: {e}", tmp.display())))
}

/// The kernel crate's library name as rustc writes it (`[package] name` with `-` as `_`; a
/// `[lib] name` wins).
fn lib_name(krate: &Path) -> Result<String, BuildError> {
    let manifest = krate.join("Cargo.toml");
    let text =
        fs::read_to_string(&manifest).or_else(|e| err(format!("reading {}: {e}", manifest.display())))?;
    Ok(manifest_name(&text)
        .ok_or_else(|| BuildError(format!("no package name in {}", manifest.display())))?
        .replace('-', "_"))
}

/// The `src/` and `Cargo.toml` of every path dependency of the crate at `krate`, and of theirs,
/// relative to `krate` (`../gpukern-device/src`, ...): the PTX depends on them as much as on the
/// kernel crate's own sources.
fn path_dependencies(krate: &Path) -> Result<Vec<PathBuf>, BuildError> {
    let mut dirs: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let manifest = krate.join(&rel).join("Cargo.toml");
        let text =
            fs::read_to_string(&manifest).or_else(|e| err(format!("reading {}: {e}", manifest.display())))?;
        for dep in manifest_path_dependencies(&text) {
            let dep = rel.join(dep);
            let canonical = krate.join(&dep).canonicalize().ok();
            if canonical.is_none() || dirs.iter().any(|(_, c)| *c == canonical) {
                continue;
            }
            dirs.push((dep.clone(), canonical));
            pending.push(dep);
        }
    }
    Ok(dirs
        .into_iter()
        .flat_map(|(dep, _)| [dep.join("src"), dep.join("Cargo.toml")])
        .collect())
}

/// The `path = "..."` values in the dependency tables of a manifest (`[dependencies]`,
/// `[target.'cfg(..)'.dependencies]`, `[dependencies.name]`; not dev- or build-dependencies,
/// which do not reach the PTX).
fn manifest_path_dependencies(text: &str) -> Vec<String> {
    let mut section = String::new();
    let mut paths = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        let is_dependencies = section.contains("dependencies")
            && !section.contains("dev-dependencies")
            && !section.contains("build-dependencies");
        if !is_dependencies {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("path") {
            rest = &rest[at + 4..];
            let Some(value) = rest.trim_start().strip_prefix('=') else {
                continue;
            };
            if let Some(value) = value.trim_start().strip_prefix('"') {
                if let Some(end) = value.find('"') {
                    paths.push(value[..end].to_string());
                }
            }
        }
    }
    paths
}

/// The `name = "..."` of the `[lib]` section of a manifest, else of `[package]`.
fn manifest_name(text: &str) -> Option<String> {
    let mut section = "";
    let (mut package, mut lib) = (None, None);
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        let Some(value) = line.strip_prefix("name").map(str::trim_start) else {
            continue;
        };
        let Some(value) = value.strip_prefix('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"').to_string();
        match section {
            "[package]" => package = Some(value),
            "[lib]" => lib = Some(value),
            _ => {}
        }
    }
    lib.or(package)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_are_parsed_sorted_and_deduplicated() {
        let archs = parse_archs(" sm_90, sm_80,sm_90a , sm_80").map_err(|e| e.to_string());
        assert_eq!(
            archs,
            Ok(vec![
                ("sm_80".to_string(), (8, 0)),
                ("sm_90".to_string(), (9, 0)),
                ("sm_90a".to_string(), (9, 0)),
            ])
        );
        assert!(parse_archs("").is_err());
        assert!(parse_archs("compute_90").is_err());
        assert!(parse_archs("sm_9").is_err());
    }

    #[test]
    fn path_dependencies_are_read_from_the_dependency_tables() {
        let manifest = "[package]\nname = \"k\"\npath = \"nope\"\n\n[dependencies]\n\
            gpukern-device = { path = \"../gpukern-device\" }\nhalf = \"2\"\n\n\
            [target.'cfg(not(target_arch = \"nvptx64\"))'.dependencies]\nsim = { path=\"sim\" }\n\n\
            [dependencies.other]\npath = \"../other\"\n\n[dev-dependencies]\nt = { path = \"t\" }\n";
        assert_eq!(
            manifest_path_dependencies(manifest),
            vec!["../gpukern-device", "sim", "../other"]
        );
    }

    #[test]
    fn the_library_name_comes_from_lib_then_package() {
        let package = "[package]\nname = \"kernels-gpu\"\nversion = \"0.1.0\"\n";
        assert_eq!(manifest_name(package).as_deref(), Some("kernels-gpu"));
        let lib = "[package]\nname = \"my-kernels\"\n\n[lib]\nname = \"kern\"\npath = \"src/lib.rs\"\n";
        assert_eq!(manifest_name(lib).as_deref(), Some("kern"));
        assert_eq!(manifest_name("[dependencies]\nname = \"x\"\n"), None);
    }
}
