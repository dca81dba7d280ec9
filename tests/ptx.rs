//! The embedded PTX modules, checked without a GPU: every entry point is a kernel of the registry
//! (`#[kernel]`'s, with its facts: block size and barrier count), each module targets its
//! architecture, NVIDIA's assembler (ptxas) accepts it with no stack frame and no spills within
//! the kernel's block size, and the block barriers are where the source puts them. No kernel is
//! named here: the tests loop over the registry and the modules' entry points.
//!
//! ptxas comes from `GPUKERN_PTXAS` (path to the binary), else `.tools/ptxas/bin/ptxas` under the
//! repository root (where `bash scripts/test.sh` installs it), else `ptxas` on `PATH`. Without
//! it these tests fail: a missing assembler must not look like a pass.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use gpukern::gpukern_device::launch::{Facts, Kernel, LaunchCounts, registered_in};
use gpukern::kernels::matmul::tf32;
use gpukern::ptx::{PtxModule, entry_names, modules};

/// The variable naming the ptxas binary.
const PTXAS_ENV: &str = "GPUKERN_PTXAS";

/// Registers in one block's share of the register file on sm_80 and sm_90 (64 K 32-bit registers).
const REGISTERS_PER_BLOCK: u32 = 65536;

/// Where to find ptxas, or a panic telling how to install it.
fn ptxas() -> PathBuf {
    if let Some(path) = std::env::var_os(PTXAS_ENV) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "{PTXAS_ENV}={} is not a file: point it at the ptxas binary",
            path.display()
        );
        return path;
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/ptxas/bin/ptxas");
    if local.is_file() {
        return local;
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("ptxas"))
        .find(|candidate| candidate.is_file());
    on_path.unwrap_or_else(|| {
        panic!(
            "ptxas not found: the PTX tests need NVIDIA's PTX assembler (no GPU needed). Either run \
             `bash scripts/test.sh`, which installs it into .tools/ptxas/bin/ptxas, or fetch it by hand: \
             `pip download --no-deps nvidia-cuda-nvcc`, unzip the wheel, and set \
             {PTXAS_ENV}=<unzipped>/nvidia/cu13/bin/ptxas (or put that ptxas on PATH)"
        )
    })
}

/// What ptxas `-v` reported for one function.
#[derive(Clone, Debug, Default)]
struct Properties {
    /// The line `N bytes stack frame, N bytes spill stores, N bytes spill loads`.
    frame_line: String,
    /// Bytes of stack frame, spill stores, spill loads.
    frame: Option<[u64; 3]>,
    /// Registers per thread.
    registers: Option<u32>,
}

/// Assembles `module` for `arch` with `ptxas -v` and returns its report, by function name.
///
/// Panics with ptxas's output if it refuses the module.
///
/// An arch-specific module's entries that are twins of its plain module's ([`twin_entries`]) are
/// not assembled again: their properties are the plain module's for its own arch (the same PTX
/// gives the same machine code on sm_90 and sm_90a).
fn assemble(module: &PtxModule, arch: &str) -> BTreeMap<String, Properties> {
    let mut report = parse_report(ptxas_report(module, arch));
    if let Some((plain, twins)) = twins_of(module, arch) {
        let plain_report = assemble(plain, plain.arch);
        for name in twins {
            if let Some(props) = plain_report.get(name.as_str()) {
                report.insert(name.clone(), props.clone());
            }
        }
    }
    report
}

/// For `module` assembled for its own arch, when it is arch-specific (`sm_90a`): the plain module
/// of its compute capability (`sm_90`) and the entries it shares with it ([`twin_entries`]).
fn twins_of(module: &PtxModule, arch: &str) -> Option<(&'static PtxModule, &'static BTreeSet<String>)> {
    if !module.is_arch_specific() || arch != module.arch {
        return None;
    }
    let plain = modules()
        .iter()
        .find(|m| !m.is_arch_specific() && m.compute_capability == module.compute_capability)?;
    static TWINS: OnceLock<Mutex<BTreeMap<&'static str, &'static BTreeSet<String>>>> = OnceLock::new();
    let mut twins = TWINS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let set = *twins
        .entry(module.arch)
        .or_insert_with(|| Box::leak(Box::new(twin_entries(module.ptx, plain.ptx))));
    Some((plain, set))
}

/// The entries of `specific` (the sm_90a module) whose text is the same as in `plain` (the sm_90
/// module) but for the numbers of their block labels (`$L__BB<function>_<block>`, numbered by
/// the function's place in its module) and that call no function (whose body might differ):
/// the plain kernels, about half of the sm_90a module's bytes. ptxas assembles them once, in the
/// plain module, where the sm_90a module took it over a minute on one core.
fn twin_entries(specific: &str, plain: &str) -> BTreeSet<String> {
    let by_name = |ptx: &str| -> BTreeMap<String, String> {
        module_items(ptx)
            .into_iter()
            .filter_map(|item| entry_name(&item).map(|name| (name, normalise_labels(&item))))
            .collect()
    };
    let plain = by_name(plain);
    by_name(specific)
        .into_iter()
        .filter(|(name, text)| !text.contains("call") && plain.get(name) == Some(text))
        .map(|(name, _)| name)
        .collect()
}

/// `text` with every block label's function number dropped (`$L__BB12_3` -> `$L__BB_3`).
fn normalise_labels(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("$L__BB") {
        let (head, tail) = rest.split_at(at + "$L__BB".len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        rest = if tail[digits..].starts_with('_') {
            &tail[digits..]
        } else {
            tail
        };
    }
    out.push_str(rest);
    out
}

/// The name of the entry point `item` defines (a top-level item of [`module_items`]), if it is one.
fn entry_name(item: &str) -> Option<String> {
    item.lines().find_map(|l| {
        let rest = l
            .strip_prefix(".visible .entry ")
            .or_else(|| l.strip_prefix(".entry "))?;
        Some(rest.split('(').next().unwrap_or(rest).trim().to_string())
    })
}

/// ptxas's output (`-v --warn-on-spills`) on `module` for `arch`, run once per pair in this
/// process: several tests read the same assembly, and the sm_90a module alone takes ptxas about
/// 50 s on one core (so it runs in parts, [`run_ptxas`]). Pairs run in parallel; a second caller
/// of one pair waits for the first.
///
/// Panics with ptxas's output if it refuses the module.
fn ptxas_report(module: &PtxModule, arch: &str) -> &'static str {
    type Reports = Mutex<BTreeMap<(&'static str, String), &'static OnceLock<String>>>;
    static REPORTS: OnceLock<Reports> = OnceLock::new();
    let cell: &'static OnceLock<String> = {
        let mut reports = REPORTS
            .get_or_init(Reports::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        reports
            .entry((module.arch, arch.to_string()))
            .or_insert_with(|| Box::leak(Box::new(OnceLock::new())))
    };
    cell.get_or_init(|| run_ptxas(module, arch))
}

/// Bytes of PTX one ptxas process assembles at most: a larger module is cut into parts of
/// whole entry points, assembled in parallel (the sm_90a module, about 16 MB, took ptxas about
/// 50 s on one core of the 2-core CI machine, the ptx test's critical path; 18 MB and 67 s
/// later, 55 s of it its own entries, [`twin_entries`]).
const PTXAS_PART_BYTES: usize = 9 << 20;

/// Runs ptxas on `module` for `arch` and returns its output: one process per part of the module
/// ([`module_parts`]), run at once, their outputs one after another; an arch-specific module
/// without the entries it shares with its plain module ([`twins_of`]).
fn run_ptxas(module: &PtxModule, arch: &str) -> String {
    let ptx = match twins_of(module, arch) {
        Some((_, twins)) => module_items(module.ptx)
            .into_iter()
            .filter(|item| entry_name(item).is_none_or(|name| !twins.contains(&name)))
            .collect::<String>(),
        None => module.ptx.to_string(),
    };
    let parts = module_parts(&ptx, ptx.len().div_ceil(PTXAS_PART_BYTES));
    std::thread::scope(|scope| {
        let runs: Vec<_> = parts
            .iter()
            .enumerate()
            .map(|(i, part)| scope.spawn(move || run_ptxas_on(part, module.arch, arch, i)))
            .collect();
        runs.into_iter()
            .map(|run| run.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// `ptx` cut into `parts` modules (at least 1) that together hold each entry point once: every
/// one keeps everything but the entry points (the header, declarations, `.func` bodies), and the
/// entries are dealt out largest first to the part with the fewest bytes so far.
fn module_parts(ptx: &str, parts: usize) -> Vec<String> {
    if parts <= 1 {
        return vec![ptx.to_string()];
    }
    let items = module_items(ptx);
    let is_entry = |item: &String| entry_name(item).is_some();
    let shared: String = items
        .iter()
        .filter(|i| !is_entry(i))
        .map(String::as_str)
        .collect();
    let mut entries: Vec<&String> = items.iter().filter(|i| is_entry(i)).collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.len()));
    let mut out = vec![shared; parts];
    let mut sizes = vec![0usize; parts];
    for entry in entries {
        let lightest = (0..parts).min_by_key(|&p| sizes[p]).expect("parts >= 2");
        out[lightest].push_str(entry);
        sizes[lightest] += entry.len();
    }
    out
}

/// `ptx`'s top-level items, in order, whose concatenation is `ptx` (with a final newline): a new
/// one starts at a function's first line or at the `// .globl` comment that precedes an entry.
fn module_items(ptx: &str) -> Vec<String> {
    let mut items: Vec<String> = vec![String::new()];
    let mut only_globl = false;
    for line in ptx.lines() {
        let globl = line.starts_with("	// .globl");
        let function = [
            ".visible .entry",
            ".entry",
            ".visible .func",
            ".func",
            ".weak .func",
        ]
        .iter()
        .any(|start| line.starts_with(start));
        if globl || (function && !only_globl) {
            items.push(String::new());
        }
        if globl {
            only_globl = true;
        } else if !line.trim().is_empty() {
            only_globl = false;
        }
        let item = items.last_mut().expect("one item at least");
        item.push_str(line);
        item.push('\n');
    }
    items
}

/// Twins: the same entry but for its block labels' function numbers, and calling nothing; an
/// entry whose body differs, or that calls a function, is assembled in both modules.
#[test]
fn twin_entries_differ_only_in_label_numbers() {
    assert_eq!(
        normalise_labels("@%p bra $L__BB12_3;\n$L__BB12_3:\nx $L__BB"),
        "@%p bra $L__BB_3;\n$L__BB_3:\nx $L__BB"
    );
    let entry = |name: &str, f: u32, body: &str| {
        format!(
            "\t// .globl\t{name}\n.visible .entry {name}(\n)\n{{\n@%p bra $L__BB{f}_1;\n{body}\n$L__BB{f}_1:\nret;\n}}\n"
        )
    };
    let head = "//\n.version 8.0\n.address_size 64\n\n";
    let plain = format!(
        "{head}{}{}{}",
        entry("a", 1, "add"),
        entry("b", 2, "mul"),
        entry("c", 3, "call f;")
    );
    let specific = format!(
        "{head}{}{}{}{}",
        entry("h", 1, "wgmma"),
        entry("a", 2, "add"),
        entry("b", 3, "sub"),
        entry("c", 4, "call f;")
    );
    let twins = twin_entries(&specific, &plain);
    assert_eq!(twins.into_iter().collect::<Vec<_>>(), vec!["a".to_string()]);
}

#[test]
fn module_parts_hold_each_entry_once_and_every_declaration() {
    let ptx = "//\n.version 8.0\n.target sm_90a\n.address_size 64\n\n\
               .extern .shared .align 16 .b8 smem[];\n\
               .func helper(\n.param .b32 x\n)\n{\nret;\n}\n\
               \t// .globl\ta\n.visible .entry a(\n)\n{\n{\n.reg .pred p;\n}\nret;\n}\n\
               \t// .globl\tb\n.visible .entry b(\n)\n{\nret;\nret;\nret;\n}\n\
               \t// .globl\tc\n.visible .entry c(\n)\n{\nret;\n}\n";
    assert_eq!(module_parts(ptx, 1), vec![ptx.to_string()]);
    let parts = module_parts(ptx, 2);
    assert_eq!(parts.len(), 2);
    for part in &parts {
        assert!(part.starts_with("//\n.version 8.0"), "{part}");
        assert!(
            part.contains(".extern .shared") && part.contains(".func helper("),
            "{part}"
        );
    }
    for entry in ["a", "b", "c"] {
        let header = format!(".visible .entry {entry}(");
        let holders = parts.iter().filter(|p| p.contains(&header)).count();
        assert_eq!(holders, 1, "entry {entry} in {holders} parts");
    }
    // Each entry whole: its `// .globl` line and its inline-asm braces stay with it.
    let with_a = parts
        .iter()
        .find(|p| p.contains(".visible .entry a("))
        .expect("a part holds a");
    assert!(with_a.contains("\t// .globl\ta\n.visible .entry a(\n)\n{\n{\n.reg .pred p;\n}\nret;\n}\n"));
}

/// Runs ptxas on part `index` of the `module_arch` module (`ptx`) for `arch`; returns its output.
fn run_ptxas_on(ptx: &str, module_arch: &str, arch: &str, index: usize) -> String {
    let ptxas = ptxas();
    let file = std::env::temp_dir().join(format!(
        "gpukern-ptx-test-{}-{module_arch}-{index}-for-{arch}.ptx",
        std::process::id(),
    ));
    fs::write(&file, ptx).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    let output = Command::new(&ptxas)
        .arg(format!("-arch={arch}"))
        .args(["-v", "--warn-on-spills"])
        .arg(&file)
        .args(["-o", "/dev/null"])
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", ptxas.display()));
    let _ = fs::remove_file(&file);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "ptxas -arch={arch} refused the {module_arch} module (part {index}, {}):\n{text}",
        output.status
    );
    text
}

/// Parses ptxas `-v` output: `Function properties for NAME`, then its stack/spill line, then
/// (for entries) `Used N registers, ...`.
fn parse_report(text: &str) -> BTreeMap<String, Properties> {
    let mut report = BTreeMap::<String, Properties>::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some((_, name)) = line.split_once("Function properties for ") {
            let name = name.trim().to_string();
            report.entry(name.clone()).or_default();
            current = Some(name);
        } else if let Some(props) = current.as_ref().and_then(|n| report.get_mut(n)) {
            if line.contains("bytes stack frame") {
                props.frame_line = line.trim().to_string();
                let numbers: Vec<u64> = line
                    .split(',')
                    .filter_map(|part| part.split_whitespace().next()?.parse().ok())
                    .collect();
                props.frame = numbers.try_into().ok();
            } else if let Some((_, rest)) = line.split_once("Used ") {
                props.registers = rest
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|_| rest.contains("registers"));
            }
        }
    }
    report
}

/// The kernel crate whose PTX gpukern embeds, as rustc names it.
const KERNEL_CRATE: &str = "kernels_gpu";

/// The kernels `#[kernel]` registered for [`KERNEL_CRATE`], by name.
fn registry() -> BTreeMap<&'static str, &'static Kernel> {
    registered_in(KERNEL_CRATE)
        .into_iter()
        .map(|k| (k.name, k))
        .collect()
}

/// The registered facts of entry point `name`, if it is a registered kernel.
fn facts(name: &str) -> Option<Facts> {
    registry().get(name).map(|k| k.facts)
}

/// What is wrong with the registry against the modules' entry points: an entry point with no
/// registered kernel, one whose kernel lacks a fact the tests need (`block`, `barriers`), and a
/// registered kernel that no module has.
fn registry_gaps(registry: &BTreeMap<&str, &Kernel>, modules: &[(&str, Vec<&str>)]) -> Vec<String> {
    let mut gaps = Vec::new();
    for (arch, entries) in modules {
        for name in entries {
            match registry.get(name) {
                None => gaps.push(format!(
                    "{name} (the {arch} module): an entry point with no registered kernel"
                )),
                Some(k) => {
                    if k.facts.block.is_none() {
                        gaps.push(format!(
                            "{name}: no block size (`#[kernel(block(N))]` or launch bounds)"
                        ));
                    }
                    if k.facts.barriers.is_none() {
                        gaps.push(format!("{name}: no barrier count (`#[kernel(barriers(N))]`)"));
                    }
                }
            }
        }
    }
    for name in registry.keys() {
        if !modules.iter().any(|(_, entries)| entries.contains(name)) {
            gaps.push(format!("{name}: registered, but an entry point of no module"));
        }
    }
    gaps.sort();
    gaps.dedup();
    gaps
}

/// The lines of kernel `name`'s body in `ptx`, from its `.visible .entry` to the `}` that closes
/// it (the only `}` at the start of a line inside a function).
fn kernel_body<'a>(ptx: &'a str, name: &str) -> Vec<&'a str> {
    let header = format!(".visible .entry {name}(");
    let start = ptx
        .find(&header)
        .unwrap_or_else(|| panic!("no `{header}` in the module"));
    // The body ends at a `}` line alone that no `// end inline asm` follows (an `asm!` block's
    // own braces are lines of their own too).
    // Read no further than the body: the module is megabytes long and has hundreds of kernels.
    let mut lines = ptx[start..].lines().peekable();
    let mut body = Vec::new();
    while let Some(line) = lines.next() {
        if line == "}" && !lines.peek().is_some_and(|l| l.contains("end inline asm")) {
            break;
        }
        body.push(line);
    }
    body
}

/// Whether a PTX line is a block barrier instruction (`bar.*` / `barrier.*`, predicated or not).
fn is_barrier(line: &str) -> bool {
    let instr = line.trim_start();
    let instr = match instr.strip_prefix('@') {
        Some(predicated) => predicated
            .split_once(char::is_whitespace)
            .map_or("", |(_, i)| i.trim_start()),
        None => instr,
    };
    instr.starts_with("bar.") || instr.starts_with("barrier.")
}

#[test]
fn every_module_declares_every_kernel_for_its_architecture() {
    let modules = modules();
    assert!(!modules.is_empty(), "gpukern was built with no PTX module");
    for pair in modules.windows(2) {
        // An arch-specific module (sm_90a) follows the plain one of its compute capability.
        let ordered = pair[0].compute_capability < pair[1].compute_capability
            || (pair[0].compute_capability == pair[1].compute_capability
                && !pair[0].is_arch_specific()
                && pair[1].is_arch_specific());
        assert!(
            ordered,
            "modules must be sorted oldest first, with no duplicate: {} then {}",
            pair[0].arch, pair[1].arch
        );
    }
    for module in modules {
        let (major, minor) = module.compute_capability;
        assert_eq!(
            module.arch.trim_end_matches('a'),
            format!("sm_{major}{minor}"),
            "arch and compute capability disagree"
        );
        let targets: Vec<&str> = module
            .ptx
            .lines()
            .filter_map(|line| line.trim().strip_prefix(".target"))
            .map(|rest| rest.split(',').next().unwrap_or("").trim())
            .collect();
        assert_eq!(
            targets,
            [module.arch],
            "the {} module's .target directives",
            module.arch
        );
    }
}

/// Every entry point of every module is a registered kernel with its facts, and every registered
/// kernel is an entry point: the registry is the list of kernels, and the facts the tests below
/// read are there.
#[test]
fn every_entry_point_is_a_registered_kernel_with_its_facts() {
    let registry = registry();
    assert!(
        registry.len() > 100,
        "only {} kernels registered for {KERNEL_CRATE}: is the kernel crate linked?",
        registry.len()
    );
    let modules: Vec<(&str, Vec<&str>)> = modules().iter().map(|m| (m.arch, entry_names(m.ptx))).collect();
    let gaps = registry_gaps(&registry, &modules);
    assert!(
        gaps.is_empty(),
        "the registry and the PTX disagree:\n{}",
        gaps.join("\n")
    );
}

/// The check above, shown able to fail: a planted entry point with no kernel, a kernel without
/// its facts, and a registered kernel in no module are each reported.
#[test]
fn registry_gaps_are_reported() {
    let registry = registry();
    let modules: Vec<(&str, Vec<&str>)> = modules().iter().map(|m| (m.arch, entry_names(m.ptx))).collect();
    assert!(registry_gaps(&registry, &modules).is_empty());
    let mut planted = modules.clone();
    planted[0].1.push("planted_entry");
    let gaps = registry_gaps(&registry, &planted);
    assert!(
        gaps.len() == 1 && gaps[0].contains("planted_entry"),
        "an entry point with no kernel gives {gaps:?}"
    );
    let without_facts = Kernel {
        name: "add",
        krate: KERNEL_CRATE,
        params: &[],
        bounds: None,
        launches: LaunchCounts::new(),
        facts: Facts::default(),
    };
    let mut short: BTreeMap<&str, &Kernel> = registry.clone();
    short.insert("add", &without_facts);
    let gaps = registry_gaps(&short, &modules);
    assert!(
        gaps.len() == 2 && gaps.iter().all(|g| g.starts_with("add:")),
        "a kernel without facts gives {gaps:?}"
    );
    let unplaced: Vec<(&str, Vec<&str>)> = modules
        .iter()
        .map(|(arch, entries)| (*arch, entries.iter().copied().filter(|e| *e != "add").collect()))
        .collect();
    let gaps = registry_gaps(&registry, &unplaced);
    assert!(
        gaps.len() == 1 && gaps[0].contains("add: registered, but"),
        "a kernel in no module gives {gaps:?}"
    );
}

/// Each module declares each entry point once, and every newer module has every older one's
/// entry points; what a module adds over the one before it belongs to the families that need
/// its architecture ([`ARCH_FAMILIES`]), so that no other kernel is lost from an older module.
#[test]
fn newer_modules_add_only_the_kernels_of_their_architecture() {
    let modules = modules();
    for module in modules {
        let mut entries = entry_names(module.ptx);
        let count = entries.len();
        entries.sort_unstable();
        entries.dedup();
        assert_eq!(
            entries.len(),
            count,
            "an entry point declared twice in the {} module",
            module.arch
        );
    }
    for pair in modules.windows(2) {
        let (older, newer) = (entry_names(pair[0].ptx), entry_names(pair[1].ptx));
        let lost: Vec<&str> = older.iter().copied().filter(|e| !newer.contains(e)).collect();
        assert!(
            lost.is_empty(),
            "the {} module lacks entry points of the {} module: {lost:?}",
            pair[1].arch,
            pair[0].arch
        );
        let families = ARCH_FAMILIES
            .iter()
            .filter(|(cc, specific, _)| {
                pair[1].compute_capability >= *cc && (!specific || pair[1].is_arch_specific())
            })
            .flat_map(|(_, _, prefixes)| prefixes.iter().copied())
            .collect::<Vec<&str>>();
        let strays: Vec<&str> = newer
            .iter()
            .copied()
            .filter(|e| !older.contains(e) && !families.iter().any(|f| e.starts_with(f)))
            .collect();
        assert!(
            strays.is_empty(),
            "the {} module has entry points the {} module lacks, of no family that needs {}: {strays:?}",
            pair[1].arch,
            pair[0].arch,
            pair[1].arch
        );
    }
}

/// The kernel families compiled only into the modules of a newer architecture: from this compute
/// capability on, in the arch-specific (`a`) module only or not, the entry points whose names
/// start with one of these (the cluster kernels need sm_90; `wgmma` and the bulk-copy ring norms
/// sm_90a). Families, not kernels: a new variant of one is not listed here.
const ARCH_FAMILIES: &[((i32, i32), bool, &[&str])] = &[
    ((9, 0), false, &["softmax_cluster_", "sample_cluster_"]),
    (
        (9, 0),
        true,
        &[
            "matmul_wgmma_",
            "matmul_ws_",
            "matmul_grouped_",
            "matmul_decode_wgmma_",
            "matmul_fp8_",
            "attention_wgmma_",
            "attention_bwd_wgmma_",
            "rms_norm_ring_",
            "layer_norm_ring_",
        ],
    ),
];

/// `wgmma.mma_async` and `wgmma.wait_group` lines per `wgmma` kernel: the one-warpgroup
/// kernel's `m128n128k64` step is 8 products (`m64n128k16`) and a wait; the warp-specialised
/// kernels' step 4 (`m64nNk16` with `N` 256, 128 or 64 by tile, `m64n256k8` in TF32) issued without a wait, then a
/// `wait_group 1` in the loop and a `wait_group 0` after it; TF32 has no asynchronous twin, so
/// its step waits inside too. The grouped kernel of 128 x 256 tiles runs the warp-specialised
/// schedule twice, for whole tiles and for the split tail's half tiles: 8 and 4 (the 128 x 128
/// one, which does not split, once: 4 and 2), and so do the
/// 16-bit warp-specialised kernels of 128-row tiles (`matmul_ws_{bf16,f16}*_128x{256,128}`; the
/// 64 x 128 tile and TF32 never split their tail); the Hopper decode kernels
/// (`matmul_decode_wgmma_`) once: 4 and 2. The FP8 kernels' step is 4 `m64nNk32`: fast accumulation as the
/// warp-specialised kernels, promoted (and block-scaled) with one array: two sites of the step
/// (the first before the loop) and two `wait_group 0` (the loop's and the last step's), the
/// overlapped promotion three sites and four waits (`matmul_fp8_e5m2_*` the same by
/// accumulation).
///
/// Attention's Hopper rung: per KV tile `D / 64` scores steps of 4 (`m64n128k16`) and a `P V` of
/// 8 (`m64nDk16`, `A` from registers), one site of each in the loop, each waited for; its
/// ping-pong schedule has two sites of each (the first tile's scores and the last tile's `P V`
/// outside the loop) and four waits (the first scores, the loop's `wait_group 1` and `0`, the
/// last `P V`), whatever the mask. At head dim 256 (64-key tiles) the scores steps are
/// `m64n64k16` and `P V` 4 `m64n256k16`.
///
/// Its backward (`attention_bwd_wgmma_`): the `dK`/`dV` kernel's two transposed scores products
/// (`D / 64` steps of 4 `m64n64k16` each) and two gradient products (4 `m64nDk16`, `A` from
/// registers); at `D = 64`, overlapped, six waits (the previous step's two products, `S^T`,
/// `dP^T`, and the last step's two after the loop), at 128 four (`S^T`, `dP^T`, both gradients).
/// The `dQ` kernel's two scores products (`D / 64` steps of 4) and `dQ` (8 steps); at 64 four
/// waits (the previous `dQ`, `S`, `dP`, the last `dQ`), at 128 three. The one-kernel backward
/// (`attention_bwd_wgmma_fused_`): the `dK`/`dV` kernel's products and a `dQ` product on both
/// MN-major operands (4 `m64n64k16` over a consumer's keys at `D = 64`, 8 over the block's at
/// 128); at 64 seven waits (the previous step's `dV` and `dK`, `S^T`, `dP^T`, this step's `dV`
/// and `dQ` in one, the last step's two), at 128 five. Its `dQ` conversion
/// (`attention_bwd_wgmma_dq_convert_`) issues none.
fn wgmma_lines(name: &str) -> (usize, usize) {
    let fp8 = name.starts_with("matmul_fp8_");
    if let Some(rest) = name.strip_prefix("attention_bwd_wgmma_") {
        if rest.starts_with("dq_convert_") {
            return (0, 0);
        }
        if rest.starts_with("fused_") {
            return if rest.contains("_d64_") { (20, 7) } else { (32, 5) };
        }
        return match (rest.starts_with("dkdv_"), rest.contains("_d64_")) {
            (true, true) => (16, 6),
            (true, false) => (24, 4),
            (false, true) => (16, 4),
            (false, false) => (24, 3),
        };
    }
    // Any mask: `attention_wgmma_pingpong_[causal_|general_]d<D>_<T>`.
    // Three consumers (`attention_wgmma_three_[causal_]d64_<T>`): the ping-pong's lines at head dim 64.
    let ping_pong =
        name.starts_with("attention_wgmma_pingpong_") || name.starts_with("attention_wgmma_three_");
    if ping_pong && name.contains("_d64_") {
        (24, 4)
    } else if ping_pong && name.contains("_d128_") {
        (32, 4)
    } else if ping_pong && name.contains("_d256_") {
        // 64-key tiles: the scores 4 boxes of 4 `m64n64k16`, `P V` 4 `m64n256k16`.
        (40, 4)
    } else if name.starts_with("attention_wgmma_d64_") {
        (12, 2)
    } else if name.starts_with("attention_wgmma_d128_") {
        (16, 2)
    } else if name.starts_with("attention_wgmma_d256_") || name.starts_with("attention_wgmma_general_d256_") {
        (20, 2)
    } else if fp8 && name.contains("_overlap_") {
        // Two accumulator arrays in turn: the prologue's step, the loop's, and the last.
        (12, 4)
    } else if fp8 && (name.contains("_promoted_") || name.contains("_block_")) {
        // One array: the first step's products before the loop and the loop's; the loop's
        // `wait_group 0` and the last step's after it.
        (8, 2)
    } else if fp8 && name.contains("_fast_") {
        (4, 2)
    } else if name.starts_with("matmul_ws_tf32") {
        (4, 3)
    } else if name == "matmul_grouped_bf16_128x256"
        || (name.starts_with("matmul_ws_") && !name.ends_with("_64x128"))
    {
        // The whole tiles' products and those of the split tail's half tiles.
        (8, 4)
    } else if name.starts_with("matmul_ws_")
        || name.starts_with("matmul_decode_wgmma_")
        || name.starts_with("matmul_grouped_")
    {
        (4, 2)
    } else {
        (8, 1)
    }
}

/// ptxas warnings that mean a `wgmma` pipeline was serialised or a register limit ignored:
/// treated as failures. C7510: a call between `wgmma.fence` and its wait; C7514, C7515:
/// ordinary instructions touching accumulators in flight; C7508: `setmaxnreg` ignored; C7509,
/// C7511, C7512: register pressure around `wgmma`; C7517: a `wait_group` ptxas had to insert.
const WGMMA_WARNINGS: &[&str] = &[
    "C7508", "C7509", "C7510", "C7511", "C7512", "C7514", "C7515", "C7517",
];

/// The sm_90a module assembles for sm_90a with its `wgmma` kernels intact: none of the
/// serialisation warnings, each `wgmma` kernel with its products in its main loop
/// ([`wgmma_lines`]), a `wait_group`
/// and no stack (the no-spill check itself is
/// `ptxas_assembles_every_module_without_stack_or_spills`).
#[test]
fn ptxas_keeps_the_wgmma_pipeline_of_the_sm_90a_module() {
    let Some(module) = modules().iter().find(|m| m.arch == "sm_90a") else {
        panic!("gpukern was built without the sm_90a module (GPUKERN_PTX_ARCHS without sm_90?)");
    };
    let text = ptxas_report(module, "sm_90a");
    let warnings: Vec<&str> = text
        .lines()
        .filter(|line| WGMMA_WARNINGS.iter().any(|w| line.contains(w)))
        .collect();
    assert!(
        warnings.is_empty(),
        "ptxas warned about the wgmma pipeline:\n{}",
        warnings.join("\n")
    );
    // The `wgmma` kernels: the matmuls and attention's Hopper rung among the module's own entry
    // points (its others, the bulk-copy ring norms, issue no `wgmma`).
    let plain: Vec<&str> = modules()
        .iter()
        .filter(|m| !m.is_arch_specific())
        .flat_map(|m| entry_names(m.ptx))
        .collect();
    let wgmma: Vec<&str> = entry_names(module.ptx)
        .into_iter()
        .filter(|n| {
            (n.starts_with("matmul_")
                || n.starts_with("attention_wgmma_")
                || n.starts_with("attention_bwd_wgmma_"))
                && !plain.contains(n)
        })
        .collect();
    assert!(!wgmma.is_empty(), "the sm_90a module has no wgmma kernel");
    for name in wgmma {
        let body = kernel_body(module.ptx, name);
        let mmas = body.iter().filter(|l| l.contains("wgmma.mma_async")).count();
        let waits = body.iter().filter(|l| l.contains("wgmma.wait_group")).count();
        assert_eq!(
            (mmas, waits),
            wgmma_lines(name),
            "{name}: wgmma.mma_async and wait_group lines"
        );
    }
}

#[test]
fn ptxas_assembles_every_module_without_stack_or_spills() {
    // The largest module first: ptxas takes longest on it, and the other tests that assemble
    // modules share these reports, so it starts while they run the small ones.
    let mut by_size: Vec<&PtxModule> = modules().iter().collect();
    by_size.sort_by_key(|m| std::cmp::Reverse(m.ptx.len()));
    for module in by_size {
        let report = assemble(module, module.arch);
        let mut failures = Vec::new();
        for name in entry_names(module.ptx) {
            let Some(props) = report.get(name) else {
                failures.push(format!("{name}: ptxas reported no function properties"));
                continue;
            };
            match props.frame {
                Some([0, 0, 0]) => {}
                Some(_) => failures.push(format!("{name}: {}", props.frame_line)),
                None => failures.push(format!("{name}: no stack/spill line in ptxas's report")),
            }
            // A block needs registers * threads of the register file, or the launch fails with
            // "too many resources requested". Registers are allocated in units of 8 per thread.
            let Some(threads) = facts(name).and_then(|f| f.block) else {
                failures.push(format!(
                    "{name}: no block size in the registry: declare it with `#[kernel(block(N))]`"
                ));
                continue;
            };
            match props.registers {
                Some(r) if r.div_ceil(8) * 8 * threads <= REGISTERS_PER_BLOCK => {}
                Some(r) => failures.push(format!(
                    "{name}: {r} registers per thread, too many for blocks of {threads} threads"
                )),
                None => failures.push(format!("{name}: no register count in ptxas's report")),
            }
        }
        assert!(
            failures.is_empty(),
            "ptxas -arch={} -v on the {} module:\n{}",
            module.arch,
            module.arch,
            failures.join("\n")
        );
    }
}

#[test]
fn ptxas_assembles_every_module_for_sm_90() {
    // An arch-specific module assembles for its own architecture only.
    for module in modules().iter().filter(|m| !m.is_arch_specific()) {
        let report = assemble(module, "sm_90");
        for name in entry_names(module.ptx) {
            assert!(
                report.contains_key(name),
                "ptxas -arch=sm_90 on the {} module reported nothing for `{name}`",
                module.arch
            );
        }
    }
}

/// Barrier instructions per kernel, as the source has them (each kernel's
/// `#[kernel(barriers(N))]`, which says why beside it). A regression guard against barrier
/// duplication (rust-lang/rust#137086): LLVM once copied a `__syncthreads` into both arms of a
/// branch, where only part of the block takes each arm, and the block deadlocks or races. A
/// count higher than the source's means a barrier was duplicated; lower, that one was merged or
/// removed. When a kernel changes, read its PTX around each `bar.sync`, then update its count
/// in its attribute.
#[test]
fn barriers_are_where_the_source_puts_them() {
    let mut failures = Vec::new();
    for module in modules() {
        for name in entry_names(module.ptx) {
            let Some(expected) = facts(name).and_then(|f| f.barriers) else {
                failures.push(format!(
                    "{name}: no barrier count in the registry: declare it with `#[kernel(barriers(N))]`"
                ));
                continue;
            };
            let expected = expected as usize;
            let body = kernel_body(module.ptx, name);
            let barriers: Vec<&str> = body.iter().copied().filter(|line| is_barrier(line)).collect();
            if barriers.len() != expected {
                failures.push(format!(
                    "{name} in the {} module has {} barrier instructions, the source has {expected}: {barriers:?}",
                    module.arch,
                    barriers.len()
                ));
            }
            // A predicated barrier is reached by only the threads whose predicate holds.
            for line in barriers.iter().filter(|line| line.trim_start().starts_with('@')) {
                failures.push(format!(
                    "{name} in the {} module has a predicated barrier: {line:?}",
                    module.arch
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The TF32 tilings by the shape in their kernels' names (`matmul_tf32_<shape>[_vec4][_trunc]`),
/// the longer shape first where one starts with another.
const TF32_TILINGS: &[(&str, tf32::Tf32Tiling)] = &[
    ("128x128_k16", tf32::TF32_128X128_K16),
    ("128x128", tf32::TF32_128X128),
    ("128x256", tf32::TF32_128X256),
];

/// Warp-collective MMAs per TF32 kernel (every registered `matmul_tf32_*`): `MI * NJ * BK / 8` in
/// the unrolled main loop (4 x 8 x 4), none predicated (a predicated `mma.sync` is reached by only
/// part of the warp). A count other than the source's means the compiler duplicated or dropped
/// one. And the roundings to TF32: `(4 MI + 2 NJ) * BK / 8` (one per fragment register) in the
/// rounding kernels, none in the `_trunc` ones. The tiling is read from the kernel's name
/// ([`TF32_TILINGS`]).
#[test]
fn tf32_mmas_are_where_the_source_puts_them() {
    let mut kernels = Vec::new();
    for name in registry().into_keys().filter(|n| n.starts_with("matmul_tf32_")) {
        let shape = &name["matmul_tf32_".len()..];
        let Some((_, t)) = TF32_TILINGS.iter().find(|(s, _)| {
            shape == *s
                || shape
                    .strip_prefix(s)
                    .is_some_and(|rest| rest.starts_with("_vec4") || rest.starts_with("_trunc"))
        }) else {
            panic!("{name}: no TF32 tiling of that shape in TF32_TILINGS (tests/ptx.rs)");
        };
        kernels.push((name, *t, !name.ends_with("_trunc")));
    }
    assert!(
        kernels.len() >= 4,
        "only {} TF32 kernels registered",
        kernels.len()
    );
    let mut failures = Vec::new();
    for module in modules() {
        for &(name, t, rounds) in &kernels {
            let (mi, nj) = (t.warp_rows / tf32::MMA_M, t.warp_cols / tf32::MMA_N);
            let steps = t.block_k / tf32::MMA_K;
            let expected = mi * nj * steps;
            let body = kernel_body(module.ptx, name);
            let cvts = body.iter().filter(|line| line.contains("cvt.rna.tf32")).count();
            let expected_cvts = if rounds { (4 * mi + 2 * nj) * steps } else { 0 };
            if cvts != expected_cvts {
                failures.push(format!(
                    "{name} in the {} module has {cvts} cvt.rna.tf32, the source has {expected_cvts}",
                    module.arch
                ));
            }
            let mmas: Vec<&str> = body
                .iter()
                .copied()
                .filter(|line| line.contains("mma.sync"))
                .collect();
            if mmas.len() != expected {
                failures.push(format!(
                    "{name} in the {} module has {} mma.sync, the source has {expected}",
                    module.arch,
                    mmas.len()
                ));
            }
            for line in mmas.iter().filter(|line| line.trim_start().starts_with('@')) {
                failures.push(format!(
                    "{name} in the {} module has a predicated MMA: {line:?}",
                    module.arch
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn parse_report_reads_ptxas_output() {
    let text = "ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
                ptxas info    : Function properties for k\n    \
                16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n\
                ptxas info    : Used 40 registers, used 1 barriers, 388 bytes cmem[0]\n";
    let report = parse_report(text);
    assert_eq!(report["k"].frame, Some([16, 4, 8]));
    assert_eq!(report["k"].registers, Some(40));
    assert!(
        is_barrier("\tbar.sync \t0;") && is_barrier("\t@%p1 bar.sync 0;") && !is_barrier("\tadd.s32 %r1, 1;")
    );
}
