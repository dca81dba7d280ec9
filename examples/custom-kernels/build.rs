//! Compiles the kernel crate in `kernels/` to PTX for every architecture (with the pinned
//! nightly, installed through rustup if missing); `main.rs` embeds it with
//! `gpukern::include_ptx!(kernels)`.

fn main() {
    if let Err(e) = gpukern_build::Builder::new("kernels").build() {
        e.exit();
    }
}
