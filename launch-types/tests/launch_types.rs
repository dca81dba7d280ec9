//! The typed launchers at compile time: a launch whose arguments do not match the kernel's
//! signature, and a `#[kernel]` the launcher cannot be generated for, must not compile, each with
//! an error that names the mistake (the expected messages are the `.stderr` files next to the
//! cases in `tests/compile_fail/`); the correct calls compile and run (the modules in
//! `tests/launch_types/`: this test crate is a user's crate like the failing cases', built with
//! the rest of the tests, so trybuild only type-checks its cases and never builds `gpukern`'s
//! dependencies to run them).
//!
//! Run with `cargo test -p gpukern-launch-types`; after a compiler or launcher change that alters a
//! message on purpose, `TRYBUILD=overwrite cargo test -p gpukern-launch-types` rewrites the `.stderr`
//! files (read the diff: each must still say what its case is about).

use std::path::Path;

#[path = "launch_types/add_launch.rs"]
mod add_launch;
#[path = "launch_types/checked_launch.rs"]
mod checked_launch;
#[path = "launch_types/generic_kernel_launch.rs"]
mod generic_kernel_launch;

/// The one test of this binary (so that nothing else reads the environment it sets): the correct
/// calls run, then trybuild's failing cases.
#[test]
fn launch_types() -> gpukern::Result<()> {
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
    add_launch::run()?;
    checked_launch::run()?;
    generic_kernel_launch::run()?;
    trybuild::TestCases::new().compile_fail("tests/compile_fail/*.rs");
    Ok(())
}
