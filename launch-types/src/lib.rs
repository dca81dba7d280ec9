//! gpukern's typed launchers at compile time: the test `launch_types` (`tests/launch_types.rs`)
//! runs the correct calls and trybuild's failing cases (`tests/compile_fail/`). This library is
//! empty; the crate exists so that trybuild's builds hold gpukern's dependencies only.
