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
}
