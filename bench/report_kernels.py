"""The kernel sections of BENCHMARKS.md (rendered by bench/report.py): the ceilings measured in
the same run, a section per kernel (the best gpukern variant against the best peer and the
ceiling, then every implementation per case), launch overhead with the generated launcher against
bare cudarc, matmul with host-device copies, and the measurements that were not timed.
"""

from __future__ import annotations

from report_common import (
    Record, Run, best, case_key, case_label, comparable, fmt_err, fmt_ms, fmt_rate, fmt_ratio, impl_order,
    is_gpukern, is_peer, note, ordered, table, timed,
)


KERNEL_TITLES = {
    "add": "add (c = a + b)",
    "increment_by_one": "increment_by_one (x += 1, in place)",
    "matmul": "matmul (f32, row-major, C = A B)",
    "softmax": "softmax (rows, inverse temperature t)",
    "sum": "sum (of a vector, f32)",
    "argmax": "argmax (of a vector, f32)",
    "sum_axis": "sum_axis (of a matrix along Axis(1), a sum per row, or Axis(0), per column; f32)",
    "max_axis": "max_axis (the largest entry per row or per column; f32)",
    "argmax_axis": "argmax_axis (the index of the largest entry per row or per column; f32)",
    "transpose": "transpose (f32, row-major in and out)",
    "rms_norm": "rms_norm (rows, x / sqrt(mean(x^2) + eps) * w; f32 and bf16)",
    "layer_norm": "layer_norm (rows, (x - mean) / sqrt(var + eps) * w + b; f32 and bf16)",
    "cross_entropy": "cross_entropy (f32 logits, one label per row, a loss per row)",
    "cross_entropy_mean": "cross_entropy_mean (f32 logits, the mean of the rows' losses)",
}
# One reference for every implementation's error: the f64 product or softmax of the same inputs
# (gpukern: the CPU in f64, or cuBLAS dgemm for large matmuls; the peers: torch in float64).
REL_ERR_HEADER = "rel_err vs f64 (see above)"
# The `ref` values that are an f64 reference of the same inputs ("input": a copy is its input).
F64_REFS = {"cpu_f64", "cublas_f64", "torch_f64", "input", "cpu_exact", "exact"}


def f64_ref(r: Record) -> bool:
    return r.get("rel_err") is None or r.get("ref") in F64_REFS


def ceilings_section(run: Run) -> str:
    parts = ["## Ceilings (same run)"]
    copies = [r for r in run.by_kernel.get("copy", []) if timed(r)]
    if copies:
        rows = [[r["impl"], r["shape"], fmt_ms(r["median_ms"]), fmt_rate(r, "gbps")] for r in copies]
        parts.append("Device-to-device copy, bytes read + written:")
        parts.append(table(["impl", "floats", "median", "GB/s"], rows, right=[2, 3]))
    blas = [r for r in run.by_kernel.get("matmul", []) if r["impl"] in ("cublas", "cublas_tf32")]
    if blas:
        cases = ordered(case_key(r) for r in blas)
        rows = []
        for key in cases:
            row = [case_label(key)]
            for impl in ("cublas", "cublas_tf32"):
                r = next((x for x in blas if x["impl"] == impl and case_key(x) == key), None)
                row.append(fmt_rate(r, "tflops") if r else "-")
            rows.append(row)
        parts.append("cuBLAS sgemm (TFLOP/s), fp32 and TF32 tensor-core math:")
        parts.append(table(["m x n x k", "fp32", "TF32"], rows, right=[1, 2]))
    if len(parts) == 1:
        parts.append("No ceiling was measured in this run.")
    return "\n\n".join(parts)


def kernel_section(run: Run, kernel: str, plot: str | None) -> str:
    records = run.by_kernel.get(kernel, [])
    if not records:
        return ""
    kind = run.rate_kind(kernel)
    unit = "TFLOP/s" if kind == "tflops" else "GB/s"
    parts = [f"## {KERNEL_TITLES.get(kernel, kernel)}"]
    if plot:
        parts.append(f"![{kernel}]({plot})")

    cases = ordered(case_key(r) for r in records)
    overview = []
    details = []
    for key in cases:
        here = [r for r in records if case_key(r) == key]
        ceiling, ceiling_name = run.ceiling(kernel, key)
        tf32_ceiling, _ = run.ceiling(kernel, key, "tf32")
        peer = best((r for r in here if is_peer(r)), kind)
        # Full-precision gpukern rows against fp32 peers and ceiling; TF32 rows on their own.
        mine = best((r for r in here if is_gpukern(r) and r.get("math") != "tf32"), kind)
        mine_tf32 = best((r for r in here if is_gpukern(r) and r.get("math") == "tf32"), kind)
        row = [
            case_label(key),
            f"{fmt_rate(mine, kind)} ({mine['impl'].split(':', 1)[-1]})" if mine else "-",
            f"{fmt_rate(peer, kind)} ({peer['impl']})" if peer else "-",
            fmt_ratio(mine[kind] / peer[kind] if mine and peer else None),
            f"{ceiling:.2f}" if ceiling and kind == "tflops" else f"{ceiling:.0f}" if ceiling else "-",
            fmt_ratio(mine[kind] / ceiling if mine and ceiling else None, percent=True),
        ]
        if kernel == "matmul":
            row += [
                f"{fmt_rate(mine_tf32, kind)} ({mine_tf32['impl'].split(':', 1)[-1]})" if mine_tf32 else "-",
                f"{tf32_ceiling:.2f}" if tf32_ceiling else "-",
                fmt_ratio(mine_tf32[kind] / tf32_ceiling if mine_tf32 and tf32_ceiling else None, percent=True),
            ]
        overview.append(row)
        rows = []
        for r in sorted(here, key=lambda r: impl_order(r["impl"])):
            vs_peer = vs_ceiling = None
            if is_gpukern(r) and r.get(kind) is not None:
                if r.get("math") == "tf32":
                    vs_ceiling = r[kind] / tf32_ceiling if tf32_ceiling else None
                else:
                    vs_peer = r[kind] / peer[kind] if peer and comparable(r) else None
                    vs_ceiling = r[kind] / ceiling if ceiling else None
            impl = r["impl"] + (" (TF32)" if r.get("math") == "tf32" and "tf32" not in r["impl"] else "")
            rows.append(
                [
                    f"**{impl}**" if is_gpukern(r) else impl,
                    fmt_ms(r.get("median_ms")),
                    fmt_rate(r, kind),
                    fmt_err(r),
                    fmt_ratio(vs_peer),
                    fmt_ratio(vs_ceiling, percent=True),
                    note(r),
                ]
            )
        # One reference per column: say so when a row of an older run was checked against another.
        err_header = REL_ERR_HEADER
        if not all(f64_ref(r) for r in here):
            err_header = "rel_err (vs f64 unless the note says)"
            for row, r in zip(rows, sorted(here, key=lambda r: impl_order(r["impl"]))):
                if not f64_ref(r):
                    row[-1] = "; ".join(x for x in [f"rel_err vs {r.get('ref')}", row[-1]] if x)
        details.append(
            f"**{case_label(key)}** (ceiling: {ceiling_name})\n\n"
            + table(["impl", "median", unit, err_header, "vs best peer", "of ceiling", "note"], rows, right=[1, 2, 3, 4, 5])
        )
    ceiling_what = "cuBLAS fp32 at the same shape" if kernel == "matmul" else "the best device-to-device copy"
    header = ["case", "gpukern (variant)", "best peer", "gpukern / peer", "ceiling", "of ceiling"]
    tf32_note = ""
    if kernel == "matmul":
        header += ["gpukern TF32 (variant)", "cuBLAS TF32", "of TF32 ceiling"]
        tf32_note = (
            "; gpukern's opt-in TF32 variants (`math: tf32`) are compared only with cuBLAS TF32 "
            "at the same shape, in the last three columns"
        )
    parts.append(
        f"Best full-precision gpukern variant against the best like-for-like peer (fp32; TF32 peers are "
        f"listed in the details but not counted) and against the ceiling ({ceiling_what}){tf32_note}, in {unit}:"
    )
    parts.append(table(header, overview, right=range(1, len(header))))
    parts.append(
        "<details><summary>Every implementation, per case</summary>\n\n" + "\n\n".join(details) + "\n\n</details>"
    )
    return "\n\n".join(parts)


# The op of the generated-launcher comparison's launch-overhead rows (examples/bench/overhead.rs,
# `launcher_vs_bare`): the same kernel launched by bare cudarc and by gpukern's generated launcher.
LAUNCHER_OP = "increment_by_one"
# Its paths, in the table's order: impl -> how it launches.
LAUNCHER_PATHS = {
    "cudarc": "bare cudarc `launch_builder`",
    "gpukern:launcher": "generated launcher, `gpu.library()`",
    "gpukern:module": "generated launcher, `gpu.load(&KERNELS)`",
}
# The target: the generated launcher's time per call at most this much of the bare launch's.
LAUNCHER_GOAL = 1.10


def launcher_rows(run: Run) -> list[Record]:
    return [r for r in run.by_kernel.get("launch_overhead", []) if r.get("op") == LAUNCHER_OP]


def launcher_section(run: Run) -> str:
    """The generated launcher against a bare cudarc launch of the same kernel, per mode."""
    records = launcher_rows(run)
    if not records:
        return ""
    rows = []
    for mode in ordered(str(r.get("mode")) for r in records):
        by_impl = {r["impl"]: r for r in records if r.get("mode") == mode}
        bare = by_impl.get("cudarc")
        for impl, how in LAUNCHER_PATHS.items():
            r = by_impl.get(impl)
            if r is None:
                continue
            ratio = r["median_ms"] / bare["median_ms"] if impl != "cudarc" and timed(r) and bare and timed(bare) else None
            us = f"{r['median_ms'] * 1e3:.2f}" if timed(r) else "-"
            rows.append([mode, impl, how, us, fmt_ratio(ratio, percent=True), note(r) or "-"])
    rounds = ordered(str(r["rounds"]) for r in records if r.get("rounds"))
    return "\n\n".join(
        [
            "### Generated launcher against bare cudarc",
            "One kernel, `increment_by_one` on 1,024 floats (one thread per element, blocks of "
            "`kernels::add::BLOCK`), launched by cudarc's `launch_builder` on the PTX gpukern embeds, "
            "and by the launcher `#[kernel]` generates, through `gpu.library()` and through a module "
            "loaded with `gpu.load`. The three take turns for "
            f"{' / '.join(rounds) or 'several'} rounds; the time is the median over the rounds of "
            "the mean wall time per call (`async`: back to back, one synchronize at the end; `sync`: "
            "a synchronize after each call). Microseconds per call, and the launcher's time over "
            "the bare launch's in the same rounds:",
            table(["mode", "impl", "launched by", "us per call", "of bare cudarc", "note"], rows, right=[3, 4]),
        ]
    )


def overhead_section(run: Run, plot: str | None) -> str:
    # The generated-launcher comparison has a table of its own (two gpukern paths per call).
    records = [r for r in run.by_kernel.get("launch_overhead", []) if r.get("op") != LAUNCHER_OP]
    launcher = launcher_section(run)
    if not records:
        return launcher
    parts = [
        "## Launch overhead",
        "Wall time per call (mean over up to 10,000 calls) of a 1,024-element add and a 32^3 matmul: "
        "`async` = back-to-back calls on device-resident data ended by one synchronize; `sync` = a "
        "synchronize after every call; `ndarray` = from host arrays to host arrays (copies included). "
        "`cudarc` is gpukern's add kernel launched straight through cudarc.",
    ]
    if plot:
        parts.append(f"![launch overhead]({plot})")
    # One column per library (the variant is in the row: add or matmul).
    libs = sorted(ordered(r["impl"].split(":")[0] for r in records), key=impl_order)
    cases = ordered((r.get("op", r["shape"]), r.get("mode", "")) for r in records)
    rows = []
    for op, mode in cases:
        row = [f"{op} {mode}"]
        for lib in libs:
            r = next(
                (
                    x
                    for x in records
                    if x["impl"].split(":")[0] == lib and (x.get("op", x["shape"]), x.get("mode", "")) == (op, mode)
                ),
                None,
            )
            if r is None:
                row.append("")
            elif timed(r):
                row.append(f"{r['median_ms'] * 1e3:.1f}")
            else:
                row.append("fail" if r.get("check") == "fail" else "err")
        rows.append(row)
    parts.append("Microseconds per call:")
    parts.append(table(["call", *libs], rows, right=range(1, len(libs) + 1)))
    if launcher:
        parts.append(launcher)
    return "\n\n".join(parts)


def copies_section(run: Run) -> str:
    records = run.by_kernel.get("matmul_with_copies", [])
    if not records:
        return ""
    rows = []
    for shape in ordered(r["shape"] for r in records):
        for impl in sorted(ordered(r["impl"] for r in records if r["shape"] == shape), key=impl_order):
            by_mode = {r.get("mode"): r for r in records if r["shape"] == shape and r["impl"] == impl}
            c, d = by_mode.get("copies"), by_mode.get("resident")
            cm = c.get("median_ms") if c else None
            dm = d.get("median_ms") if d else None
            share = 1 - dm / cm if cm and dm else None
            rows.append([shape, impl, fmt_ms(cm), fmt_ms(dm), fmt_ratio(share, percent=True)])
    return "\n\n".join(
        [
            "## Matmul with host-device copies",
            "Wall time of one product from host arrays to a host array (upload, multiply, download) "
            "against the same product on data kept on the device (multiply + synchronize).",
            table(["m x n x k", "impl", "with copies", "device-resident", "time in copies"], rows, right=[2, 3, 4]),
        ]
    )


def failures_section(run: Run) -> str:
    bad = [r for r in run.records if not timed(r)]
    if not bad:
        return "## Not timed\n\nEvery measurement passed its check and was timed."
    rows = [[r["kernel"], r["impl"], case_label(case_key(r)), fmt_err(r), note(r) or "-"] for r in bad]
    return "\n\n".join(
        [
            "## Not timed",
            "Measurements that failed their check, raised an error or were skipped:",
            table(["kernel", "impl", "case", "rel_err", "why"], rows),
        ]
    )
