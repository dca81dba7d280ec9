"""The "Targets, against this run" table of BENCHMARKS.md (rendered by bench/report.py: each
target from records of the run, the issues' targets from report_half.py and report_movement.py)
and bench/targets.md after it.
"""

from __future__ import annotations

import os
from typing import Any

from report_common import (
    ROOT, Record, Run, fmt_err, is_default, pick, range_target, ratio_target, table, timed,
)
from report_kernels import LAUNCHER_GOAL, LAUNCHER_OP
from report_half import half_targets
from report_movement import data_movement_targets


def fast_fp32(r: Record) -> bool:
    return is_default(r) and r.get("math", "fp32") != "tf32"


def gpukern_tf32(r: Record) -> bool:
    return is_default(r) and r.get("math") == "tf32"


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


NORM_KERNELS = ["rms_norm", "layer_norm", "cross_entropy", "cross_entropy_mean"]


def dtype_of(dtype: str, want: Any) -> Any:
    """`want` (an impl name or a predicate) restricted to records of `dtype` (f32 when unset)."""
    ok = want if callable(want) else (lambda r: r["impl"] == want)
    return lambda r: r.get("dtype", "f32") == dtype and ok(r)


def f32_of(want: Any) -> Any:
    """`want` (an impl name or a predicate) restricted to f32 records."""
    return dtype_of("f32", want)


def norm_targets(run: Run) -> list[list[str]]:
    """The norms (f32 and bf16) >= 90% of copy and >= 1.0x torch.compile at 8192 x 1024..16384;
    cross-entropy per row >= 85% of copy at 8192 x 32768 and 131072."""
    rows = []
    for dtype in ("f32", "bf16"):
        for kernel in ("rms_norm", "layer_norm"):
            for cols in (1024, 4096, 16384):
                shape = f"8192x{cols}"
                mine = dtype_of(dtype, is_default)
                rows.append(ratio_target(run, f"`{kernel}` {dtype} >= 90% of copy at {shape}", kernel, shape, mine, "copy", 0.9))
                rows.append(
                    ratio_target(
                        run,
                        f"`{kernel}` {dtype} >= 1.0x torch.compile at {shape}",
                        kernel,
                        shape,
                        mine,
                        dtype_of(dtype, "torch-compile"),
                        1.0,
                    )
                )
    for cols in (32768, 131072):
        shape = f"8192x{cols}"
        rows.append(ratio_target(run, f"`cross_entropy` >= 85% of copy at {shape}", "cross_entropy", shape, is_default, "copy", 0.85))
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
        ratio_target(run, "TF32 `matmul` >= 80% of cuBLAS TF32 at 4096^3 (issue 13)", "matmul", "4096x4096x4096", gpukern_tf32, "cublas_tf32", 0.8),
        ratio_target(run, "... and at 8192^3 (issue 13)", "matmul", "8192x8192x8192", gpukern_tf32, "cublas_tf32", 0.8),
        ratio_target(run, "softmax >= 85% of copy at 8192x4096", "softmax", "8192x4096", is_default, "copy", 0.85),
        ratio_target(run, "... at 8192x8192", "softmax", "8192x8192", is_default, "copy", 0.85),
        ratio_target(run, "... at 8192x32768", "softmax", "8192x32768", is_default, "copy", 0.85),
        range_target(run, "softmax at least as fast as `torch.softmax` on every case", "softmax", is_default, "torch"),
        range_target(run, "softmax at least as fast as Triton's softmax on every case", "softmax", is_default, "triton"),
        ratio_target(run, "softmax >= 92% of copy at 8192x16384 (issue 15)", "softmax", "8192x16384", is_default, "copy", 0.92),
        ratio_target(run, "... >= 92% at 8192x32768", "softmax", "8192x32768", is_default, "copy", 0.92),
        ratio_target(run, "long rows (cluster) >= 85% of copy at 8192x65536", "softmax", "8192x65536", is_default, "copy", 0.85),
        ratio_target(run, "... at 1024x131072", "softmax", "1024x131072", is_default, "copy", 0.85),
        ratio_target(run, "... at 1x16777216", "softmax", "1x16777216", is_default, "copy", 0.85),
        range_target(run, "softmax at least as fast as torch.compile's softmax on every case", "softmax", is_default, "torch_compile"),
        ratio_target(run, "`add` >= 95% of copy at 2^28", "add", "268435456", is_default, "copy", 0.95),
        ratio_target(run, "`add` >= 90% of copy at 2^24", "add", "16777216", is_default, "copy", 0.9),
        ratio_target(run, "`increment_by_one` >= 95% of copy at 2^28", "increment_by_one", "268435456", is_default, "copy", 0.95),
        ratio_target(run, "`sum` >= 95% of copy at 2^28", "sum", "268435456", is_default, "copy", 0.95),
        ratio_target(run, "`argmax` >= 95% of copy at 2^28", "argmax", "268435456", is_default, "copy", 0.95),
        ratio_target(run, "`transpose` >= 90% of copy at 8192^2", "transpose", "8192x8192", is_default, "copy", 0.9),
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
