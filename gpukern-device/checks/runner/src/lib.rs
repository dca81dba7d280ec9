//! Nothing here: this crate exists for its test, `tests/device_checks.rs`, which launches every
//! kernel of `gpukern-device-checks` through its generated launcher on CUDA and in the
//! simulator. Its `build.rs` compiles those kernels to PTX, so that gpukern's own build (and so
//! every user's) never does.
