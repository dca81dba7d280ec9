//! The pinned nightly that builds the kernels, and commands that reach it from a build script.

use std::path::PathBuf;
use std::process::Command;

use crate::BuildError;

/// The nightly whose NVPTX backend and `core` intrinsics gpukern's kernels are written against.
pub const NIGHTLY: &str = "nightly-2026-05-20";

/// A command with none of the outer build's variables that would point a nested cargo at the
/// stable compiler or at the outer target directory.
pub fn command(program: &str) -> Command {
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

/// Installs the pinned nightly and its `rust-src` through rustup if either is missing, saying
/// so in cargo's output; an error that names the command to run if that fails or rustup is absent.
pub fn ensure() -> Result<(), BuildError> {
    let has_src = command("rustup")
        .args(["run", NIGHTLY, "rustc", "--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|sysroot| sysroot.join("lib/rustlib/src/rust/library/core").is_dir());
    if has_src {
        return Ok(());
    }
    println!(
        "cargo:warning=gpukern: installing the {NIGHTLY} toolchain with rust-src to compile the kernels to PTX"
    );
    let status = command("rustup")
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
    match status {
        Ok(s) if s.success() => Ok(()),
        Ok(_) => Err(BuildError(format!(
            "the kernels need the {NIGHTLY} toolchain with rust-src, and installing it failed. Run:\n  \
             rustup toolchain install {NIGHTLY} --profile minimal --component rust-src"
        ))),
        Err(e) => Err(BuildError(format!(
            "could not run rustup ({e}): gpukern compiles kernels with rustup's {NIGHTLY} toolchain; \
             install rustup (https://rustup.rs)"
        ))),
    }
}
