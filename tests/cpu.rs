//! Host-side logic that needs no GPU: launch-configuration arithmetic against device limits,
//! the choice of PTX module, the CPU references themselves, and the error messages.
//!
//! Plain `#[test]`s in one binary (`cargo test --test cpu`), a module per concern in `tests/cpu/`:
//! `launch_config` (grid sizing), `ptx_select` (the module for a device), the CPU references by
//! family (`add`, `matmul` with its plans, `softmax`), `rel_error`, and `errors` (messages, size
//! checks, the no-GPU rule). One binary rather than one per module: nothing here shares
//! process-wide state beyond the run's seed, but one link is cheaper than seven.

mod common;

// The crate root is `tests/cpu.rs`, so its modules in `tests/cpu/` need their paths.
#[path = "cpu/add.rs"]
mod add;
#[path = "cpu/errors.rs"]
mod errors;
#[path = "cpu/launch_config.rs"]
mod launch_config;
#[path = "cpu/matmul.rs"]
mod matmul;
#[path = "cpu/ptx_select.rs"]
mod ptx_select;
#[path = "cpu/rel_error.rs"]
mod rel_error;
#[path = "cpu/softmax.rs"]
mod softmax;
