//! Compiles `kernels-gpu` to PTX with rustc's NVPTX backend and embeds it (the role
//! `cuda_builder` plays in rust-cuda).
//!
//! For each architecture in `GPUKERN_PTX_ARCHS` (default `sm_80,sm_90`): a nested
//! `cargo rustc --target nvptx64-nvidia-cuda -Zbuild-std=core -- --emit=asm` on the pinned
//! nightly. The architectures build in parallel, each in a target directory of its own.
//!
//! The PTX is cached under a key that hashes everything it depends on (the kernel crate's
//! sources and manifests, the lock file, the nightly, the flags and the architecture), in
//! `<target dir>/gpukern-ptx/` (or `GPUKERN_PTX_CACHE`). That directory is shared by the debug,
//! release, clippy and test builds, so each set of kernel sources is compiled to PTX once: a
//! `cargo test` after `cargo build`, or a rebuild after a change to host code only, compiles no
//! kernel. The result is `$OUT_DIR/ptx_modules.rs`, included by `host/ptx.rs`. The nightly (with
//! `rust-src`) is installed through rustup if missing.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;

/// The nightly whose NVPTX backend and `core` intrinsics the kernels are written against.
const NIGHTLY: &str = "nightly-2026-05-20";
/// Architectures built when `GPUKERN_PTX_ARCHS` is unset: Ampere (runs on Ampere and newer
/// through the driver's JIT) and Hopper.
const DEFAULT_ARCHS: &str = "sm_80,sm_90";
const ARCHS_ENV: &str = "GPUKERN_PTX_ARCHS";
/// Overrides where compiled PTX is cached (default: `gpukern-ptx` in the target directory).
const CACHE_ENV: &str = "GPUKERN_PTX_CACHE";
/// Flags of every nested build; `-Ctarget-cpu` is added per architecture.
const RUSTFLAGS: &str = "-Zunstable-options -Cpanic=immediate-abort";
/// Bump when the way the PTX is built changes, so that old cache entries are not reused.
const RECIPE_VERSION: &str = "1";

/// PTX files kept per architecture in the cache (older ones are deleted after a build).
const CACHE_KEEP: usize = 4;
/// Paths under the kernel crate whose contents the PTX depends on.
const KERNEL_INPUTS: [&str; 4] = ["src", "macros/src", "macros/Cargo.toml", "Cargo.toml"];

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let kernels = root.join("kernels-gpu");
    for path in KERNEL_INPUTS {
        println!("cargo:rerun-if-changed={}", kernels.join(path).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("Cargo.lock").display());
    println!("cargo:rerun-if-env-changed={ARCHS_ENV}");
    println!("cargo:rerun-if-env-changed={CACHE_ENV}");

    let archs = env::var(ARCHS_ENV).unwrap_or_else(|_| DEFAULT_ARCHS.to_string());
    let mut archs: Vec<&str> = archs
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect();
    if archs.is_empty() {
        fail(&format!(
            "{ARCHS_ENV} names no architecture; use e.g. {ARCHS_ENV}={DEFAULT_ARCHS}"
        ));
    }
    archs.sort_by_key(|a| compute_capability(a));
    archs.dedup();

    let sources = source_hash(&root, &kernels);
    let cache = cache_dir(&out);
    let entry = |arch: &str| cache.join(format!("{sources:016x}-{arch}.ptx"));
    let missing: Vec<&str> = archs.iter().copied().filter(|a| !entry(a).is_file()).collect();
    if !missing.is_empty() {
        ensure_nightly();
        // One nested cargo per architecture, all at once: each compiles the kernel crate in one
        // codegen unit on one core, so two architectures take the time of one on two cores.
        let built: Vec<Result<(), String>> = thread::scope(|s| {
            let jobs: Vec<_> = missing
                .iter()
                .map(|&arch| {
                    let (kernels, cache, dest) = (&kernels, &cache, entry(arch));
                    s.spawn(move || build_ptx(kernels, cache, arch, &dest))
                })
                .collect();
            jobs.into_iter()
                .map(|j| {
                    j.join()
                        .unwrap_or_else(|_| Err("a PTX build thread panicked".into()))
                })
                .collect()
        });
        let errors: Vec<String> = built.into_iter().filter_map(Result::err).collect();
        if !errors.is_empty() {
            fail(&errors.join("\n"));
        }
        prune(&cache, &archs);
    }

    let mut entries = String::new();
    for arch in &archs {
        let cc = compute_capability(arch);
        entries.push_str(&format!(
            "    PtxModule {{ arch: {arch:?}, compute_capability: ({}, {}), ptx: include_str!({:?}) }},\n",
            cc.0,
            cc.1,
            entry(arch).display().to_string()
        ));
    }
    let code = format!(
        "/// The PTX modules built by build.rs, oldest architecture first.\n\
         static PTX_MODULES: &[PtxModule] = &[\n{entries}];\n"
    );
    fs::write(out.join("ptx_modules.rs"), code)
        .unwrap_or_else(|e| fail(&format!("writing ptx_modules.rs: {e}")));
}

/// `sm_XY` -> `(X, Y)`.
fn compute_capability(arch: &str) -> (i32, i32) {
    let digits = arch.strip_prefix("sm_").map(|d| d.trim_end_matches('a'));
    match digits.and_then(|d| d.parse::<i32>().ok()) {
        Some(n) if n >= 10 => (n / 10, n % 10),
        _ => fail(&format!(
            "{ARCHS_ENV}: `{arch}` is not an architecture like sm_80 or sm_90"
        )),
    }
}

/// The cache directory: `GPUKERN_PTX_CACHE`, else `gpukern-ptx` in the target directory that
/// holds `out` (`<target>/<profile>/build/<package>/out`, one more level with `--target`).
fn cache_dir(out: &Path) -> PathBuf {
    let dir = match env::var_os(CACHE_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => out
            .ancestors()
            .find(|p| p.file_name().is_some_and(|n| n == "build"))
            .and_then(|build| build.parent()?.parent())
            .map(|target| target.join("gpukern-ptx"))
            .unwrap_or_else(|| out.join("gpukern-ptx")),
    };
    fs::create_dir_all(&dir).unwrap_or_else(|e| fail(&format!("creating {}: {e}", dir.display())));
    dir
}

/// A 64-bit FNV-1a hash of everything the PTX depends on: each input file's path (relative to
/// the kernel crate) and contents, in sorted order, the lock file, the nightly, the flags and
/// the recipe version. The architecture goes into the file name.
fn source_hash(root: &Path, kernels: &Path) -> u64 {
    let mut files = Vec::new();
    for input in KERNEL_INPUTS {
        collect_files(&kernels.join(input), &mut files);
    }
    files.sort();
    let mut hash = Fnv::new();
    for file in &files {
        let rel = file.strip_prefix(kernels).unwrap_or(file);
        hash.write(rel.to_string_lossy().as_bytes());
        hash.write(&[0]);
        let bytes = fs::read(file).unwrap_or_else(|e| fail(&format!("reading {}: {e}", file.display())));
        hash.write(&(bytes.len() as u64).to_le_bytes());
        hash.write(&bytes);
    }
    // The lock file pins the kernel crate's dependencies (its proc macro's among them).
    if let Ok(lock) = fs::read(root.join("Cargo.lock")) {
        hash.write(&lock);
    }
    for part in [NIGHTLY, RUSTFLAGS, RECIPE_VERSION] {
        hash.write(part.as_bytes());
        hash.write(&[0]);
    }
    hash.0
}

/// Every file under `path` (or `path` itself if it is a file).
fn collect_files(path: &Path, files: &mut Vec<PathBuf>) {
    if path.is_file() {
        files.push(path.to_path_buf());
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

/// A command with none of the outer build's variables that would point the nested cargo at the
/// stable compiler or at the outer target directory.
fn clean_command(program: &str) -> Command {
    let mut cmd = Command::new(program);
    for var in [
        "RUSTC",
        "RUSTUP_TOOLCHAIN",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "RUSTDOC",
        "CARGO",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Installs the pinned nightly and its `rust-src` through rustup if either is missing.
fn ensure_nightly() {
    let has_src = clean_command("rustup")
        .args(["run", NIGHTLY, "rustc", "--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|sysroot| sysroot.join("lib/rustlib/src/rust/library/core").is_dir());
    if has_src {
        return;
    }
    println!(
        "cargo:warning=gpukern: installing the {NIGHTLY} toolchain with rust-src to compile the kernels to PTX"
    );
    let status = clean_command("rustup")
        .args([
            "toolchain",
            "install",
            NIGHTLY,
            "--profile",
            "minimal",
            "--component",
            "rust-src",
        ])
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        fail(&format!(
            "the kernels need the {NIGHTLY} toolchain with rust-src, and installing it failed. Run:\n  \
             rustup toolchain install {NIGHTLY} --profile minimal --component rust-src"
        ));
    }
}

/// Compiles the kernel crate for `arch` in its own target directory under `cache` and writes its
/// PTX to `dest` (through a temporary file, so a cache entry is always whole).
fn build_ptx(kernels: &Path, cache: &Path, arch: &str, dest: &Path) -> Result<(), String> {
    let target_dir = cache.join(format!("build-{arch}"));
    let output = clean_command("rustup")
        .args(["run", NIGHTLY, "cargo", "rustc", "--release", "--lib"])
        .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
        .arg("--manifest-path")
        .arg(kernels.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .args(["--", "--emit=asm"])
        .env("RUSTFLAGS", format!("{RUSTFLAGS} -Ctarget-cpu={arch}"))
        .output()
        .map_err(|e| format!("could not run rustup ({e}); gpukern needs rustup to build its kernels"))?;
    if !output.status.success() {
        return Err(format!(
            "compiling kernels-gpu to PTX for {arch} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let deps = target_dir.join("nvptx64-nvidia-cuda/release/deps");
    let newest = fs::read_dir(&deps)
        .map_err(|e| format!("reading {}: {e}", deps.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "s")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("kernels_gpu-"))
        })
        .max_by_key(|p| fs::metadata(p).and_then(|m| m.modified()).ok());
    let Some(asm) = newest else {
        return Err(format!(
            "the PTX build for {arch} left no kernels_gpu-*.s in {}",
            deps.display()
        ));
    };
    let tmp = dest.with_extension(format!("tmp{}", std::process::id()));
    fs::copy(&asm, &tmp).map_err(|e| format!("copying {}: {e}", asm.display()))?;
    fs::rename(&tmp, dest).map_err(|e| format!("renaming {}: {e}", tmp.display()))
}

/// Keeps the newest [`CACHE_KEEP`] PTX files of each architecture in `cache` and deletes the
/// rest, so that edits to the kernels do not fill the disk.
fn prune(cache: &Path, archs: &[&str]) {
    let Ok(entries) = fs::read_dir(cache) else {
        return;
    };
    let files: Vec<(PathBuf, std::time::SystemTime)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .filter_map(|p| Some((p.clone(), fs::metadata(&p).ok()?.modified().ok()?)))
        .collect();
    for arch in archs {
        let suffix = format!("-{arch}.ptx");
        let mut mine: Vec<_> = files
            .iter()
            .filter(|(p, _)| p.to_string_lossy().ends_with(&suffix))
            .collect();
        mine.sort_by_key(|(_, modified)| std::cmp::Reverse(*modified));
        for (old, _) in mine.into_iter().skip(CACHE_KEEP) {
            let _ = fs::remove_file(old);
        }
    }
}

/// Stops the build with `msg`.
fn fail(msg: &str) -> ! {
    eprintln!("error: gpukern build: {msg}");
    std::process::exit(1)
}
