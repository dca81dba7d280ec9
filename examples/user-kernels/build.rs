//! Compiles the kernel crate in `kernels/` to PTX for every architecture; `src/lib.rs` embeds it
//! with `gpukern::include_ptx!(kernels)`.

fn main() {
    if let Err(e) = gpukern_build::Builder::new("kernels").build() {
        e.exit();
    }
}
