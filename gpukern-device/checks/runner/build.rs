//! Compiles the check kernels (`gpukern-device/checks`) to PTX for `tests/device_checks.rs`, and,
//! with the `hopper-plants` feature, the planted Hopper bugs (`gpukern-device/checks/hopper`, the
//! `sm_90a` module only) for the `hopper_plant` binary.

fn main() {
    if let Err(e) = gpukern_build::Builder::new("..").build() {
        e.exit();
    }
    if std::env::var_os("CARGO_FEATURE_HOPPER_PLANTS").is_some() {
        let built = gpukern_build::Builder::new("../hopper").archs("sm_90a").build();
        if let Err(e) = built {
            e.exit();
        }
    }
}
