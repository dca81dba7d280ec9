//! Compiles the check kernels (`gpukern-device/checks`) to PTX for `tests/device_checks.rs`, and,
//! with the `hopper-plants` feature, the planted Hopper bugs (`gpukern-device/checks/hopper`, the
//! `sm_90a` module only) for the `hopper_plant` binary.

fn main() {
    // sm_90 too: the cluster and Hopper checks are compiled for it alone.
    if let Err(e) = gpukern_build::Builder::new("..").archs("sm_80,sm_90").build() {
        e.exit();
    }
    if std::env::var_os("CARGO_FEATURE_HOPPER_PLANTS").is_some() {
        let built = gpukern_build::Builder::new("../hopper").archs("sm_90a").build();
        if let Err(e) = built {
            e.exit();
        }
    }
}
