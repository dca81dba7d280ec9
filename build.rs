//! Compiles `kernels-gpu`, gpukern's kernels, to PTX with [`gpukern_build`] (rustc's NVPTX
//! backend on the pinned nightly, every architecture at once, cached by a hash of the kernel
//! sources) for `host/ptx.rs` (`gpukern::ptx::KERNELS`), with the arch-specific `sm_90a` module
//! (`wgmma`) beside sm_80 and sm_90.

fn main() {
    if let Err(e) = gpukern_build::Builder::new("kernels-gpu").sm90a().build() {
        e.exit();
    }
}
