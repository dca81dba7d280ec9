"""Shared helpers of bench/report.py and its section modules: loading the records, the
predicates on them (timed, gpukern, peer, comparable), the order of the rows, formatting and
markdown tables, `Run` (a run's records by kernel, and its ceilings), and the targets that are a
ratio of two records of the run.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, TypeVar


Record = dict[str, Any]
T = TypeVar("T")


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Ceilings measured in the same run, never counted as peers.
CEILINGS = {"copy", "cublas", "cublas_tf32"}


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


# The rows of what a user's call runs, per kernel: the default algorithm's (its plan chosen per
# shape). The other gpukern rows are variants and `--plans` candidates, forced; a target is met
# or missed by the default, and a candidate that beats it is a reason to change the plan.
DEFAULT_IMPLS = {
    "matmul": {"gpukern:fast", "gpukern:tf32"},
    "matmul_half": {"gpukern:wgmma_ws", "gpukern:wgmma_ws_f32out"},
    "softmax": {"gpukern:one-pass"},
    "rms_norm": {"gpukern:in-registers"},
    "layer_norm": {"gpukern:in-registers"},
    "cross_entropy": {"gpukern:warp-8k"},
    "cross_entropy_mean": {"gpukern:warp-8k"},
    "add": {"gpukern:vec4"},
    "increment_by_one": {"gpukern:vec4_x8"},
    "sum": {"gpukern:vec4"},
    "argmax": {"gpukern:vec4_lanes_u8"},
    "transpose": {"gpukern:tiled_64"},
}


def is_default(r: Record) -> bool:
    """A row of the default call (`DEFAULT_IMPLS`); for a kernel not listed, any gpukern row."""
    defaults = DEFAULT_IMPLS.get(str(r["kernel"]))
    return r["impl"] in defaults if defaults is not None else is_gpukern(r)


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
    type other than f32, e.g. the norms' bf16; the axis of an axis reduction, from its impl's
    `:rows` / `:cols` suffix)."""
    params = [f"t={r['t']:g}"] if r.get("t") is not None else []
    if str(r.get("kernel", "")).endswith("_axis") and ":" in str(r.get("impl", "")):
        params.append("Axis(1)" if str(r["impl"]).endswith(":rows") else "Axis(0)")
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


def unmeasured(label: str) -> list[str]:
    return [label, "not measured in this run", "unknown"]
