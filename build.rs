//! Compiles `kernels-gpu` to PTX with [`gpukern_build`] (rustc's NVPTX backend on the pinned
//! nightly, every architecture at once, cached by a hash of the kernel sources) and writes the
//! table of modules that `host/ptx.rs` includes.

fn main() {
    if let Err(e) = gpukern_build::Builder::new("kernels-gpu").build() {
        e.exit();
    }
}
