//! Compiles gpukern's kernel crates to PTX with [`gpukern_build`] (rustc's NVPTX backend on the
//! pinned nightly, every architecture at once, cached by a hash of the kernel sources):
//! `kernels-gpu`, the library's kernels (`gpukern::ptx::KERNELS`), and
//! `gpukern-device/checks`, the kernels the tests launch to check each device helper on a GPU
//! (`tests/device_checks.rs`).

fn main() {
    for krate in ["kernels-gpu", "gpukern-device/checks"] {
        if let Err(e) = gpukern_build::Builder::new(krate).build() {
            e.exit();
        }
    }
}
