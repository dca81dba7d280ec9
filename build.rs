//! Compiles `kernels-gpu`, gpukern's kernels, to PTX with [`gpukern_build`] (rustc's NVPTX
//! backend on the pinned nightly, every architecture at once, cached by a hash of the kernel
//! sources and of the features) for `host/ptx.rs` (`gpukern::ptx::KERNELS`), with the
//! arch-specific `sm_90a` module (`wgmma`) beside sm_80 and sm_90; only the kernel families
//! whose features are enabled (all of them with `library`, on by default).

/// gpukern's kernel families: the features its `library` feature lists in `Cargo.toml` (each the
/// kernels-gpu feature of the same name), read from there so that the list is written once.
fn families() -> Vec<String> {
    // Read when the script runs (cargo sets it for the package being built), not baked in when
    // the script was compiled: a script binary shared by two checkouts of one target directory
    // would read the other checkout's manifest.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| {
        eprintln!("gpukern's build script runs under cargo, which sets CARGO_MANIFEST_DIR");
        std::process::exit(1)
    });
    let manifest = std::path::Path::new(&dir).join("Cargo.toml");
    println!("cargo:rerun-if-changed={}", manifest.display());
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
        eprintln!("gpukern's build script cannot read {}: {e}", manifest.display());
        std::process::exit(1)
    });
    let Some(list) = text
        .lines()
        .find_map(|l| l.strip_prefix("library = [")?.strip_suffix(']'))
    else {
        eprintln!("gpukern's Cargo.toml has no one-line `library = [...]` feature");
        std::process::exit(1)
    };
    // The families are the plain names; `kernels-gpu/grid_check` is a dependency's feature.
    list.split(',')
        .map(|f| f.trim().trim_matches('"'))
        .filter(|f| !f.is_empty() && !f.contains('/'))
        .map(str::to_string)
        .collect()
}

fn main() {
    let enabled =
        |feature: &str| std::env::var_os(format!("CARGO_FEATURE_{}", feature.to_uppercase())).is_some();
    let mut features: Vec<String> = families().into_iter().filter(|f| enabled(f)).collect();
    // `cfg(gpukern_family)`: at least one family is compiled (the host's `cpu`, `api` and
    // `kernels` modules), one name instead of a list of features in each place.
    println!("cargo::rustc-check-cfg=cfg(gpukern_family)");
    if !features.is_empty() {
        println!("cargo::rustc-cfg=gpukern_family");
    }
    // The grid-barrier check that gpukern's tests launch comes with the whole library only.
    if enabled("library") {
        features.push("grid_check".to_string());
    }
    let builder = gpukern_build::Builder::new("kernels-gpu")
        .archs("sm_80,sm_90")
        .sm90a()
        .features(&features.iter().map(String::as_str).collect::<Vec<_>>());
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
