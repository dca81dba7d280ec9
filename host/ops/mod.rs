//! Safe, shape-checked operations on device-resident data, a folder per kernel family with the
//! same three files: `mod.rs` (the operands checked once, the public methods), `plan.rs` (a pure
//! `Plan::choose` over the shapes and the device's facts, unit-tested without a `Gpu`) and
//! `kernels.rs` (the plan's kernel, launched through the launchers `#[kernel]` generates). A
//! family with more to say has a file per idea beside them (`reduce/axis.rs`,
//! `softmax/grid_row.rs`, `matmul/wgmma.rs`). Launch shapes come from [`crate::launch_config`],
//! device facts from [`crate::device`]. Each family is compiled with the cargo feature of its
//! name only (all of them with `library`, the default).

#[cfg(feature = "add")]
pub mod add;
#[cfg(feature = "attention")]
pub mod attention;
#[cfg(feature = "cross_entropy")]
pub mod cross_entropy;
#[cfg(feature = "decode_attention")]
pub mod decode_attention;
#[cfg(feature = "embedding")]
pub mod embedding;
#[cfg(feature = "glu")]
pub mod glu;
#[cfg(feature = "matmul")]
pub mod matmul;
#[cfg(feature = "norm")]
pub mod norm;
#[cfg(feature = "reduce")]
pub mod reduce;
#[cfg(feature = "rotary")]
pub mod rotary;
#[cfg(feature = "sample")]
pub mod sample;
#[cfg(feature = "softmax")]
pub mod softmax;
#[cfg(feature = "transpose")]
pub mod transpose;

// Every family but reduce checks operands' shapes.
#[cfg(any(
    feature = "add",
    feature = "attention",
    feature = "cross_entropy",
    feature = "embedding",
    feature = "glu",
    feature = "matmul",
    feature = "norm",
    feature = "rotary",
    feature = "sample",
    feature = "softmax",
    feature = "transpose"
))]
pub(crate) use crate::error::same_shape;

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    /// Every family folder (and every part of a family in a folder of its own, as attention's
    /// `backward/`) has `mod.rs`, `plan.rs` and `kernels.rs`, and no file of `ops/` reaches into
    /// `crate::raw` (the launches live in each family's `kernels.rs`).
    #[test]
    fn every_family_has_the_same_three_files_and_no_raw_imports() {
        /// Checks the folder `dir` and the folders inside it.
        fn check(dir: &Path) {
            for file in ["mod.rs", "plan.rs", "kernels.rs"] {
                assert!(dir.join(file).is_file(), "{} has no {file}", dir.display());
            }
            for file in fs::read_dir(dir).expect("a family") {
                let path = file.expect("a file").path();
                if path.is_dir() {
                    check(&path);
                    continue;
                }
                let text = fs::read_to_string(&path).expect("a source file");
                assert!(
                    !text.contains("crate::raw"),
                    "{} imports crate::raw",
                    path.display()
                );
            }
        }
        let ops = Path::new(env!("CARGO_MANIFEST_DIR")).join("host/ops");
        let mut families = 0;
        for entry in fs::read_dir(&ops).expect("host/ops") {
            let dir = entry.expect("an entry").path();
            if dir.is_dir() {
                families += 1;
                check(&dir);
            }
        }
        assert!(families > 0, "no family folders in {}", ops.display());
    }

    /// The family folders are exactly the families of gpukern's `library` feature (the one list,
    /// which `build.rs` hands to the PTX build and `scripts/check-features.sh` walks); each is a
    /// cargo feature of gpukern enabling kernels-gpu's feature of the same name, and a feature of
    /// kernels-gpu (in its `default`): a family added without its feature would be compiled out.
    #[test]
    fn every_family_is_a_feature_all_the_way_down() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let read = |path: &str| fs::read_to_string(root.join(path)).expect("a manifest or build script");
        let (host, kernels) = (read("Cargo.toml"), read("kernels-gpu/Cargo.toml"));
        let feature = |manifest: &str, name: &str| {
            manifest
                .lines()
                .find(|l| l.starts_with(&format!("{name} = [")))
                .map(str::to_string)
        };
        let library = feature(&host, "library").expect("gpukern's `library` feature");
        let mut listed: Vec<&str> = library
            .trim_start_matches("library = [")
            .trim_end_matches(']')
            .split(',')
            .map(|f| f.trim().trim_matches('"'))
            .filter(|f| !f.contains('/'))
            .collect();
        let mut folders = Vec::new();
        for entry in fs::read_dir(root.join("host/ops")).expect("host/ops") {
            let dir = entry.expect("an entry").path();
            if !dir.is_dir() {
                continue;
            }
            let family = dir.file_name().and_then(|n| n.to_str()).expect("a family name");
            let quoted = format!("\"{family}\"");
            let own = feature(&host, family).unwrap_or_else(|| panic!("gpukern has no `{family}` feature"));
            assert!(
                own.contains(&format!("\"kernels-gpu/{family}\"")),
                "gpukern's `{family}` feature does not enable kernels-gpu's: {own}"
            );
            assert!(
                feature(&kernels, family).is_some(),
                "kernels-gpu has no `{family}` feature"
            );
            let kernels_default = feature(&kernels, "default").expect("kernels-gpu's `default` feature");
            assert!(
                kernels_default.contains(&quoted),
                "kernels-gpu's `default` lacks `{family}`: {kernels_default}"
            );
            assert!(library.contains(&quoted), "`library` lacks `{family}`: {library}");
            folders.push(family.to_string());
        }
        listed.sort_unstable();
        folders.sort_unstable();
        assert_eq!(listed, folders, "`library`'s families and host/ops's folders");
    }
}
