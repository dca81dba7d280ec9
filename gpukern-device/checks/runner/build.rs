//! Compiles the check kernels (`gpukern-device/checks`) to PTX for `tests/device_checks.rs`.

fn main() {
    if let Err(e) = gpukern_build::Builder::new("..").build() {
        e.exit();
    }
}
