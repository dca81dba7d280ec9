#!/usr/bin/env python3
"""Renders a benchmark run (JSON Lines from bench/run.sh) into BENCHMARKS.md and PNG plots.

    python3 bench/report.py bench/results/latest.jsonl [--out BENCHMARKS.md] [--plots bench/results]

Runs anywhere with Python 3.9+; the plots need matplotlib (`pip install matplotlib`), and
without it the tables are still written. See bench/README.md for the schema.

The sections live beside it: report_common.py (loading, formatting, the records' order and
ceilings), report_kernels.py (the ceilings and the kernel sections), report_half.py
(bf16 / fp16 matmul), report_movement.py (issue 14's transfers, graphs, several GPUs) and
report_targets.py (the targets table).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from datetime import datetime, timezone
from typing import Any

from report_common import ROOT, Record, Run, case_key, case_label, impl_order, load, ordered, table, timed
from report_kernels import (
    LAUNCHER_OP, ceilings_section, copies_section, failures_section, kernel_section, overhead_section,
)
from report_half import half_section
from report_movement import data_movement_sections
from report_targets import NORM_KERNELS, targets_section, targets_table


MEMORY_BOUND = [
    "add", "increment_by_one", "softmax", "sum", "argmax", "sum_axis", "max_axis", "argmax_axis", "transpose",
    "rms_norm", "layer_norm", "cross_entropy", "cross_entropy_mean",
]


REPRODUCE = """\
# here (Rust toolchain): build the bench binary
cargo build --release --example bench
# on the GPU machine, from the repository root (the binary carried along; no Rust needed there):
# the whole suite in three parts, one device call each (how the committed run was made)
for part in movement first new; do bash bench/run-parts.sh $part; done
# here: tables and plots
python3 bench/report.py bench/results/latest.jsonl"""


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
            # The record file the figures below come from, unless a paragraph names another
            # (tests/figures.rs checks each figure against its file only).
            f"<!-- figures: {source} -->",
            "Every figure below was measured on one GPU next to the peers and the ceilings it is compared "
            "to, in the same device call (a run may be split into several calls on the same machine, one "
            "after the other with the same binaries: each kernel's rows, its peers and its copy ceiling "
            "come from one of them; the `measured` row gives the span). Kernels are checked against a reference before they are timed; times are "
            f"medians of CUDA-event samples after warm-up (see [bench/README.md]({readme}) for "
            "the method and the schema). Rates come from the minimum traffic (add 12 B/element, "
            "increment and softmax 8 B/element, sum and argmax 4 B/element, the axis reductions 4 B/element "
            "plus 4 B per output, transpose 8 B/element, "
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
    for kernel in [
        "add", "increment_by_one", "matmul", "softmax", "sum", "argmax", "sum_axis", "max_axis", "argmax_axis",
        "transpose", *NORM_KERNELS,
    ]:
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
