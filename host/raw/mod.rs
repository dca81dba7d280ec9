//! What is left of the raw launches: the launch counting the tests read. Each family's launches
//! live in its `ops/<family>/kernels.rs`; `launch_count` moves to the module floor with the host
//! renovation.

pub(crate) mod launch_count;
