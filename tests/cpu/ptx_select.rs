//! The choice of PTX module for a device's compute capability.

use gpukern::ptx::{PtxModule, PtxSet};

/// [`PtxSet::select`] over `modules` (leaked: a `PtxSet` holds `'static` modules, as the
/// generated ones are).
fn select_from(modules: &[PtxModule], cc: (i32, i32)) -> Option<&'static PtxModule> {
    let modules: &'static [PtxModule] = Box::leak(modules.to_vec().into_boxed_slice());
    PtxSet {
        krate: "fake",
        modules,
    }
    .select(cc)
}

/// Fake modules for `select_from`, in the order `build.rs` emits them (oldest first).
fn fake_modules() -> Vec<PtxModule> {
    [
        ("sm_70", (7, 0)),
        ("sm_80", (8, 0)),
        ("sm_86", (8, 6)),
        ("sm_90", (9, 0)),
    ]
    .into_iter()
    .map(|(arch, cc)| PtxModule {
        arch,
        compute_capability: cc,
        ptx: "",
    })
    .collect()
}

#[test]
fn select_from_picks_the_newest_module_not_newer_than_the_device() {
    let mut modules = fake_modules();
    for _ in 0..2 {
        for (device, want) in [
            ((7, 0), "sm_70"),
            ((7, 5), "sm_70"),
            ((8, 0), "sm_80"),
            ((8, 6), "sm_86"),
            ((8, 9), "sm_86"),
            ((9, 0), "sm_90"),
            ((10, 0), "sm_90"),
            ((12, 1), "sm_90"),
        ] {
            let got = select_from(&modules, device).map(|m| m.arch);
            assert_eq!(got, Some(want), "device {device:?}");
        }
        // The choice must not depend on the order of the list.
        modules.reverse();
    }
}

#[test]
fn select_from_finds_nothing_for_an_older_device() {
    let modules = fake_modules();
    assert!(select_from(&modules, (6, 1)).is_none());
    assert!(select_from(&modules[1..], (7, 5)).is_none());
    assert!(select_from(&[], (9, 0)).is_none());
}

#[test]
fn select_uses_the_embedded_modules() {
    let modules = gpukern::ptx::modules();
    assert!(!modules.is_empty(), "gpukern was built with no PTX module");
    for m in modules {
        let chosen = gpukern::ptx::select(m.compute_capability).expect("a module for its own architecture");
        // On its exact compute capability an arch-specific (`sm_90a`) module is preferred to the
        // plain one: it has the same kernels and more.
        let specific = modules
            .iter()
            .find(|o| o.is_arch_specific() && o.compute_capability == m.compute_capability);
        assert_eq!(chosen.arch, specific.unwrap_or(m).arch);
    }
    let oldest = modules.iter().map(|m| m.compute_capability).min().unwrap();
    assert!(gpukern::ptx::select((oldest.0 - 1, 0)).is_none());
}
