//! Safe, shape-checked operations on device-resident data, a folder per kernel family with the
//! same three files: `mod.rs` (the operands checked once, the public methods), `plan.rs` (a pure
//! `Plan::choose` over the shapes and the device's facts, unit-tested without a `Gpu`) and
//! `kernels.rs` (the plan's kernel, launched through the launchers `#[kernel]` generates). A
//! family with more to say has a file per idea beside them (`reduce/axis.rs`,
//! `softmax/grid_row.rs`, `matmul/wgmma.rs`). Launch shapes come from [`crate::launch_config`],
//! device facts from [`crate::device`].

#[cfg(feature = "library")]
pub mod add;
#[cfg(feature = "library")]
pub mod cross_entropy;
#[cfg(feature = "library")]
pub mod matmul;
#[cfg(feature = "library")]
pub mod norm;
#[cfg(feature = "library")]
pub mod reduce;
#[cfg(feature = "library")]
pub mod softmax;
#[cfg(feature = "library")]
pub mod transpose;

#[cfg(feature = "library")]
pub(crate) use crate::error::same_shape;

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    /// Every family folder has `mod.rs`, `plan.rs` and `kernels.rs`, and no file of `ops/`
    /// reaches into `crate::raw` (the launches live in each family's `kernels.rs`).
    #[test]
    fn every_family_has_the_same_three_files_and_no_raw_imports() {
        let ops = Path::new(env!("CARGO_MANIFEST_DIR")).join("host/ops");
        let mut families = 0;
        for entry in fs::read_dir(&ops).expect("host/ops") {
            let dir = entry.expect("an entry").path();
            if !dir.is_dir() {
                continue;
            }
            families += 1;
            for file in ["mod.rs", "plan.rs", "kernels.rs"] {
                assert!(dir.join(file).is_file(), "{} has no {file}", dir.display());
            }
            for file in fs::read_dir(&dir).expect("a family") {
                let path = file.expect("a file").path();
                let text = fs::read_to_string(&path).expect("a source file");
                assert!(
                    !text.contains("crate::raw"),
                    "{} imports crate::raw",
                    path.display()
                );
            }
        }
        assert_eq!(
            families, 7,
            "add, cross_entropy, matmul, norm, reduce, softmax, transpose"
        );
    }
}
