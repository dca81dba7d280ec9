//! The typed launchers at compile time: a launch whose arguments do not match the kernel's
//! signature, and a `#[kernel]` the launcher cannot be generated for, must not compile, each with
//! an error that names the mistake (the expected messages are the `.stderr` files next to the
//! cases in `tests/compile_fail/`); the correct call compiles and runs (`tests/compile_pass/`).
//!
//! Run with `cargo test --test launch_types`; after a compiler or launcher change that alters a
//! message on purpose, `TRYBUILD=overwrite cargo test --test launch_types` rewrites the `.stderr`
//! files (read the diff: each must still say what its case is about).

use std::path::Path;

#[test]
fn launch_types() {
    // trybuild builds gpukern again, in a target directory of its own (`target/tests/trybuild`),
    // and gpukern's build script would compile the kernel crates to PTX there again. Point it at
    // the PTX cache of this test's own build instead (keyed by a hash of the kernel sources, so
    // sharing it is safe); where that folder is missing it is made and filled as usual.
    if std::env::var_os("GPUKERN_PTX_CACHE").is_none() {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("CARGO_TARGET_TMPDIR is <target>/tmp");
        // SAFETY: no other thread of this test binary reads or writes the environment (it has
        // this one test), and trybuild's cargo processes start after this.
        unsafe { std::env::set_var("GPUKERN_PTX_CACHE", target.join("gpukern-ptx")) };
    }
    let cases = trybuild::TestCases::new();
    cases.pass("tests/compile_pass/*.rs");
    cases.compile_fail("tests/compile_fail/*.rs");
}
