//! Compiles `kernels-gpu`, gpukern's kernels, to PTX with [`gpukern_build`] (rustc's NVPTX
//! backend on the pinned nightly, every architecture at once, cached by a hash of the kernel
//! sources and of the features) for `host/ptx.rs` (`gpukern::ptx::KERNELS`), with the
//! arch-specific `sm_90a` module (`wgmma`) beside sm_80 and sm_90; only the kernel families
//! whose features are enabled (all of them with `library`, on by default).

/// gpukern's family features, each the kernels-gpu feature of the same name.
const FAMILIES: [&str; 13] = [
    "add",
    "matmul",
    "softmax",
    "norm",
    "reduce",
    "transpose",
    "cross_entropy",
    "glu",
    "rotary",
    "embedding",
    "sample",
    "attention",
    "decode_attention",
];

fn main() {
    let enabled =
        |feature: &str| std::env::var_os(format!("CARGO_FEATURE_{}", feature.to_uppercase())).is_some();
    let mut features: Vec<&str> = FAMILIES.into_iter().filter(|f| enabled(f)).collect();
    // The grid-barrier check that gpukern's tests launch comes with the whole library only.
    if enabled("library") {
        features.push("grid_check");
    }
    let builder = gpukern_build::Builder::new("kernels-gpu")
        .archs("sm_80,sm_90")
        .sm90a()
        .features(&features);
    // Without any family nothing is compiled to PTX: `gpukern::ptx::KERNELS` is then an empty
    // set, and a GPU refuses the library's kernels with a message saying so.
    let builder = if features.is_empty() {
        builder.without_ptx()
    } else {
        builder
    };
    if let Err(e) = builder.build() {
        e.exit();
    }
}
