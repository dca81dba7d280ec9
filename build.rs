//! Compiles `kernels-gpu` to PTX with rustc's NVPTX backend and embeds it (the role
//! `cuda_builder` plays in rust-cuda).
//!
//! For each architecture in `GPUKERN_PTX_ARCHS` (default `sm_80,sm_90`): a nested
//! `cargo rustc --target nvptx64-nvidia-cuda -Zbuild-std=core -- --emit=asm` on the pinned
//! nightly, in a target directory under `OUT_DIR`. The result is `$OUT_DIR/ptx_modules.rs`,
//! included by `host/ptx.rs`. The nightly (with `rust-src`) is installed through rustup if
//! missing.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The nightly whose NVPTX backend and `core` intrinsics the kernels are written against.
const NIGHTLY: &str = "nightly-2026-05-20";
/// Architectures built when `GPUKERN_PTX_ARCHS` is unset: Ampere (runs on Ampere and newer
/// through the driver's JIT) and Hopper.
const DEFAULT_ARCHS: &str = "sm_80,sm_90";
const ARCHS_ENV: &str = "GPUKERN_PTX_ARCHS";

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let kernels = root.join("kernels-gpu");
    for path in [
        "src",
        "macros/src",
        "macros/Cargo.toml",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", kernels.join(path).display());
    }
    println!("cargo:rerun-if-env-changed={ARCHS_ENV}");

    let archs = env::var(ARCHS_ENV).unwrap_or_else(|_| DEFAULT_ARCHS.to_string());
    let archs: Vec<&str> = archs
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect();
    if archs.is_empty() {
        fail(&format!(
            "{ARCHS_ENV} names no architecture; use e.g. {ARCHS_ENV}={DEFAULT_ARCHS}"
        ));
    }

    let mut archs = archs;
    archs.sort_by_key(|a| compute_capability(a));
    archs.dedup();
    ensure_nightly();
    let mut entries = String::new();
    for arch in &archs {
        let cc = compute_capability(arch);
        let ptx = build_ptx(&kernels, &out, arch);
        entries.push_str(&format!(
            "    PtxModule {{ arch: {arch:?}, compute_capability: ({}, {}), ptx: include_str!({:?}) }},\n",
            cc.0,
            cc.1,
            ptx.display().to_string()
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

/// Compiles the kernel crate for `arch` and returns the path of its PTX.
fn build_ptx(kernels: &Path, out: &Path, arch: &str) -> PathBuf {
    let target_dir = out.join(format!("kernels-{arch}"));
    let output = clean_command("rustup")
        .args(["run", NIGHTLY, "cargo", "rustc", "--release", "--lib"])
        .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
        .arg("--manifest-path")
        .arg(kernels.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .args(["--", "--emit=asm"])
        .env(
            "RUSTFLAGS",
            format!("-Zunstable-options -Cpanic=immediate-abort -Ctarget-cpu={arch}"),
        )
        .output()
        .unwrap_or_else(|e| {
            fail(&format!(
                "could not run rustup ({e}); gpukern needs rustup to build its kernels"
            ))
        });
    if !output.status.success() {
        fail(&format!(
            "compiling kernels-gpu to PTX for {arch} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let deps = target_dir.join("nvptx64-nvidia-cuda/release/deps");
    let newest = fs::read_dir(&deps)
        .unwrap_or_else(|e| fail(&format!("reading {}: {e}", deps.display())))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "s")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("kernels_gpu-"))
        })
        .max_by_key(|p| fs::metadata(p).and_then(|m| m.modified()).ok());
    let Some(asm) = newest else {
        fail(&format!(
            "the PTX build for {arch} left no kernels_gpu-*.s in {}",
            deps.display()
        ));
    };
    let ptx = out.join(format!("kernels_{arch}.ptx"));
    fs::copy(&asm, &ptx).unwrap_or_else(|e| fail(&format!("copying {}: {e}", asm.display())));
    ptx
}

/// Stops the build with `msg`.
fn fail(msg: &str) -> ! {
    eprintln!("error: gpukern build: {msg}");
    std::process::exit(1)
}
