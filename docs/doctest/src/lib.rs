// `gpukern-docs`: the Rust snippets of `docs/writing-kernels.md`, compiled and run as doctests
// (`cargo test -p gpukern-docs --doc`). The page is this crate's documentation, so a snippet
// that stops compiling, or whose asserts fail, fails the tests. Every snippet that launches a
// kernel runs it in the simulator (`Gpu::simulator()`), so none needs a GPU.
//
// How the snippets are compiled:
// * Each snippet's kernels sit in `mod kernels { ... }`: rustdoc wraps a snippet in `fn main`,
//   and a `#[kernel]` must be an item of a module (its launcher, a sibling module, calls it as
//   `super::name`). The kernel crate's `lib.rs` of step 1 has a hidden `fn main() {}` instead,
//   so that its items stay at the crate root, as in a real kernel crate.
// * A simulator `Module` needs only the crate name:
//   `PtxSet::simulator_only(env!("CARGO_CRATE_NAME"))`. In a doctest `CARGO_CRATE_NAME` is this
//   crate's (`gpukern_docs`, checked: cargo sets it for rustdoc, and the doctest's compilation
//   inherits it), and the `KERNEL.krate` of a snippet's kernel is expanded from the same
//   variable in the same compilation, so the two agree and the module launches the snippet's
//   kernels.
// * `build.rs` (step 1) is `no_run`: it compiles (this crate dev-depends on `gpukern-build`) but
//   only works inside a build script (it needs `OUT_DIR` and `CARGO_MANIFEST_DIR`).
//
// Blocks that are not compiled, and why:
// * The two `Cargo.toml` files (```` ```toml ````) and the layout and shell commands
//   (```` ```text ````, ```` ```sh ````): not Rust.
// * The host's `src/main.rs` (step 1, ```` ```rust,ignore ````): `gpukern::include_ptx!`
//   includes `$OUT_DIR/gpukern_ptx/kernels.rs`, which only a build script running
//   `gpukern-build` on a crate named `kernels` writes; this crate has no build script, and
//   giving it one would compile a kernel crate to PTX in every test build. The same launch in
//   the simulator is compiled and run in steps 2 to 9.
// The build.rs snippet is a whole build script: its `fn main` is the point.
#![allow(clippy::needless_doctest_main)]
#![doc = include_str!("../../writing-kernels.md")]
