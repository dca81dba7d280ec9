//! `#[kernel(launch_bounds(384, 1))]` in the checks crate's PTX, without a GPU: the entry
//! `bounded_write_index` carries `.maxntid 384, 1, 1` and `.minnctapersm 1` right before its
//! body, no marker global is left, the other entries have no bounds, and NVIDIA's assembler
//! accepts the module for sm_90 and reports the entry's thread limit.
//!
//! ptxas comes from `GPUKERN_PTXAS`, else `.tools/ptxas/bin/ptxas` under the repository root,
//! else `ptxas` on `PATH`; without it the assembler test fails (a missing assembler must not
//! look like a pass).

use std::path::{Path, PathBuf};
use std::process::Command;

use gpukern::PtxSet;

static CHECKS: PtxSet = gpukern::include_ptx!(gpukern_device_checks);

/// The bounded entry and what must open its body.
const ENTRY: &str = "bounded_write_index";
const BOUNDS: &str = ")\n.maxntid 384, 1, 1\n.minnctapersm 1\n{\n";

/// The text of entry `name` from its `.entry` line to the end of its body's first line.
fn header<'a>(ptx: &'a str, name: &str) -> Option<&'a str> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let open = ptx[start..].find("\n{\n")? + start + 3;
    Some(&ptx[start..open])
}

#[test]
fn the_bounded_entry_has_its_bounds_and_no_other_has_any() {
    assert!(!CHECKS.modules.is_empty(), "the checks crate was built to PTX");
    for module in CHECKS.modules {
        let ptx = module.ptx;
        let bounded =
            header(ptx, ENTRY).unwrap_or_else(|| panic!("{}: no entry `{ENTRY}` in the PTX", module.arch));
        assert!(
            bounded.ends_with(BOUNDS),
            "{}: the entry's header does not end in the launch bounds:\n{bounded}",
            module.arch
        );
        assert!(
            !ptx.contains("__gpukern_bounds_"),
            "{}: a launch-bounds marker was left in the PTX",
            module.arch
        );
        assert_eq!(
            ptx.matches(".maxntid").count(),
            1,
            "{}: only `{ENTRY}` has launch bounds",
            module.arch
        );
        assert_eq!(ptx.matches(".minnctapersm").count(), 1, "{}", module.arch);
    }
}

/// Where to find ptxas, or a panic telling how to get it.
fn ptxas() -> PathBuf {
    if let Some(path) = std::env::var_os("GPUKERN_PTXAS") {
        return PathBuf::from(path);
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../.tools/ptxas/bin/ptxas");
    if local.is_file() {
        return local;
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("ptxas"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "ptxas not found: set GPUKERN_PTXAS to NVIDIA's PTX assembler (no GPU needed), or run \
                 `bash scripts/test.sh`, which installs it into .tools/ptxas/bin/ptxas"
            )
        })
}

#[test]
fn ptxas_accepts_the_bounded_entry_for_sm_90() {
    let ptxas = ptxas();
    let module = CHECKS
        .modules
        .iter()
        .find(|m| m.arch == "sm_90")
        .unwrap_or_else(|| {
            panic!(
                "no sm_90 module among {:?}",
                CHECKS.modules.iter().map(|m| m.arch).collect::<Vec<_>>()
            )
        });
    let file = std::env::temp_dir().join(format!("gpukern-launch-bounds-{}.ptx", std::process::id()));
    std::fs::write(&file, module.ptx).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    let output = Command::new(&ptxas)
        .args(["-arch=sm_90", "-v"])
        .arg(&file)
        .args(["-o", "/dev/null"])
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
    let _ = std::fs::remove_file(&file);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "ptxas -arch=sm_90 refused the module:\n{text}"
    );
    assert!(
        text.contains(&format!("Compiling entry function '{ENTRY}'")),
        "ptxas did not assemble `{ENTRY}`:\n{text}"
    );
}
