//! The embedded PTX modules, checked without a GPU: every kernel is declared, each module targets
//! its architecture, NVIDIA's assembler (ptxas) accepts it with no stack frame and no spills, and
//! the block barriers are where the source puts them.
//!
//! ptxas comes from `GPUKERN_PTXAS` (path to the binary), else `.tools/ptxas/bin/ptxas` under the
//! repository root (where `bash scripts/test.sh` installs it), else `ptxas` on `PATH`. Without
//! it these tests fail: a missing assembler must not look like a pass.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpukern::kernels::matmul::tf32;
use gpukern::kernels::{add, cross_entropy, matmul, norm, softmax};
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
#[derive(Debug, Default)]
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
fn assemble(module: &PtxModule, arch: &str) -> BTreeMap<String, Properties> {
    let ptxas = ptxas();
    // Tests run in parallel: a file of its own for each call.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let file = std::env::temp_dir().join(format!(
        "gpukern-ptx-test-{}-{}-{}-for-{arch}.ptx",
        std::process::id(),
        CALLS.fetch_add(1, Ordering::Relaxed),
        module.arch
    ));
    fs::write(&file, module.ptx).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    let output = Command::new(&ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-v")
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
        "ptxas -arch={arch} refused the {} module ({}):\n{text}",
        module.arch,
        output.status
    );
    parse_report(&text)
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

/// Threads per block each kernel is launched with (the host's launch configuration), or `None`
/// for a kernel this test does not know yet.
fn block_threads(kernel: &str) -> Option<u32> {
    use gpukern::kernels::reduce as kernels_gpu_reduce;
    let tile = matmul::TILE as u32;
    Some(match kernel {
        "add"
        | "add_vec4"
        | "increment_by_one"
        | "increment_by_one_vec4"
        | "add_vec4_streaming"
        | "increment_by_one_vec4_streaming"
        | "add_vec4_x2"
        | "add_vec4_x4"
        | "add_vec4_x8"
        | "add_vec4_x4_cs_stores"
        | "increment_by_one_vec4_x2"
        | "increment_by_one_vec4_x4"
        | "increment_by_one_vec4_x8"
        | "increment_by_one_vec4_x4_cs_stores" => add::BLOCK,
        "add_vec4_b512" | "increment_by_one_vec4_b512" => add::BLOCK_512,
        "sum_tree" | "max_tree" => kernels_gpu_reduce::TREE_BLOCK,
        "sum_vec4"
        | "max_vec4"
        | "argmax_vec4"
        | "argmax_vec4_u8"
        | "argmax_vec4_lanes"
        | "argmax_vec4_lanes_u8"
        | "argmax_pairs" => kernels_gpu_reduce::VEC_BLOCK,
        "sum_rows" | "max_rows" | "argmax_rows" | "sum_rows_parts" | "max_rows_parts"
        | "argmax_rows_parts" | "sum_rows_short" | "max_rows_short" | "argmax_rows_short"
        | "sum_rows_vec" | "max_rows_vec" | "argmax_rows_vec" => kernels_gpu_reduce::ROWS_BLOCK,
        "sum_rows_narrow" | "max_rows_narrow" | "argmax_rows_narrow" | "sum_cols_narrow"
        | "max_cols_narrow" | "argmax_cols_narrow" => kernels_gpu_reduce::NARROW_BLOCK,
        "sum_cols" | "max_cols" | "argmax_cols" | "sum_cols_parts" | "max_cols_parts"
        | "argmax_cols_parts" | "argmax_parts" => {
            kernels_gpu_reduce::COLS_BLOCK_X * kernels_gpu_reduce::COLS_BLOCK_Y
        }
        "transpose_naive" | "transpose_tiled" | "transpose_tiled_64" | "transpose_vec4_64" => {
            gpukern::kernels::transpose::TILE * gpukern::kernels::transpose::BLOCK_ROWS
        }
        "matmul_naive" => matmul::NAIVE_BLOCK * matmul::NAIVE_BLOCK,
        "matmul_tiled" => tile * tile,
        "matmul_fast_128x128" | "matmul_fast_128x128_vec4" => matmul::FAST_128.threads(),
        "matmul_fast_64x64" | "matmul_fast_64x64_vec4" => matmul::FAST_64.threads(),
        "matmul_fast_128x256" | "matmul_fast_128x256_vec4" => matmul::FAST_WIDE.threads(),
        "matmul_sum_splits" => matmul::SUM_BLOCK,
        "matmul_stream_k_128x128_vec4" => matmul::STREAM_K.threads(),
        "matmul_stream_k_fixup" => matmul::FIXUP_BLOCK,
        "matmul_tf32_128x128" | "matmul_tf32_128x128_trunc" | "matmul_tf32_128x128_vec4_trunc" => {
            tf32::TF32_128X128.threads()
        }
        "matmul_tf32_128x128_k16" => tf32::TF32_128X128_K16.threads(),
        "matmul_tf32_128x256"
        | "matmul_tf32_128x256_vec4"
        | "matmul_tf32_128x256_trunc"
        | "matmul_tf32_128x256_vec4_trunc" => tf32::TF32_128X256.threads(),
        "matmul_bf16_128x128"
        | "matmul_bf16_128x128_vec8"
        | "matmul_bf16_f32out_128x128"
        | "matmul_bf16_f32out_128x128_vec8"
        | "matmul_f16_128x128"
        | "matmul_f16_128x128_vec8"
        | "matmul_f16_f32out_128x128"
        | "matmul_f16_f32out_128x128_vec8" => matmul::half::HALF_128X128.threads(),
        "matmul_wgmma_bf16_128x128" | "matmul_wgmma_bf16_f32out_128x128" => {
            matmul::wgmma::WGMMA_128X128.threads()
        }
        "matmul_ws_bf16_128x256"
        | "matmul_ws_bf16_f32out_128x256"
        | "matmul_ws_f16_128x256"
        | "matmul_ws_f16_f32out_128x256"
        | "matmul_ws_tf32_128x256" => matmul::wgmma_ws::WS_128X256.threads(),
        "matmul_ws_bf16_128x128"
        | "matmul_ws_bf16_f32out_128x128"
        | "matmul_ws_f16_128x128"
        | "matmul_ws_f16_f32out_128x128"
        | "matmul_ws_tf32_128x128" => matmul::wgmma_ws::WS_128X128.threads(),
        "matmul_ws_bf16_64x128"
        | "matmul_ws_bf16_f32out_64x128"
        | "matmul_ws_f16_64x128"
        | "matmul_ws_f16_f32out_64x128"
        | "matmul_ws_tf32_64x128" => matmul::wgmma_ws::WS_64X128.threads(),
        "softmax_block_reduce" => softmax::BLOCK,
        "softmax_warp_1" | "softmax_warp_2" | "softmax_warp_4" | "softmax_warp_8" => {
            softmax::WARP_KERNEL_BLOCK
        }
        // The host sizes these blocks to the row, up to this many threads.
        "softmax_block_4" | "softmax_block_8" | "softmax_block_4_el" | "softmax_block_8_el" => {
            softmax::ROW_BLOCK_MAX
        }
        "softmax_stream"
        | "softmax_split_stats"
        | "softmax_split_write"
        | "softmax_split_write_streaming" => softmax::STREAM_BLOCK,
        "softmax_group_8x4" | "softmax_group_16x2" => softmax::GROUP_KERNEL_BLOCK,
        // Sized to the row, up to its launch bounds.
        "softmax_grid_row" => softmax::GRID_ROW_BLOCK,
        // The check of the grid barrier: any block size; the CUDA trials' largest.
        "grid_exchange" => 1024,
        "softmax_persist_warp_8" => softmax::WARP_KERNEL_BLOCK,
        // Sized to the row like the block-per-row kernels, up to this many threads.
        "softmax_persist_block_4" | "softmax_persist_block_8" => softmax::ROW_BLOCK_MAX,
        "rms_norm_block_reduce_f32"
        | "rms_norm_block_reduce_bf16"
        | "layer_norm_block_reduce_f32"
        | "layer_norm_block_reduce_bf16" => norm::BLOCK,
        // Sized to the row, up to this many threads.
        // (LayerNorm centres the held row in place, so it keeps one copy of it: 62 registers
        // on sm_90, down from 79 when `x - shift` was kept beside `x`.)
        "rms_norm_rows_f32"
        | "rms_norm_rows_bf16"
        | "layer_norm_rows_bf16"
        | "layer_norm_rows_f32"
        | "rms_norm_rows16_f32"
        | "rms_norm_rows16_bf16"
        | "layer_norm_rows16_f32"
        | "layer_norm_rows16_bf16"
        | "rms_norm_rows_cs_f32"
        | "rms_norm_rows_cs_bf16"
        | "layer_norm_rows_cs_f32"
        | "layer_norm_rows_cs_bf16"
        | "rms_norm_rows16_cs_f32"
        | "rms_norm_rows16_cs_bf16"
        | "layer_norm_rows16_cs_f32"
        | "layer_norm_rows16_cs_bf16"
        | "rms_norm_rows16_el_f32"
        | "rms_norm_rows16_el_bf16"
        | "layer_norm_rows16_el_f32"
        | "layer_norm_rows16_el_bf16"
        | "rms_norm_ring_f32"
        | "rms_norm_ring_bf16"
        | "layer_norm_ring_f32"
        | "layer_norm_ring_bf16"
        | "rms_norm_two_pass_f32"
        | "rms_norm_two_pass_bf16"
        | "layer_norm_two_pass_f32"
        | "layer_norm_two_pass_bf16"
        | "rms_norm_loop_f32"
        | "rms_norm_loop_bf16"
        | "layer_norm_loop_f32"
        | "layer_norm_loop_bf16"
        | "rms_norm_loop2_f32"
        | "rms_norm_loop2_bf16"
        | "layer_norm_loop2_f32"
        | "layer_norm_loop2_bf16"
        | "rms_norm_loop_plain_f32"
        | "rms_norm_loop_plain_bf16"
        | "layer_norm_loop_plain_f32"
        | "layer_norm_loop_plain_bf16" => norm::ROW_BLOCK_MAX,
        // 64 held elements per thread (about 90 to 110 registers): rows of up to 32768 columns
        // take at most 512 threads.
        "rms_norm_rows64_f32"
        | "rms_norm_rows64_bf16"
        | "layer_norm_rows64_f32"
        | "layer_norm_rows64_bf16" => 512,
        "rms_norm_warp_f32"
        | "rms_norm_warp_bf16"
        | "layer_norm_warp_f32"
        | "layer_norm_warp_bf16"
        | "rms_norm_warp_keep_f32"
        | "rms_norm_warp_keep_bf16"
        | "layer_norm_warp_keep_f32"
        | "layer_norm_warp_keep_bf16"
        | "rms_norm_warp_pipe_f32"
        | "rms_norm_warp_pipe_bf16"
        | "layer_norm_warp_pipe_f32"
        | "layer_norm_warp_pipe_bf16" => norm::WARP_BLOCK,
        "cross_entropy_warp" => cross_entropy::WARP_CHUNK_BLOCK,
        "cross_entropy_finish" => cross_entropy::FINISH_BLOCK,
        "cross_entropy_mean" => cross_entropy::MEAN_BLOCK,
        // Each block of a cluster sized to its share of the row, up to this many threads.
        "softmax_cluster_4" | "softmax_cluster_8" => softmax::ROW_BLOCK_MAX,
        _ => return None,
    })
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
    let lines: Vec<&str> = ptx[start..].lines().collect();
    let end = (0..lines.len())
        .find(|&i| lines[i] == "}" && !lines.get(i + 1).is_some_and(|l| l.contains("end inline asm")))
        .unwrap_or(lines.len());
    lines[..end].to_vec()
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

/// Every module exports the same kernels (plus [`ARCH_ONLY`]'s), at least the tutorial ones,
/// each once: the PTX's
/// `.entry` list is the kernel table (no name is kept by hand; the launch counts and the
/// coverage check of `tests/kernels.rs` go by these names).
#[test]
fn every_module_exports_the_same_kernels() {
    let first = entry_names(modules()[0].ptx);
    for name in [
        "add",
        "increment_by_one",
        "matmul_naive",
        "matmul_tiled",
        "softmax_block_reduce",
    ] {
        assert!(
            first.contains(&name),
            "no `.entry {name}(` in the {} module",
            modules()[0].arch
        );
    }
    let mut unique = first.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), first.len(), "an entry point declared twice");
    for module in modules() {
        // The oldest module's kernels, then those that need this architecture.
        let mut want = first.clone();
        want.extend(
            ARCH_ONLY
                .iter()
                .filter(|(arch, _)| module.compute_capability >= *arch)
                .flat_map(|(_, names)| names.iter().copied())
                // The arch-specific (`a`) module's own kernels.
                .chain(
                    module
                        .is_arch_specific()
                        .then_some(ARCH_SPECIFIC_KERNELS)
                        .into_iter()
                        .flatten()
                        .copied(),
                ),
        );
        let mut got = entry_names(module.ptx);
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want, "the {} module's entry points", module.arch);
    }
}

/// Kernels only in the modules of an architecture from the given compute capability on: their
/// instructions do not exist before it (the cluster kernels, sm_90).
const ARCH_ONLY: &[((i32, i32), &[&str])] = &[((9, 0), &["softmax_cluster_4", "softmax_cluster_8"])];

/// The entry points only the sm_90a module has (`#[cfg(target_feature = "sm_90a")]`).
const ARCH_SPECIFIC_KERNELS: &[&str] = &[
    "matmul_wgmma_bf16_128x128",
    "matmul_wgmma_bf16_f32out_128x128",
    "matmul_ws_bf16_128x256",
    "matmul_ws_bf16_f32out_128x256",
    "matmul_ws_f16_128x256",
    "matmul_ws_f16_f32out_128x256",
    "matmul_ws_tf32_128x256",
    "matmul_ws_bf16_128x128",
    "matmul_ws_bf16_f32out_128x128",
    "matmul_ws_f16_128x128",
    "matmul_ws_f16_f32out_128x128",
    "matmul_ws_bf16_64x128",
    "matmul_ws_bf16_f32out_64x128",
    "matmul_ws_f16_64x128",
    "matmul_ws_f16_f32out_64x128",
    "matmul_ws_tf32_128x128",
    "matmul_ws_tf32_64x128",
    "rms_norm_ring_f32",
    "rms_norm_ring_bf16",
    "layer_norm_ring_f32",
    "layer_norm_ring_bf16",
];

/// `wgmma.mma_async` and `wgmma.wait_group` lines per `wgmma` kernel: the one-warpgroup
/// kernel's `m128n128k64` step is 8 products (`m64n128k16`) and a wait; the warp-specialised
/// kernels' step 4 (`m64nNk16` with `N` 256, 128 or 64 by tile, `m64n256k8` in TF32) issued without a wait, then a
/// `wait_group 1` in the loop and a `wait_group 0` after it; TF32 has no asynchronous twin, so
/// its step waits inside too.
fn wgmma_lines(name: &str) -> (usize, usize) {
    if name.starts_with("matmul_ws_tf32") {
        (4, 3)
    } else if name.starts_with("matmul_ws_") {
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
    let ptxas = ptxas();
    let file = std::env::temp_dir().join(format!("gpukern-ptx-test-{}-wgmma.ptx", std::process::id()));
    fs::write(&file, module.ptx).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    let output = Command::new(&ptxas)
        .args(["-arch=sm_90a", "-v", "--warn-on-spills"])
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
        "ptxas -arch=sm_90a refused the module:\n{text}"
    );
    let warnings: Vec<&str> = text
        .lines()
        .filter(|line| WGMMA_WARNINGS.iter().any(|w| line.contains(w)))
        .collect();
    assert!(
        warnings.is_empty(),
        "ptxas warned about the wgmma pipeline:\n{}",
        warnings.join("\n")
    );
    // The `wgmma` kernels (the module's others, the bulk-copy ring norms, issue no `wgmma`).
    for name in ARCH_SPECIFIC_KERNELS.iter().filter(|n| n.starts_with("matmul_")) {
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
    for module in modules() {
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
            let Some(threads) = block_threads(name) else {
                failures.push(format!(
                    "{name}: unknown block size: add it to block_threads in tests/ptx.rs"
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

/// Barrier instructions per kernel, as the source has them. A regression guard against barrier
/// duplication (rust-lang/rust#137086): LLVM once copied a `__syncthreads` into both arms of a
/// branch, where only part of the block takes each arm, and the block deadlocks or races. A
/// count higher than the source's means a barrier was duplicated; lower, that one was merged
/// or removed. When a kernel changes, read its PTX around each `bar.sync`, then update its count
/// here.
const BARRIERS: &[(&str, usize)] = &[
    ("add", 0),
    ("add_vec4", 0),
    ("increment_by_one", 0),
    ("increment_by_one_vec4", 0),
    ("add_vec4_streaming", 0),
    ("increment_by_one_vec4_streaming", 0),
    ("add_vec4_x2", 0),
    ("add_vec4_x4", 0),
    ("add_vec4_x8", 0),
    ("add_vec4_b512", 0),
    ("add_vec4_x4_cs_stores", 0),
    ("increment_by_one_vec4_x2", 0),
    ("increment_by_one_vec4_x4", 0),
    ("increment_by_one_vec4_x8", 0),
    ("increment_by_one_vec4_b512", 0),
    ("increment_by_one_vec4_x4_cs_stores", 0),
    // The tutorial reductions: one `block::reduce` (after the store, one per tree round in its
    // loop, after the final read).
    ("sum_tree", 3),
    ("max_tree", 3),
    // The vector-load reductions: one `block_combine` (the warps' results meet in shared memory).
    ("sum_vec4", 1),
    ("max_vec4", 1),
    ("argmax_vec4", 1),
    ("argmax_vec4_u8", 1),
    ("argmax_vec4_lanes", 1),
    ("argmax_vec4_lanes_u8", 1),
    ("argmax_pairs", 1),
    // A warp per row: shuffles only. A column per thread: one barrier before the row groups meet.
    ("sum_rows", 0),
    ("sum_cols", 1),
    ("max_rows", 0),
    ("max_cols", 1),
    ("argmax_rows", 0),
    ("argmax_cols", 1),
    // The split passes as the one-pass kernels; the split argmax's finish as a column kernel.
    ("sum_rows_parts", 0),
    ("sum_cols_parts", 1),
    ("max_rows_parts", 0),
    ("max_cols_parts", 1),
    ("argmax_rows_parts", 0),
    ("argmax_cols_parts", 1),
    ("argmax_parts", 1),
    // 16-byte loads, lanes per row: shuffles only.
    ("sum_rows_vec", 0),
    ("max_rows_vec", 0),
    ("argmax_rows_vec", 0),
    // A warp per 4 short rows: shuffles only.
    ("sum_rows_short", 0),
    ("max_rows_short", 0),
    ("argmax_rows_short", 0),
    // A thread per narrow row or per column: no exchange at all.
    ("sum_rows_narrow", 0),
    ("max_rows_narrow", 0),
    ("argmax_rows_narrow", 0),
    ("sum_cols_narrow", 0),
    ("max_cols_narrow", 0),
    ("argmax_cols_narrow", 0),
    // The naive transpose has no shared memory; the tiled one a barrier between store and load.
    ("transpose_naive", 0),
    ("transpose_tiled", 1),
    // The 64x64 tiles: one barrier between the tile's stores and its loads, as `transpose_tiled`.
    ("transpose_tiled_64", 1),
    ("transpose_vec4_64", 1),
    ("matmul_naive", 0),
    // Two per step along k: after the tiles are stored, after they are used.
    ("matmul_tiled", 2),
    // `fast_gemm`: one after the first tile is stored, one per tile in the main loop (the
    // second shared-memory stage makes a second barrier per tile unnecessary).
    ("matmul_fast_128x128", 2),
    ("matmul_fast_128x128_vec4", 2),
    ("matmul_fast_64x64", 2),
    ("matmul_fast_64x64_vec4", 2),
    // `wide_gemm`: one per tile in the main loop (the `cp.async` stages are refilled after it).
    ("matmul_fast_128x256", 1),
    ("matmul_fast_128x256_vec4", 1),
    ("matmul_sum_splits", 0),
    // `tile_product` (stream-K): as `fast_gemm`, once per unit of work (the loop over units
    // is not unrolled); the fixup has none.
    ("matmul_stream_k_128x128_vec4", 2),
    ("matmul_stream_k_fixup", 0),
    // `tf32_gemm`: one per tile in the main loop, after the wait for the tile's copies (the
    // stages of the cp.async pipeline make a second one unnecessary).
    ("matmul_tf32_128x128", 1),
    ("matmul_tf32_128x128_k16", 1),
    ("matmul_tf32_128x256", 1),
    ("matmul_tf32_128x256_vec4", 1),
    ("matmul_tf32_128x128_trunc", 1),
    ("matmul_tf32_128x128_vec4_trunc", 1),
    ("matmul_tf32_128x256_trunc", 1),
    ("matmul_tf32_128x256_vec4_trunc", 1),
    // `half_gemm`: one per tile in the main loop, as `tf32_gemm`.
    ("matmul_bf16_128x128", 1),
    ("matmul_bf16_128x128_vec8", 1),
    ("matmul_bf16_f32out_128x128", 1),
    ("matmul_bf16_f32out_128x128_vec8", 1),
    ("matmul_f16_128x128", 1),
    ("matmul_f16_128x128_vec8", 1),
    ("matmul_f16_f32out_128x128", 1),
    ("matmul_f16_f32out_128x128_vec8", 1),
    // `wgmma_gemm` (sm_90a module only): one after the barriers' initialisation, one per tile
    // (everyone is done with the stage before thread 0 refills it).
    ("matmul_wgmma_bf16_128x128", 2),
    ("matmul_wgmma_bf16_f32out_128x128", 2),
    // `ws_gemm`: one after the barriers' initialisation; the ring runs on mbarriers only.
    ("matmul_ws_bf16_128x256", 1),
    ("matmul_ws_bf16_f32out_128x256", 1),
    ("matmul_ws_f16_128x256", 1),
    ("matmul_ws_f16_f32out_128x256", 1),
    ("matmul_ws_tf32_128x256", 1),
    ("matmul_ws_bf16_128x128", 1),
    ("matmul_ws_bf16_f32out_128x128", 1),
    ("matmul_ws_f16_128x128", 1),
    ("matmul_ws_f16_f32out_128x128", 1),
    ("matmul_ws_bf16_64x128", 1),
    ("matmul_ws_bf16_f32out_64x128", 1),
    ("matmul_ws_f16_64x128", 1),
    ("matmul_ws_f16_f32out_64x128", 1),
    ("matmul_ws_tf32_128x128", 1),
    ("matmul_ws_tf32_64x128", 1),
    // Each `block::reduce` has three (after the store, one per tree round in its loop, after the
    // final read); the kernel calls `reduce_max` or `reduce_min` (a branch on `t`, which is the
    // same for the whole block), then `reduce_sum`: three call sites.
    ("softmax_block_reduce", 9),
    // Warp-per-row: shuffles only.
    ("softmax_warp_1", 0),
    ("softmax_warp_2", 0),
    ("softmax_warp_4", 0),
    ("softmax_warp_8", 0),
    // One `block_stats` each, which has one barrier (the warps' results meet in shared memory).
    ("softmax_block_4", 1),
    ("softmax_block_8", 1),
    ("softmax_block_4_el", 1),
    ("softmax_block_8_el", 1),
    ("softmax_stream", 1),
    ("softmax_split_stats", 1),
    ("softmax_split_write", 1),
    ("softmax_split_write_streaming", 1),
    // Two block reductions, and the grid barrier's two block barriers around its arrival.
    ("softmax_grid_row", 4),
    // Two grid barriers per round, two block barriers each.
    ("grid_exchange", 4),
    // Lane groups: shuffles only.
    ("softmax_group_8x4", 0),
    ("softmax_group_16x2", 0),
    // Persistent: the warp kernel shuffles only; the block kernels' loop has one `block_stats`.
    ("softmax_persist_warp_8", 0),
    ("softmax_persist_block_4", 1),
    ("softmax_persist_block_8", 1),
    // Tutorial norms: one `block::reduce_sum` (three barriers) for RMSNorm, two for LayerNorm.
    ("rms_norm_block_reduce_f32", 3),
    ("rms_norm_block_reduce_bf16", 3),
    ("layer_norm_block_reduce_f32", 6),
    ("layer_norm_block_reduce_bf16", 6),
    // In-register norms: one barrier per `block_sum`, one for RMSNorm, two for f32 LayerNorm;
    // bf16 LayerNorm takes its two sums in one `block_sum2`, one barrier.
    ("rms_norm_rows_f32", 1),
    ("rms_norm_rows_bf16", 1),
    ("layer_norm_rows_f32", 2),
    ("layer_norm_rows_bf16", 1),
    ("rms_norm_rows16_f32", 1),
    ("rms_norm_rows16_bf16", 1),
    ("layer_norm_rows16_f32", 2),
    ("layer_norm_rows16_bf16", 1),
    ("rms_norm_rows64_f32", 1),
    ("rms_norm_rows64_bf16", 1),
    ("layer_norm_rows64_f32", 2),
    ("layer_norm_rows64_bf16", 1),
    // Warp-per-row norms: shuffles only.
    ("rms_norm_warp_f32", 0),
    ("rms_norm_warp_bf16", 0),
    ("layer_norm_warp_f32", 0),
    ("layer_norm_warp_bf16", 0),
    ("rms_norm_warp_keep_f32", 0),
    ("rms_norm_warp_keep_bf16", 0),
    ("layer_norm_warp_keep_f32", 0),
    ("layer_norm_warp_keep_bf16", 0),
    ("rms_norm_warp_pipe_f32", 0),
    ("rms_norm_warp_pipe_bf16", 0),
    ("layer_norm_warp_pipe_f32", 0),
    ("layer_norm_warp_pipe_bf16", 0),
    // Streaming in-register norms and the L2 re-read norms: one barrier per `block_sum` (bf16
    // LayerNorm: one `block_sum2`).
    ("rms_norm_rows_cs_f32", 1),
    ("rms_norm_rows_cs_bf16", 1),
    ("layer_norm_rows_cs_f32", 2),
    ("layer_norm_rows_cs_bf16", 1),
    ("rms_norm_rows16_cs_f32", 1),
    ("rms_norm_rows16_cs_bf16", 1),
    ("layer_norm_rows16_cs_f32", 2),
    ("layer_norm_rows16_cs_bf16", 1),
    ("rms_norm_rows16_el_f32", 1),
    ("rms_norm_rows16_el_bf16", 1),
    ("layer_norm_rows16_el_f32", 2),
    ("layer_norm_rows16_el_bf16", 1),
    // The ring: the barrier after the slots' set-up, then one (RMSNorm) or two block sums per row.
    ("rms_norm_ring_f32", 2),
    ("rms_norm_ring_bf16", 2),
    ("layer_norm_ring_f32", 3),
    ("layer_norm_ring_bf16", 3),
    ("rms_norm_two_pass_f32", 1),
    ("rms_norm_two_pass_bf16", 1),
    ("layer_norm_two_pass_f32", 2),
    ("layer_norm_two_pass_bf16", 2),
    ("rms_norm_loop_f32", 1),
    ("rms_norm_loop_bf16", 1),
    ("layer_norm_loop_f32", 2),
    ("layer_norm_loop_bf16", 2),
    ("rms_norm_loop2_f32", 1),
    ("rms_norm_loop2_bf16", 1),
    ("layer_norm_loop2_f32", 2),
    ("layer_norm_loop2_bf16", 2),
    ("rms_norm_loop_plain_f32", 1),
    ("rms_norm_loop_plain_bf16", 1),
    ("layer_norm_loop_plain_f32", 2),
    ("layer_norm_loop_plain_bf16", 2),
    // Cross-entropy: the finish is a warp per row (shuffles only); the mean one `reduce_sum`.
    ("cross_entropy_finish", 0),
    ("cross_entropy_warp", 0),
    ("cross_entropy_mean", 3),
    // Cluster (sm_90 only): one `block_stats`, then the cluster barrier's arrive and wait before
    // the partials are read, an arrive after the reads and a wait before the exit.
    ("softmax_cluster_4", 5),
    ("softmax_cluster_8", 5),
];

#[test]
fn barriers_are_where_the_source_puts_them() {
    let names: Vec<&str> = modules().iter().flat_map(|m| entry_names(m.ptx)).collect();
    let missing: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| !BARRIERS.iter().any(|(kernel, _)| kernel == name))
        .collect();
    assert!(
        missing.is_empty(),
        "no barrier count in BARRIERS (tests/ptx.rs) for {missing:?}: add them"
    );
    let mut failures = Vec::new();
    for module in modules() {
        let own = entry_names(module.ptx);
        for (name, expected) in BARRIERS
            .iter()
            .copied()
            .filter(|(kernel, _)| own.contains(kernel))
        {
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

/// Warp-collective MMAs per TF32 kernel: `MI * NJ * BK / 8` in the unrolled main loop (4 x 8 x 4),
/// none predicated (a predicated `mma.sync` is reached by only part of the warp). A count other
/// than the source's means the compiler duplicated or dropped one. And the roundings to TF32:
/// `(4 MI + 2 NJ) * BK / 8` (one per fragment register) in the rounding kernels, none in the
/// `_trunc` ones.
#[test]
fn tf32_mmas_are_where_the_source_puts_them() {
    // (kernel, tiling, whether it rounds)
    let tilings = [
        ("matmul_tf32_128x128", tf32::TF32_128X128, true),
        ("matmul_tf32_128x128_k16", tf32::TF32_128X128_K16, true),
        ("matmul_tf32_128x256", tf32::TF32_128X256, true),
        ("matmul_tf32_128x256_vec4", tf32::TF32_128X256, true),
        ("matmul_tf32_128x128_trunc", tf32::TF32_128X128, false),
        ("matmul_tf32_128x128_vec4_trunc", tf32::TF32_128X128, false),
        ("matmul_tf32_128x256_trunc", tf32::TF32_128X256, false),
        ("matmul_tf32_128x256_vec4_trunc", tf32::TF32_128X256, false),
    ];
    let mut failures = Vec::new();
    for module in modules() {
        for (name, t, rounds) in tilings {
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
