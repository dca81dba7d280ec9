#!/usr/bin/env python3
"""Renders a benchmark run (JSON Lines from bench/run.sh) into BENCHMARKS.md and PNG plots.

    python3 bench/report.py bench/results/latest.jsonl [--out BENCHMARKS.md] [--plots bench/results]

Runs anywhere with Python 3.9+; the plots need matplotlib (`pip install matplotlib`), and
without it the tables are still written. See bench/README.md for the schema.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any, TypeVar

Record = dict[str, Any]
T = TypeVar("T")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Ceilings measured in the same run, never counted as peers.
CEILINGS = {"copy", "cublas", "cublas_tf32"}
MEMORY_BOUND = ["add", "increment_by_one", "softmax", "sum", "argmax", "transpose", "rms_norm", "layer_norm", "cross_entropy", "cross_entropy_mean"]
KERNEL_TITLES = {
    "add": "add (c = a + b)",
    "increment_by_one": "increment_by_one (x += 1, in place)",
    "matmul": "matmul (f32, row-major, C = A B)",
    "softmax": "softmax (rows, inverse temperature t)",
    "sum": "sum (of a vector, f32)",
    "argmax": "argmax (of a vector, f32)",
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
REPRODUCE = """\
# here (Rust toolchain): build the bench binary
cargo build --release --example bench
# on the GPU machine, from the repository root (the binary carried along; no Rust needed there):
# the whole suite in three parts, one device call each (how the committed run was made)
for part in movement first new; do bash bench/run-parts.sh $part; done
# here: tables and plots
python3 bench/report.py bench/results/latest.jsonl"""


# --- Loading ---------------------------------------------------------------------------------
def load(path: str) -> list[Record]:
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"report: {path}:{number}: not JSON ({e}); skipped", file=sys.stderr)
                continue
            if not all(k in r for k in ("kernel", "impl", "shape")):
                print(f"report: {path}:{number}: no kernel/impl/shape; skipped", file=sys.stderr)
                continue
            records.append(r)
    return records


def timed(r: Record) -> bool:
    return r.get("median_ms") is not None


def is_gpukern(r: Record) -> bool:
    return str(r["impl"]).startswith("gpukern")


def comparable(r: Record) -> bool:
    """False for a peer row its runner marked not comparable (e.g. a one-block-per-row softmax
    on one very long row, where gpukern splits the row): listed, never counted in a ratio."""
    return r.get("comparable", True) is not False


def is_peer(r: Record) -> bool:
    """A like-for-like peer: not gpukern, not a ceiling, full fp32 (no TF32), comparable."""
    return not is_gpukern(r) and r["impl"] not in CEILINGS and r.get("math", "fp32") != "tf32" and comparable(r)


# The order of the rows of a case: gpukern, the ceilings' libraries, then the peers (torch eager
# before torch.compile); the first matching prefix ranks an impl.
IMPL_RANKS = [
    ("gpukern", 0),
    ("cudarc", 1),
    ("cublas", 2),
    ("copy", 3),
    ("torch-compile", 5),
    ("torch", 4),
    ("triton", 6),
    ("numba", 7),
]


def impl_order(impl: str) -> tuple[int, str]:
    for prefix, rank in IMPL_RANKS:
        if impl.startswith(prefix):
            return rank, impl
    return 99, impl


def ordered(items: Iterable[T]) -> list[T]:
    """Unique, in first-seen order."""
    return list(dict.fromkeys(items))


def case_key(r: Record) -> tuple[str, str]:
    """Shape plus the parameters that make a separate case (softmax's temperature; an element
    type other than f32, e.g. the norms' bf16)."""
    params = [f"t={r['t']:g}"] if r.get("t") is not None else []
    if r.get("dtype", "f32") != "f32":
        params.append(str(r["dtype"]))
    return r["shape"], " ".join(params)


def pretty(shape: str) -> str:
    """Powers of two as 2^k: "1x16777216" -> "1x2^24"."""
    parts = []
    for p in shape.split("x"):
        n = int(p) if p.isdigit() else 0
        parts.append(f"2^{n.bit_length() - 1}" if n >= 1 << 16 and n & (n - 1) == 0 else p)
    return "x".join(parts)


def case_label(key: tuple[str, str]) -> str:
    return f"{pretty(key[0])} {key[1]}".strip()


# --- Formatting ------------------------------------------------------------------------------
def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms * 1e3:.2f} us" if ms < 0.1 else f"{ms:.3f} ms"


def fmt_rate(r: Record, kind: str) -> str:
    v = r.get(kind)
    if v is None:
        return "-"
    return f"{v:.2f}" if kind == "tflops" else f"{v:.0f}"


def fmt_err(r: Record) -> str:
    e = r.get("rel_err")
    return "-" if e is None else f"{e:.1e}"


def fmt_ratio(x: float | None, percent: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{100 * x:.0f}%" if percent else f"{x:.2f}x"


def note(r: Record) -> str:
    text = r.get("error") or r.get("skipped") or ""
    if not text and not comparable(r):
        return "not comparable: " + str(r.get("not_comparable", "see bench/README.md")).replace("|", "/")
    if not text and r.get("check") == "fail":
        text = f"failed the check (tol {r.get('tol')})"
    text = str(text).strip().splitlines()[-1] if text else ""
    return text.replace("|", "/")[:90]


def table(header: list[str], rows: list[list[str]], right: Iterable[int] = ()) -> str:
    right = set(right)
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# --- Ceilings and comparisons ----------------------------------------------------------------
class Run:
    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.by_kernel: dict[str, list[Record]] = defaultdict(list)
        for r in records:
            self.by_kernel[r["kernel"]].append(r)
        copies = [r for r in self.by_kernel.get("copy", []) if r["impl"] == "copy" and r.get("gbps")]
        self.copy_best = max(copies, key=lambda r: r["gbps"]) if copies else None

    def rate_kind(self, kernel: str) -> str:
        return "tflops" if kernel.startswith("matmul") else "gbps"

    def ceiling(self, kernel: str, key: tuple[str, str], math: str = "fp32") -> tuple[float | None, str]:
        """The ceiling rate for a kernel at a case, and what it is (for matmul, per math mode:
        cuBLAS fp32 for fp32 rows, cuBLAS TF32 for TF32 rows)."""
        if kernel == "matmul":
            impl, name = ("cublas_tf32", "cuBLAS TF32") if math == "tf32" else ("cublas", "cuBLAS fp32")
            for r in self.by_kernel["matmul"]:
                if r["impl"] == impl and case_key(r) == key and r.get("tflops"):
                    return r["tflops"], name
            return None, name
        if self.copy_best:
            return self.copy_best["gbps"], f"copy ({self.copy_best['shape']} floats)"
        return None, "copy"


def best(records: Iterable[Record], kind: str) -> Record | None:
    rs = [r for r in records if r.get(kind) is not None]
    return max(rs, key=lambda r: r[kind]) if rs else None


# --- Sections --------------------------------------------------------------------------------
def header(run: Run, source: str, readme: str) -> str:
    def values(key: str) -> str:
        vs = ordered(str(r[key]) for r in run.records if r.get(key))
        return ", ".join(vs) if vs else "unknown"

    dates = sorted(str(r["date"]) for r in run.records if r.get("date"))
    date = f"{dates[0]} .. {dates[-1]}" if dates and dates[0] != dates[-1] else (dates[0] if dates else "unknown")
    rendered = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    versions = ordered(
        f"{r['impl'].split(':')[0].split('_')[0]} {r['version']}" for r in run.records if r.get("version")
    )
    rows = [
        ["GPU", values("gpu")],
        ["driver", values("driver")],
        ["git rev", values("git_rev")],
        ["measured", date],
        ["peers", ", ".join(versions) or "-"],
        ["source", f"`{source}` ({len(run.records)} records), rendered {rendered}"],
    ]
    return "\n\n".join(
        [
            "# gpukern benchmarks",
            "Every figure below was measured on one GPU next to the peers and the ceilings it is compared "
            "to, in the same device call (a run may be split into several calls on the same machine, one "
            "after the other with the same binaries: each kernel's rows, its peers and its copy ceiling "
            "come from one of them; the `measured` row gives the span). Kernels are checked against a reference before they are timed; times are "
            f"medians of CUDA-event samples after warm-up (see [bench/README.md]({readme}) for "
            "the method and the schema). Rates come from the minimum traffic (add 12 B/element, "
            "increment and softmax 8 B/element, sum and argmax 4 B/element, transpose 8 B/element, "
            "matmul 4(mk+kn+mn) B, rms_norm and layer_norm 8 B/element "
            "in f32 and 4 in bf16 plus the weight and bias once, cross_entropy 4 B/element plus 12 B/row "
            "(an i64 label read, a loss written; the mean writes 4 B in all) and 2mnk flops.",
            "The `rel_err` column is the relative error norm against the f64 result of the same "
            "inputs, with one difference in how that reference is held: the Rust bench (gpukern, "
            "cuBLAS, cudarc; `ref` `cpu_f64` or `cublas_f64`) compares with it rounded to f32, the "
            "Python peers (`torch_f64`) with the f64 values themselves. The two differ by at most one "
            "f32 rounding (2^-24 relative) per element, so they agree wherever an error is larger than "
            "that; for `add`, whose f32 result is the correctly rounded sum, gpukern shows 0 and the "
            "peers show that rounding.",
            table(["run", ""], rows),
            "Reproduce:\n\n```sh\n" + REPRODUCE + "\n```",
        ]
    )


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


# --- Half-precision matmul (issue 13): examples/bench/matmul_half.rs, bench/peers_matmul_half.py
HALF_KERNEL = "matmul_half"
HALF_TYPES = ["bf16", "fp16"]
# Issue 13's targets: gpukern's half-precision matmul over cuBLAS `cublasGemmEx` of the same types.
HALF_GOALS = [("4096x4096x4096", 0.90), ("8192x8192x8192", 0.90), ("2048x2048x2048", 0.75), ("4097x4095x4093", 0.75)]


def half_of(dtype: str, out: str | None = None) -> Any:
    """A predicate on matmul_half records: operands of `dtype`, result `out` (default: `dtype`)."""
    return lambda r: r.get("dtype") == dtype and r.get("out", r.get("dtype")) == (out or dtype)


def half_impl(want: Any, dtype: str, out: str | None = None) -> Any:
    """`want` (an impl name or a predicate) among the matmul_half records of `dtype` and `out`."""
    ok = want if callable(want) else (lambda r: r["impl"] == want)
    of = half_of(dtype, out)
    return lambda r: of(r) and ok(r)


def half_section(run: Run) -> str:
    """bf16 and fp16 matmul: gpukern against cuBLAS of the same types, torch and Triton."""
    records = run.by_kernel.get(HALF_KERNEL, [])
    parts = ["## matmul (bf16, fp16)"]
    if not records:
        return "\n\n".join(parts + [not_measured(run, [HALF_KERNEL])])
    kind = "tflops"
    peers = ["torch", "triton"]
    rows = []
    for shape in ordered(r["shape"] for r in records):
        for dtype in HALF_TYPES:
            outs = ordered(str(r.get("out", dtype)) for r in records if r["shape"] == shape and r.get("dtype") == dtype)
            for out in sorted(outs, key=lambda o: o != dtype):
                here = [r for r in records if r["shape"] == shape and half_of(dtype, out)(r)]
                mine = best((r for r in here if is_gpukern(r)), kind)
                blas = best((r for r in here if r["impl"].startswith("cublas")), kind)
                row = [pretty(shape), dtype, out]
                variant = f" ({mine['impl'].split(':', 1)[-1]})" if mine else ""
                row += [fmt_rate(mine, kind) + variant if mine else "-", fmt_rate(blas, kind) if blas else "-"]
                row.append(fmt_ratio(mine[kind] / blas[kind] if mine and blas and mine.get(kind) and blas.get(kind) else None))
                for peer in peers:
                    theirs = best((r for r in here if r["impl"].split("_")[0] == peer), kind)
                    row.append(fmt_rate(theirs, kind) if theirs else "-")
                    ok = mine and theirs and mine.get(kind) and theirs.get(kind)
                    row.append(fmt_ratio(mine[kind] / theirs[kind] if ok else None))
                row += [fmt_err(mine) if mine else "-", fmt_err(blas) if blas else "-"]
                rows.append(row)
    header = ["m x n x k", "operands", "result", "gpukern", "cuBLAS", "gpukern / cuBLAS"]
    for peer in peers:
        header += [peer, f"gpukern / {peer}"]
    header += ["gpukern rel_err", "cuBLAS rel_err"]
    details = []
    shapes = ordered(r["shape"] for r in records)

    def order(r: Record) -> tuple[Any, ...]:
        dtype = str(r.get("dtype"))
        rank = HALF_TYPES.index(dtype) if dtype in HALF_TYPES else len(HALF_TYPES)
        return shapes.index(r["shape"]), rank, r.get("out", dtype) != dtype, impl_order(r["impl"])

    for r in sorted(records, key=order):
        impl = f"**{r['impl']}**" if is_gpukern(r) else r["impl"]
        details.append([
            pretty(r["shape"]), str(r.get("dtype", "-")), str(r.get("out", "-")), impl, fmt_ms(r.get("median_ms")),
            fmt_rate(r, kind), fmt_err(r), str(r.get("ref", "-")), note(r) or "-",
        ])
    parts += [
        "Row-major `C = A B` with bf16 or fp16 operands, products on tensor cores and sums in f32, the "
        "result in the operands' type (rounded once) or in f32. gpukern: `gpu.matmul_to_with(a, b, c, tile)` "
        "into an existing matrix (no allocation), the best of its kernels in the gpukern column: `mma` "
        "(`mma.sync`, every GPU from sm_80 on) and `wgmma` (Hopper's `wgmma` fed by TMA, bf16 with `k` and "
        "`n` multiples of 8); cuBLAS: `cublasGemmEx` with the same types in and out, "
        "`CUBLAS_COMPUTE_32F`, the default algorithm; torch: `torch.matmul(a, b, out=c)` with torch's "
        "default settings (f32 result: `torch.mm(a, b, out_dtype=torch.float32)`); Triton: the matmul "
        "tutorial kernel on the same types. TFLOP/s from 2mnk flops; `rel_err` against the f64 product of "
        "the same rounded inputs (a 16-bit result's own rounding alone gives a fraction of its unit "
        "roundoff: 2^-8 for bf16, 2^-11 for fp16). A dash: not measured (see Not timed).",
        table(header, rows, right=range(3, len(header))),
        "<details><summary>Every implementation, per case</summary>\n\n"
        + table(["m x n x k", "operands", "result", "impl", "median", "TFLOP/s", "rel_err", "ref", "note"], details, right=[4, 5, 6])
        + "\n\n</details>",
    ]
    return "\n\n".join(parts)


def half_targets(run: Run) -> list[list[str]]:
    """Issue 13's targets: BF16 and FP16 gpukern over cuBLAS of the same types, per shape."""
    rows = []
    for dtype in HALF_TYPES:
        for shape, goal in HALF_GOALS:
            label = f"{dtype.upper()} `matmul` >= {goal:.2f}x cuBLAS `cublasGemmEx` ({dtype}) at {pretty(shape).replace('x', ' x ')}"
            row = ratio_target(run, label, HALF_KERNEL, shape, half_impl(is_gpukern, dtype), half_impl("cublas", dtype), goal)
            failed = [
                r for r in run.by_kernel.get(HALF_KERNEL, [])
                if r["shape"] == shape and half_impl(is_gpukern, dtype)(r) and not timed(r)
            ]
            if row[2] == "unknown" and failed:
                row[1] = f"not timed: {failed[0]['impl']} {note(failed[0]) or 'see Not timed'}"
            rows.append(row)
    return rows


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


# --- Data movement (issue 14): transfers, the pipelined batch, graphs, several GPUs -----------
# The host-device copy paths, in the table's order (examples/bench/transfer.rs, bench/peers_transfer.py).
TRANSFER_IMPLS = [
    "gpukern:pinned", "gpukern:staged", "cudarc:pageable", "gpukern:to_vec", "torch:pinned", "torch:pageable"
]
# The pipelined batch's timings (examples/bench/transfer.rs, `pipelined`): mode -> column.
PIPELINED_MODES = {
    "copies": "copies alone", "compute": "compute alone", "serial": "one stream", "pipelined": "pipelined"
}
# Issue 14's goals.
PINNED_GOAL, OVERLAP_GOAL, GRAPH_GOAL_US, BUSBW_GOAL, SCALING_GOAL = 0.8, 1.15, 1.0, 0.8, 1.8


def num(r: Record | None, key: str) -> float | None:
    """A finite number field of a record, else None (absent, null, text, NaN)."""
    v = r.get(key) if r else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def measured(run: Run, kernel: str) -> list[Record]:
    return [r for r in run.by_kernel.get(kernel, []) if timed(r)]


def not_measured(run: Run, kernels: Iterable[str]) -> str:
    """"Not measured in this run", with why when the records say (skipped, failed)."""
    why = ordered(f"{r['impl']}: {note(r)}" for k in kernels for r in run.by_kernel.get(k, []) if note(r))
    return "Not measured in this run" + (f" ({'; '.join(why)})." if why else ".")


def mib(shape: str) -> str:
    """Floats as MiB of f32: "67108864" -> "256 MiB"; other shapes as they are."""
    return f"{(4 * int(shape)) >> 20} MiB" if shape.isdigit() else shape


def transfer_section(run: Run) -> str:
    records = measured(run, "transfer")
    parts = ["## Host-device transfers"]
    if not records:
        return "\n\n".join(parts + [not_measured(run, ["transfer"])])
    impls = [i for i in TRANSFER_IMPLS if any(r["impl"] == i for r in records)]
    impls += sorted(ordered(r["impl"] for r in records if r["impl"] not in impls), key=impl_order)
    rows = []
    for shape, direction in ordered((r["shape"], str(r.get("direction", "-"))) for r in records):
        here = {r["impl"]: r for r in records if r["shape"] == shape and str(r.get("direction", "-")) == direction}
        mine, torch = num(here.get("gpukern:pinned"), "gbps"), num(here.get("torch:pinned"), "gbps")
        rates = [num(here.get(i), "gbps") for i in impls]
        row = [shape, direction] + [f"{g:.1f}" if g else "-" for g in rates]
        rows.append(row + [fmt_ratio(mine / torch if mine and torch else None, percent=True)])
    parts += [
        "One copy of the whole buffer between host and device, in GB/s (the bytes copied, once, over "
        "the wall time of the copy and its wait). `gpukern:pinned`: a `PinnedBuffer` copied into or "
        "out of a device buffer; `gpukern:staged`: `Gpu::upload` / `Gpu::download` through the "
        "reused pinned staging buffers; `cudarc:pageable`: cudarc's copy from or into a reused `Vec`; "
        "`gpukern:to_vec`: a download into a fresh `Vec`; `torch:pinned`: `Tensor.to('cuda', "
        "non_blocking=True)` from and `copy_` into a pinned tensor; `torch:pageable`: `.to` from and "
        "into pageable memory. A dash: not measured (see Not timed).",
        table(["size", "direction", *impls, "gpukern:pinned / torch:pinned"], rows, right=range(2, len(impls) + 3)),
    ]
    return "\n\n".join(parts)


def pipelined_section(run: Run) -> str:
    records = measured(run, "pipelined")
    parts = ["## Pipelined batch (upload, matmul, download)"]
    if not records:
        return "\n\n".join(parts + [not_measured(run, ["pipelined"])])
    rows = []
    for shape, impl in ordered((r["shape"], r["impl"]) for r in records):
        by_mode = {r.get("mode"): r for r in records if r["shape"] == shape and r["impl"] == impl}
        ms = {m: num(by_mode.get(m), "median_ms") for m in PIPELINED_MODES}
        bound = max(ms["copies"], ms["compute"]) if ms["copies"] and ms["compute"] else None
        q = ms["pipelined"] / bound if ms["pipelined"] and bound else None
        rows.append([pretty(shape), impl, *(fmt_ms(ms[m]) for m in PIPELINED_MODES), fmt_ms(bound), fmt_ratio(q)])
    streams = ordered(str(r["streams"]) for r in records if r.get("mode") == "pipelined" and r.get("streams"))
    parts += [
        "The `transfer` example's batch `C_i = A_i B` (chunks x n^3: every `A_i` uploaded from pinned "
        "memory, multiplied by a resident `B`, every `C_i` downloaded into pinned memory), wall time "
        "of the whole batch: the copies alone, the products alone on resident data, upload / compute "
        "/ download chunk by chunk on one stream, and pipelined over "
        f"{' / '.join(streams) or 'several'} streams (`Gpu::pipelined`). The overlap bound is "
        "max(copies, compute); the last column is pipelined over that bound (1.00x: full overlap).",
        table(
            ["chunks x n^3", "impl", *PIPELINED_MODES.values(), "max(copies, compute)", "pipelined / bound"],
            rows,
            right=range(2, 8),
        ),
    ]
    return "\n\n".join(parts)


def graph_section(run: Run) -> str:
    records = measured(run, "graph_replay")
    parts = ["## CUDA graph replay"]
    if not records:
        return "\n\n".join(parts + [not_measured(run, ["graph_replay"])])
    rows = []
    for shape in ordered(r["shape"] for r in records):
        here = sorted((r for r in records if r["shape"] == shape), key=lambda r: impl_order(r["impl"]))
        def launches_of(impl: str) -> float | None:
            lib = impl.split(":")[0]
            return num(next((r for r in here if r["impl"] == f"{lib}:launches"), None), "us_per_kernel")

        for r in here:
            per = num(r, "us_per_kernel")
            launches = launches_of(r["impl"])
            vs = per / launches if per and launches and not r["impl"].endswith(":launches") else None
            kernels = r.get("kernels_per_call", "-")
            rows.append([
                shape, r["impl"], str(r.get("op", "-")), str(kernels), f"{r['median_ms'] * 1e3:.2f}",
                f"{per:.3f}" if per is not None else "-", fmt_ratio(vs, percent=True),
            ])
    parts += [
        "A chain of small kernels (`increment_by_one` on 1,024 floats) replayed as one captured graph "
        "(`gpukern:graph`) against the same kernels launched one by one (`gpukern:launches`), and the "
        "same chain of `x.add_(1)` in PyTorch, captured with `torch.cuda.CUDAGraph` and replayed "
        "(`torch:cudagraph`) or launched eagerly (`torch:launches`); calls back to back with one "
        "synchronize at the end; mean wall time per call and per kernel, in microseconds (the "
        "last column against the same library's separate launches):",
        table(
            ["kernels x floats", "impl", "kernel", "kernels per call", "us per call", "us per kernel",
             "of separate launches"],
            rows,
            right=range(3, 7),
        ),
    ]
    return "\n\n".join(parts)


def multi_gpu_section(run: Run) -> str:
    parts = ["## Several GPUs"]
    reduce = sorted(measured(run, "all_reduce"), key=lambda r: impl_order(r["impl"]))
    if reduce:
        torch = {(r["shape"], r.get("gpus")): num(r, "busbw_gb_s") for r in reduce if not is_gpukern(r)}
        rows = []
        for r in reduce:
            bus, theirs = num(r, "busbw_gb_s"), torch.get((r["shape"], r.get("gpus")))
            vs = bus / theirs if is_gpukern(r) and bus and theirs else None
            algbw = num(r, "algbw_gb_s")
            rows.append([
                r["impl"], str(r.get("gpus", "-")), mib(r["shape"]), fmt_ms(r["median_ms"]),
                f"{algbw:.1f}" if algbw is not None else "-", f"{bus:.1f}" if bus is not None else "-",
                fmt_ratio(vs, percent=True),
            ])
        text = (
            "All-reduce (sum) of f32 on every GPU, median wall time, with NCCL's bandwidths: algbw = "
            "bytes / time, busbw = algbw x 2 (n - 1) / n. `gpukern:nccl` is `GpuGroup::all_reduce_sum`, "
            "`torch.distributed:nccl` one process per GPU (`dist.all_reduce`):"
        )
        header = ["impl", "GPUs", "per GPU", "median", "algbw GB/s", "busbw GB/s", "of torch.distributed busbw"]
        parts += ["### All-reduce", text, table(header, rows, right=range(1, 7))]
    else:
        parts += ["### All-reduce", not_measured(run, ["all_reduce"])]
    matmuls = sorted(measured(run, "data_parallel_matmul"), key=lambda r: (r["shape"], num(r, "gpus") or 0))
    if matmuls:
        one = {r["shape"]: r["median_ms"] for r in matmuls if r["impl"] == "gpukern:1gpu"}
        rows = []
        for r in matmuls:
            speedup = num(r, "speedup") or (one[r["shape"]] / r["median_ms"] if r["shape"] in one else None)
            gflops = num(r, "gflop_s")
            rows.append([
                pretty(r["shape"]), r["impl"], str(r.get("gpus", "-")), fmt_ms(r["median_ms"]),
                f"{gflops / 1e3:.1f}" if gflops is not None else "-", fmt_ratio(speedup),
            ])
        text = (
            "A batch of fast fp32 matmuls (batch x m x n x k, operands resident) on one GPU and split "
            "over two (one host thread per GPU), median wall time of the whole batch, and the speed-up "
            "over one GPU:"
        )
        header = ["batch x m x n x k", "impl", "GPUs", "median", "TFLOP/s", "speed-up"]
        parts += ["### Data-parallel matmul", text, table(header, rows, right=range(2, 6))]
    else:
        parts += ["### Data-parallel matmul", not_measured(run, ["data_parallel_matmul"])]
    return "\n\n".join(parts)


def data_movement_sections(run: Run) -> list[str]:
    return [transfer_section(run), pipelined_section(run), graph_section(run), multi_gpu_section(run)]


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


# --- Plots -----------------------------------------------------------------------------------
def plots(run: Run, folder: str) -> dict[str, str]:
    """One PNG per kernel family; returns kernel -> path. Empty without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report: matplotlib is not installed (pip install matplotlib): tables only", file=sys.stderr)
        return {}
    os.makedirs(folder, exist_ok=True)
    out: dict[str, str] = {}

    def bars(
        kernel: str,
        records: list[Record],
        kind: str,
        title: str,
        ylabel: str,
        log: bool,
        ceiling: float | None,
        ceiling_label: str,
    ) -> None:
        cases = ordered(case_key(r) for r in records)
        impls = sorted(ordered(r["impl"] for r in records if r.get(kind) is not None), key=impl_order)
        if not cases or not impls:
            return
        fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(cases) + 4.5), 4.8))
        width = 0.8 / len(impls)
        for i, impl in enumerate(impls):
            xs, ys = [], []
            for j, key in enumerate(cases):
                r = next((x for x in records if x["impl"] == impl and case_key(x) == key), None)
                if r is not None and r.get(kind) is not None:
                    xs.append(j - 0.4 + (i + 0.5) * width)
                    ys.append(r[kind])
            style: dict[str, Any] = {"edgecolor": "black", "linewidth": 0.8} if impl.startswith("gpukern") else {}
            ax.bar(xs, ys, width, label=impl, **style)
        if ceiling:
            ax.axhline(ceiling, color="black", linestyle="--", linewidth=1, label=ceiling_label)
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels([case_label(k) for k in cases], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0))
        fig.tight_layout()
        path = os.path.join(folder, f"{kernel}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out[kernel] = path

    gpu = ordered(str(r.get("gpu")) for r in run.records if r.get("gpu"))
    on = f" on {gpu[0]}" if gpu else ""
    copy_bw = run.copy_best["gbps"] if run.copy_best else None
    for kernel in MEMORY_BOUND:
        rs = [r for r in run.by_kernel.get(kernel, []) if timed(r)]
        bars(kernel, rs, "gbps", f"{kernel}{on}: GB/s (higher is better)", "GB/s", False, copy_bw, "copy ceiling")
    mm = [r for r in run.by_kernel.get("matmul", []) if timed(r)]
    bars("matmul", mm, "tflops", f"matmul{on}: TFLOP/s (log scale)", "TFLOP/s", True, None, "")
    # The generated-launcher rows have their own table (their two gpukern paths share a call).
    lo = [r for r in run.by_kernel.get("launch_overhead", []) if timed(r) and r.get("op") != LAUNCHER_OP]
    if lo:
        for r in lo:
            r["us"] = r["median_ms"] * 1e3
            r["_case"] = f"{r.get('op', '')} {r.get('mode', '')}"
        # Bars per library, grouped by call (op + mode).
        grouped = [{**r, "shape": r["_case"], "t": None, "impl": r["impl"].split(":")[0]} for r in lo]
        bars(
            "launch_overhead",
            grouped,
            "us",
            f"launch overhead{on}: us per call (lower is better)",
            "us per call",
            True,
            None,
            "",
        )
    return out


# --- Main ------------------------------------------------------------------------------------
def spread_section(results: str) -> str:
    """The run-to-run spread: this run against `repeat.jsonl` beside it, a second full run of
    the same commit (`bash bench/run.sh --twice`). compare.py refuses two different commits, so
    a comparison of commits is never shown as a spread."""
    repeat = os.path.join(os.path.dirname(os.path.abspath(results)), "repeat.jsonl")
    title = "## Run-to-run spread"
    if not os.path.exists(repeat) or os.path.samefile(repeat, results):
        return (
            f"{title}\n\nNot measured for this run: there is no second full run of the same commit "
            "(`bench/results/repeat.jsonl`, written by `bash bench/run.sh --twice`). Until there is, "
            "read small ratios above with care."
        )
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "compare.py"), results, repeat],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return f"{title}\n\nNot shown: {done.stderr.strip() or 'compare.py failed'}"
    return (
        f"{title}\n\n"
        "The same measurements in two full runs of the same commit, back to back on the same machine "
        "(`bench/results/latest.jsonl` and `bench/results/repeat.jsonl`): read the ratios above "
        "against these changes. Launch overhead is wall-clock time on the host.\n\n"
        "```sh\npython3 bench/compare.py bench/results/latest.jsonl bench/results/repeat.jsonl\n```\n\n"
        + done.stdout.strip()
    )


# --- Targets ---------------------------------------------------------------------------------
def pick(run: Run, kernel: str, shape: str, want: Any, t: float | None = None) -> Record | None:
    """The fastest timed record of `kernel` at `shape` (and temperature `t`) whose impl passes
    `want` (a name, or a predicate on the record)."""
    kind = run.rate_kind(kernel)
    ok = want if callable(want) else (lambda r: r["impl"] == want)
    rs = [
        r
        for r in run.by_kernel.get(kernel, [])
        if r["shape"] == shape and timed(r) and ok(r) and comparable(r) and (t is None or r.get("t") == t)
    ]
    return best(rs, kind) or (rs[0] if rs else None)


def fast_fp32(r: Record) -> bool:
    return is_gpukern(r) and r.get("math", "fp32") != "tf32" and r["impl"] not in ("gpukern:naive", "gpukern:tiled")


def gpukern_tf32(r: Record) -> bool:
    return is_gpukern(r) and r.get("math") == "tf32"


def ratio_target(run: Run, label: str, kernel: str, shape: str, mine: Any, theirs: Any, goal: float) -> list[str]:
    """A row "label | a / b UNIT = q% | met/missed" for a ratio of two records of one run."""
    kind = run.rate_kind(kernel)
    unit = "TFLOP/s" if kind == "tflops" else "GB/s"
    a = pick(run, kernel, shape, mine)
    b = pick(run, kernel, shape, theirs) if theirs != "copy" else run.copy_best
    if not a or not b or not a.get(kind) or not b.get(kind):
        return [label, "not measured in this run", "unknown"]
    q = a[kind] / b[kind]
    figure = f"{fmt_rate(a, kind)} / {fmt_rate(b, kind)} {unit} = **{100 * q:.1f}%** ({a['impl']} / {b['impl']})"
    status = "met" if q >= goal else f"missed by {100 * (goal - q):.1f} points"
    return [label, figure, status]


def range_target(run: Run, label: str, kernel: str, mine: Any, theirs: str) -> list[str]:
    """A row for "at least as fast as `theirs` on every case": the lowest and highest ratio."""
    kind = run.rate_kind(kernel)
    ratios = []
    for key in ordered(case_key(r) for r in run.by_kernel.get(kernel, [])):
        t = next((r.get("t") for r in run.by_kernel[kernel] if case_key(r) == key), None)
        a, b = pick(run, kernel, key[0], mine, t), pick(run, kernel, key[0], theirs, t)
        if a and b and a.get(kind) and b.get(kind):
            ratios.append((a[kind] / b[kind], case_label(key)))
    if not ratios:
        return [label, "not measured in this run", "unknown"]
    lo, hi = min(ratios), max(ratios)
    slower = [c for q, c in ratios if q < 1.0]
    figure = f"{lo[0]:.2f}x ({lo[1]}) to {hi[0]:.2f}x ({hi[1]}) over {len(ratios)} cases"
    status = "met" if not slower else f"missed on {len(slower)} of {len(ratios)}: {', '.join(slower)}"
    return [label, figure, status]


def launcher_target(lo: dict[tuple[Any, Any, Any], Record], mode: str) -> list[str]:
    """A row for "the generated launcher within 10% of a bare cudarc launch of the same kernel"
    in `mode`: both generated-launcher paths (`gpu.library()`, `gpu.load`) against the bare one."""
    label = f"generated launcher <= {100 * LAUNCHER_GOAL:.0f}% of bare cudarc (`{LAUNCHER_OP}`, {mode})"
    bare = lo.get(("cudarc", LAUNCHER_OP, mode))
    paths = [(impl, lo.get((impl, LAUNCHER_OP, mode))) for impl in ("gpukern:launcher", "gpukern:module")]
    measured = [(impl, r["median_ms"] / bare["median_ms"], r) for impl, r in paths if r and bare]
    if not bare or not measured:
        return [label, "not measured in this run", "unknown"]
    impl, q, r = measured[0]
    figure = f"{r['median_ms'] * 1e3:.2f} vs {bare['median_ms'] * 1e3:.2f} us = **{100 * q:.0f}%** ({impl} / cudarc)"
    figure += "".join(f"; {i.split(':')[1]} {100 * x:.0f}%" for i, x, _ in measured[1:])
    missing = [impl for impl, r in paths if not r]
    if missing:
        figure += f"; {', '.join(missing)} not measured"
    worst = max(x for _, x, _ in measured)
    status = "met" if worst <= LAUNCHER_GOAL and not missing else "missed" if worst > LAUNCHER_GOAL else "unknown"
    return [label, figure, status]


def unmeasured(label: str) -> list[str]:
    return [label, "not measured in this run", "unknown"]


def pinned_target(run: Run, direction: str) -> list[str]:
    """gpukern's pinned copy against torch's in one direction, at 256 MiB if measured there, else
    at the largest size both measured."""
    label = f"pinned {direction} of 256 MiB >= {100 * PINNED_GOAL:.0f}% of torch pinned (`non_blocking=True`)"
    pairs = []
    for r in measured(run, "transfer"):
        if r["impl"] == "gpukern:pinned" and r.get("direction") == direction and num(r, "gbps"):
            peer = next(
                (
                    p
                    for p in measured(run, "transfer")
                    if p["impl"] == "torch:pinned" and p.get("direction") == direction
                    and p["shape"] == r["shape"] and num(p, "gbps")
                ),
                None,
            )
            if peer:
                pairs.append((r["shape"] == "256MiB", num(r, "n") or 0, r, peer))
    if not pairs:
        return unmeasured(label)
    _, _, mine, peer = max(pairs, key=lambda x: x[:2])
    q = mine["gbps"] / peer["gbps"]
    figure = f"{mine['gbps']:.1f} / {peer['gbps']:.1f} GB/s = **{100 * q:.1f}%** at {mine['shape']}"
    return [label, figure, "met" if q >= PINNED_GOAL else f"missed by {100 * (PINNED_GOAL - q):.1f} points"]


def overlap_target(run: Run) -> list[str]:
    label = f"pipelined batch <= {OVERLAP_GOAL:.2f}x max(copy time, compute time)"
    records = measured(run, "pipelined")
    for shape, impl in ordered((r["shape"], r["impl"]) for r in records):
        ms = {r.get("mode"): num(r, "median_ms") for r in records if r["shape"] == shape and r["impl"] == impl}
        copies, compute, piped = ms.get("copies"), ms.get("compute"), ms.get("pipelined")
        if copies and compute and piped:
            q = piped / max(copies, compute)
            figure = (
                f"{fmt_ms(piped)} / max({fmt_ms(copies)}, {fmt_ms(compute)}) = **{q:.2f}x** "
                f"({pretty(shape)}, {impl})"
            )
            return [label, figure, "met" if q <= OVERLAP_GOAL else "missed"]
    return unmeasured(label)


def graph_target(run: Run) -> list[str]:
    label = f"graph replay <= {GRAPH_GOAL_US:g} us per kernel, chain of 100 small kernels"
    by_impl = {r["impl"]: r for r in measured(run, "graph_replay")}
    per = num(by_impl.get("gpukern:graph"), "us_per_kernel")
    if per is None:
        return unmeasured(label)
    launches = num(by_impl.get("gpukern:launches"), "us_per_kernel")
    figure = f"**{per:.3f} us** per kernel" + (f" (separate launches: {launches:.3f} us)" if launches else "")
    torch_graph = num(by_impl.get("torch:cudagraph"), "us_per_kernel")
    if torch_graph:
        figure += f"; torch.cuda.CUDAGraph of the same chain: {torch_graph:.3f} us"
    return [label, figure, "met" if per <= GRAPH_GOAL_US else "missed"]


def busbw_target(run: Run) -> list[str]:
    label = f"all-reduce of 256 MiB: busbw >= {100 * BUSBW_GOAL:.0f}% of torch.distributed (NCCL)"
    records = measured(run, "all_reduce")
    for mine in (r for r in records if is_gpukern(r) and num(r, "busbw_gb_s")):
        peer = next(
            (
                p
                for p in records
                if not is_gpukern(p) and p["shape"] == mine["shape"] and p.get("gpus") == mine.get("gpus")
                and num(p, "busbw_gb_s")
            ),
            None,
        )
        if peer:
            q = mine["busbw_gb_s"] / peer["busbw_gb_s"]
            figure = (
                f"{mine['busbw_gb_s']:.1f} / {peer['busbw_gb_s']:.1f} GB/s = **{100 * q:.1f}%** "
                f"({mib(mine['shape'])} on {mine.get('gpus', '?')} GPUs)"
            )
            return [label, figure, "met" if q >= BUSBW_GOAL else f"missed by {100 * (BUSBW_GOAL - q):.1f} points"]
    return unmeasured(label)


def scaling_target(run: Run) -> list[str]:
    label = f"data-parallel matmul batch: >= {SCALING_GOAL:.1f}x from one GPU to two"
    by_impl = {r["impl"]: r for r in measured(run, "data_parallel_matmul")}
    one, two = num(by_impl.get("gpukern:1gpu"), "median_ms"), num(by_impl.get("gpukern:2gpu"), "median_ms")
    speedup = num(by_impl.get("gpukern:2gpu"), "speedup") or (one / two if one and two else None)
    if speedup is None:
        return unmeasured(label)
    figure = f"**{speedup:.2f}x**" + (f" ({fmt_ms(one)} on one GPU, {fmt_ms(two)} on two)" if one and two else "")
    return [label, figure, "met" if speedup >= SCALING_GOAL else "missed"]


def data_movement_targets(run: Run) -> list[list[str]]:
    """Issue 14's targets, each from this run's records."""
    return [
        pinned_target(run, "upload"),
        pinned_target(run, "download"),
        overlap_target(run),
        graph_target(run),
        busbw_target(run),
        scaling_target(run),
    ]


NORM_KERNELS = ["rms_norm", "layer_norm", "cross_entropy", "cross_entropy_mean"]


def f32_of(want: Any) -> Any:
    """`want` (an impl name or a predicate) restricted to f32 records."""
    ok = want if callable(want) else (lambda r: r["impl"] == want)
    return lambda r: r.get("dtype", "f32") == "f32" and ok(r)


def norm_targets(run: Run) -> list[list[str]]:
    """The norms (f32) >= 90% of copy and >= 1.0x torch.compile at 8192 x 1024..16384;
    cross-entropy per row >= 85% of copy at 8192 x 32768 and 131072."""
    rows = []
    for kernel in ("rms_norm", "layer_norm"):
        for cols in (1024, 4096, 16384):
            shape = f"8192x{cols}"
            rows.append(ratio_target(run, f"`{kernel}` f32 >= 90% of copy at {shape}", kernel, shape, f32_of(is_gpukern), "copy", 0.9))
            rows.append(
                ratio_target(
                    run, f"`{kernel}` f32 >= 1.0x torch.compile at {shape}", kernel, shape, f32_of(is_gpukern), f32_of("torch-compile"), 1.0
                )
            )
    for cols in (32768, 131072):
        shape = f"8192x{cols}"
        rows.append(ratio_target(run, f"`cross_entropy` >= 85% of copy at {shape}", "cross_entropy", shape, is_gpukern, "copy", 0.85))
    return rows


def targets_table(run: Run) -> str:
    """The performance targets of the fast-kernels issue, each computed from this run's records."""
    rows = [
        ratio_target(run, "exact-fp32 `matmul` >= 90% of cuBLAS sgemm at 4096^3", "matmul", "4096x4096x4096", fast_fp32, "cublas", 0.9),
        ratio_target(run, "... and at 8192^3", "matmul", "8192x8192x8192", fast_fp32, "cublas", 0.9),
        ratio_target(run, ">= 75% at 1024^3", "matmul", "1024x1024x1024", fast_fp32, "cublas", 0.75),
        ratio_target(run, ">= 75% at 2048^3", "matmul", "2048x2048x2048", fast_fp32, "cublas", 0.75),
        ratio_target(run, ">= 75% on 4097x4095x4093", "matmul", "4097x4095x4093", fast_fp32, "cublas", 0.75),
        range_target(run, "fast never slower than the tiled kernel on any shape", "matmul", "gpukern:fast", "gpukern:tiled"),
        ratio_target(run, "TF32 tensor-core `matmul` >= 70% of cuBLAS TF32 at 4096^3", "matmul", "4096x4096x4096", gpukern_tf32, "cublas_tf32", 0.7),
        ratio_target(run, "... and at 8192^3", "matmul", "8192x8192x8192", gpukern_tf32, "cublas_tf32", 0.7),
        ratio_target(run, "softmax >= 85% of copy at 8192x4096", "softmax", "8192x4096", is_gpukern, "copy", 0.85),
        ratio_target(run, "... at 8192x8192", "softmax", "8192x8192", is_gpukern, "copy", 0.85),
        ratio_target(run, "... at 8192x32768", "softmax", "8192x32768", is_gpukern, "copy", 0.85),
        range_target(run, "softmax at least as fast as `torch.softmax` on every case", "softmax", is_gpukern, "torch"),
        range_target(run, "softmax at least as fast as Triton's softmax on every case", "softmax", is_gpukern, "triton"),
        ratio_target(run, "softmax >= 92% of copy at 8192x16384 (issue 15)", "softmax", "8192x16384", is_gpukern, "copy", 0.92),
        ratio_target(run, "... >= 92% at 8192x32768", "softmax", "8192x32768", is_gpukern, "copy", 0.92),
        ratio_target(run, "long rows (cluster) >= 85% of copy at 8192x65536", "softmax", "8192x65536", is_gpukern, "copy", 0.85),
        ratio_target(run, "... at 1024x131072", "softmax", "1024x131072", is_gpukern, "copy", 0.85),
        ratio_target(run, "... at 1x16777216", "softmax", "1x16777216", is_gpukern, "copy", 0.85),
        range_target(run, "softmax at least as fast as torch.compile's softmax on every case", "softmax", is_gpukern, "torch_compile"),
        ratio_target(run, "`add` >= 95% of copy at 2^28", "add", "268435456", is_gpukern, "copy", 0.95),
        ratio_target(run, "`add` >= 90% of copy at 2^24", "add", "16777216", is_gpukern, "copy", 0.9),
        ratio_target(run, "`increment_by_one` >= 95% of copy at 2^28", "increment_by_one", "268435456", is_gpukern, "copy", 0.95),
        ratio_target(run, "`sum` >= 95% of copy at 2^28", "sum", "268435456", is_gpukern, "copy", 0.95),
        ratio_target(run, "`argmax` >= 95% of copy at 2^28", "argmax", "268435456", is_gpukern, "copy", 0.95),
        ratio_target(run, "`transpose` >= 90% of copy at 8192^2", "transpose", "8192x8192", is_gpukern, "copy", 0.9),
        *norm_targets(run),
    ]
    # TF32's relative error, against the f64 reference like every rel_err column.
    tf = pick(run, "matmul", "4096x4096x4096", gpukern_tf32)
    cb = pick(run, "matmul", "4096x4096x4096", "cublas_tf32")
    if tf and tf.get("rel_err") is not None:
        figure = f"{tf['impl']} {fmt_err(tf)}" + (f", cublas_tf32 {fmt_err(cb)}" if cb else "") + " at 4096^3"
        rows.append(["TF32 relative error about 1e-3", figure, "met" if tf["rel_err"] < 2e-3 else "missed"])
    # Launch overhead: wall time per call, async mode.
    lo = {(r["impl"], r.get("op"), r.get("mode")): r for r in run.by_kernel.get("launch_overhead", []) if timed(r)}
    mine, bare = lo.get(("gpukern:scalar", "add", "async")), lo.get(("cudarc", "add", "async"))
    if mine:
        us = mine["median_ms"] * 1e3
        rows.append([
            "launch: <= 5 us per call, 10,000 back-to-back adds of 1,024 elements",
            f"{us:.2f} us",
            "met" if us <= 5 else "missed",
        ])
    if mine and bare:
        q = mine["median_ms"] / bare["median_ms"]
        rows.append([
            "launch: <= 20% over a bare cudarc launch of the same kernel",
            f"{mine['median_ms'] * 1e3:.2f} vs {bare['median_ms'] * 1e3:.2f} us = {100 * (q - 1):+.0f}%",
            "met" if q <= 1.2 else "missed",
        ])
    for mode in ("async", "sync"):
        rows.append(launcher_target(lo, mode))
    rows += data_movement_targets(run)
    rows += half_targets(run)
    return "\n\n".join(
        [
            "## Targets, against this run",
            "Computed by `bench/report.py` from the records above (ratios of two records of this run).",
            table(["target", "figure in this run", "status"], rows),
        ]
    )


def targets_section() -> str:
    """`bench/targets.md` (what was tried for the missed targets, and the targets no record
    measures), if present."""
    path = os.path.join(ROOT, "bench", "targets.md")
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="JSON Lines file written by bench/run.sh")
    parser.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"), help="markdown file to write")
    parser.add_argument("--plots", default=os.path.join(ROOT, "bench", "results"), help="folder for the PNG plots")
    args = parser.parse_args()
    try:
        records = load(args.results)
    except OSError as e:
        print(f"report: cannot read {args.results}: {e}", file=sys.stderr)
        return 1
    if not records:
        print(f"report: {args.results} holds no records", file=sys.stderr)
        return 1
    run = Run(records)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    pngs = {k: os.path.relpath(p, out_dir).replace(os.sep, "/") for k, p in plots(run, args.plots).items()}
    source = os.path.relpath(os.path.abspath(args.results), out_dir).replace(os.sep, "/")
    readme = os.path.relpath(os.path.join(ROOT, "bench", "README.md"), out_dir).replace(os.sep, "/")
    sections = [header(run, source, readme), ceilings_section(run)]
    for kernel in ["add", "increment_by_one", "matmul", "softmax", "sum", "argmax", "transpose", *NORM_KERNELS]:
        sections.append(kernel_section(run, kernel, pngs.get(kernel)))
        if kernel == "matmul":
            sections.append(half_section(run))
    sections += [overhead_section(run, pngs.get("launch_overhead")), copies_section(run)]
    sections += data_movement_sections(run)
    sections += [failures_section(run)]
    sections += [spread_section(args.results), targets_table(run), targets_section()]
    text = "\n\n".join(s for s in sections if s) + "\n"
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"report: wrote {args.out}" + (f" and {len(pngs)} plots under {args.plots}" if pngs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
