//! Compiles `kernels-gpu`, gpukern's kernels, to PTX with [`gpukern_build`] (rustc's NVPTX
//! backend on the pinned nightly, every architecture at once, cached by a hash of the kernel
//! sources) for `host/ptx.rs` (`gpukern::ptx::KERNELS`), with the arch-specific `sm_90a` module
//! (`wgmma`) beside sm_80 and sm_90; with the `library` feature only (on by default).

fn main() {
    let builder = gpukern_build::Builder::new("kernels-gpu")
        .archs("sm_80,sm_90")
        .sm90a();
    // Without the `library` feature nothing is compiled to PTX: `gpukern::ptx::KERNELS` is then
    // an empty set, and a GPU refuses the library's kernels with a message saying so.
    let builder = match std::env::var_os("CARGO_FEATURE_LIBRARY") {
        Some(_) => builder,
        None => builder.without_ptx(),
    };
    if let Err(e) = builder.build() {
        e.exit();
    }
}
