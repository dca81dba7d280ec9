//! Compiles the kernel crate in `kernels/` to PTX for every architecture (`src/lib.rs` embeds it
//! with `gpukern::include_ptx!(fast_kernels)`), and names the commit the benchmark's records carry.

fn main() {
    if let Err(e) = gpukern_build::Builder::new("kernels")
        .archs("sm_80,sm_90")
        .sm90a()
        .build()
    {
        e.exit();
    }
    let rev = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if let Some(rev) = rev {
        println!("cargo:rustc-env=USER_KERNELS_GIT_REV={rev}");
    }
    println!("cargo:rerun-if-changed=../../.git/HEAD");
    // A commit on the branch moves the branch's ref, not HEAD: watch that file too (a binary
    // built after a commit carried the commit before it, `7b04461-h100-v54-walk-1.log`).
    let head = std::fs::read_to_string("../../.git/HEAD").unwrap_or_default();
    if let Some(branch) = head.trim().strip_prefix("ref: ") {
        println!("cargo:rerun-if-changed=../../.git/{branch}");
    }
}
