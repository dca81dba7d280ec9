"""What every peer of gpukern's benchmark shares: the method (constants, budgets), the suite's
shapes and byte and flop models (read from bench/suite.json, as examples/bench/suite.rs reads
them), records and the sink that writes them, run metadata, timing (CUDA events, wall clock), the
shared context (torch, the timer, inputs and checks) and small torch helpers.

Imports nothing of the bench; the family files (peers_<family>.py, one per file of
examples/bench/) import it, and the driver (peers.py) imports those.
"""

from __future__ import annotations

import ast
import ctypes
import json
import math
import os
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

# --- The suite: bench/suite.json, which examples/bench/suite.rs reads too --------------------
SUITE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite.json")
_SUITE: dict[str, Any] | None = None


def suite() -> dict[str, Any]:
    global _SUITE
    if _SUITE is None:
        with open(SUITE_PATH, encoding="utf-8") as f:
            _SUITE = json.load(f)
    return _SUITE


def shapes(family: str, quick: bool) -> list[tuple[int, ...]]:
    """A family's shapes (`full` or `quick`), each a tuple in the order of its `dims`."""
    return [tuple(s) for s in suite()["families"][family]["quick" if quick else "full"]]


def sizes(family: str, quick: bool) -> list[int]:
    """A one-dimensional family's sizes (`n`)."""
    return [s[0] for s in shapes(family, quick)]


def temperatures() -> list[float]:
    """Softmax's inverse temperatures."""
    return list(suite()["families"]["softmax"]["temperatures"])


_EXPR_NODES = (ast.Expression, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Name, ast.Load, ast.Constant)


def evaluate(expr: str, **names: float) -> float:
    """A model expression (numbers, names, +, -, *, parentheses) with the names' values."""
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _EXPR_NODES):
            raise ValueError(f"{expr!r}: {type(node).__name__} is not allowed in a model")

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ValueError(f"{expr!r}: no value for {node.id}")
            return float(names[node.id])
        assert isinstance(node, ast.BinOp)
        a, b = value(node.left), value(node.right)
        return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b

    return value(tree)


def bytes_of(kernel: str, **names: float) -> float:
    """The minimum bytes a `kernel` record moves (the suite's model)."""
    return evaluate(suite()["models"][kernel]["bytes"], **names)


def flops_of(kernel: str, **names: float) -> float:
    """The flops of a `kernel` record (the suite's model)."""
    return evaluate(suite()["models"][kernel]["flops"], **names)


# --- Method: the same constants as examples/bench/timing.rs and data.rs -----------------------
F32_TOL = 1e-4  # largest relative error an f32 result may show
TF32_TOL = 1e-2  # TF32 keeps 10 mantissa bits: ~1e-3 is its normal error
FLUSH_BYTES = 256 << 20  # copied before each sample: > L2 (60 MB), ~150 us of GPU work
BATCH_TARGET_MS = 0.02  # kernels shorter than this are launched several times per sample
SLOW_MS = 50.0  # a launch this slow gets one warm-up and at least 3 samples
ROTATE_BYTES = 120 << 20  # the rotated buffers exceed L2 twice over...
MAX_SETS = 16  # ...with at most this many copies
SOFTMAX_RANGE = 5.0  # softmax inputs are uniform in [-5, 5)


@dataclass(frozen=True)
class Budget:
    warmup: int
    max_reps: int
    target_s: float
    max_wall_s: float
    min_reps: int


FULL = Budget(warmup=4, max_reps=100, target_s=0.4, max_wall_s=2.5, min_reps=10)
QUICK = Budget(warmup=2, max_reps=20, target_s=0.05, max_wall_s=0.5, min_reps=5)


# `--shapes`: the only softmax, matmul and attention shapes measured (as the records name them), or None.
ONLY_SHAPES: set[str] | None = None


def only(shapes: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """`shapes` restricted to `--shapes` (all of them without it)."""
    if ONLY_SHAPES is None:
        return shapes
    return [s for s in shapes if "x".join(map(str, s)) in ONLY_SHAPES]


def sets_for(working_set_bytes: int) -> int:
    """Copies of a problem's buffers to rotate among so timed launches read from DRAM."""
    if working_set_bytes <= 0:
        return 1
    return max(1, min(MAX_SETS, -(-ROTATE_BYTES // working_set_bytes)))


# --- Records ---------------------------------------------------------------------------------
def clean(value: Any) -> Any:
    """JSON has no NaN or infinity: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class Sink:
    """Writes records as they come (flushed), logs one line each, keeps them for the summary."""

    def __init__(self, path: str, meta: dict[str, str], deadline: float) -> None:
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        self.file = open(path, "w", encoding="utf-8")
        self.meta = meta
        self.deadline = deadline
        self.records: list[dict[str, Any]] = []
        self.start = time.monotonic()

    def emit(self, record: dict[str, Any]) -> None:
        record = {k: clean(v) for k, v in record.items()}
        for key, value in self.meta.items():
            record.setdefault(key, value)
        self.file.write(json.dumps(record, allow_nan=False) + "\n")
        self.file.flush()
        self.records.append(record)
        print(f"[{len(self.records):>3} {time.monotonic() - self.start:6.1f}s] {log_line(record)}", file=sys.stderr)

    def item(self, base: dict[str, Any], measure: Callable[[], dict[str, Any]]) -> None:
        """Runs `measure` (which returns the finished record); an exception is recorded on `base`."""
        if time.monotonic() > self.deadline:
            self.emit({**base, "skipped": "time budget spent"})
            return
        try:
            record = measure()
        except Exception as e:  # noqa: BLE001 - any failure of one measurement is recorded
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            record = {**base, "error": detail[:500]}
        self.emit(record)

    def close(self) -> None:
        self.file.close()


def record(kernel: str, impl: str, shape: str, **extra: Any) -> dict[str, Any]:
    return {
        "kernel": kernel,
        "impl": impl,
        "shape": shape,
        "dtype": "f32",
        "median_ms": None,
        "gbps": None,
        "tflops": None,
        "rel_err": None,
        **extra,
    }


@dataclass
class Check:
    rel_err: float
    tol: float
    ref: str = "torch_f64"

    @property
    def passed(self) -> bool:
        return math.isfinite(self.rel_err) and self.rel_err <= self.tol


def checked(rec: dict[str, Any], check: Check) -> dict[str, Any]:
    return {
        **rec,
        "rel_err": check.rel_err,
        "check": "pass" if check.passed else "fail",
        "tol": check.tol,
        "ref": check.ref,
    }


@dataclass
class Stats:
    median_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    max_ms: float
    reps: int
    batch: int
    warmup: int
    timer: str

    @staticmethod
    def of(times: list[float], batch: int, warmup: int, timer: str) -> Stats:
        if not times:
            raise ValueError("no samples")
        t = sorted(times)
        n = len(t)

        def at(q: float) -> float:
            return t[int(math.floor((n - 1) * q + 0.5))]

        median = t[n // 2] if n % 2 else 0.5 * (t[n // 2 - 1] + t[n // 2])
        return Stats(median, at(0.1), at(0.9), t[0], t[-1], n, batch, warmup, timer)


def timed(rec: dict[str, Any], stats: Stats, nbytes: float | None = None, flops: float | None = None) -> dict[str, Any]:
    s = stats.median_ms * 1e-3
    return {
        **rec,
        "median_ms": stats.median_ms,
        "gbps": nbytes / s / 1e9 if nbytes is not None else None,
        "tflops": flops / s / 1e12 if flops is not None else None,
        "p10_ms": stats.p10_ms,
        "p90_ms": stats.p90_ms,
        "min_ms": stats.min_ms,
        "max_ms": stats.max_ms,
        "reps": stats.reps,
        "batch": stats.batch,
        "warmup": stats.warmup,
        "timer": stats.timer,
    }


def per_call(rec: dict[str, Any], ms: float, calls: int) -> dict[str, Any]:
    return {**rec, "median_ms": ms, "us_per_call": ms * 1e3, "calls": calls, "stat": "mean", "timer": "wall_clock"}


def log_line(r: dict[str, Any]) -> str:
    s = f"{r['kernel']} {r['impl']} {r['shape']}"
    for key in ("t", "mode"):
        if key in r:
            s += f" {key}={r[key]}"
    if r.get("median_ms") is not None:
        ms = r["median_ms"]
        s += f": {ms * 1e3:.2f} us" if ms < 0.1 else f": {ms:.3f} ms"
        if r.get("gbps") is not None:
            s += f", {r['gbps']:.0f} GB/s"
        if r.get("tflops") is not None:
            s += f", {r['tflops']:.2f} TFLOP/s"
    else:
        s += ": not timed"
    if r.get("rel_err") is not None:
        s += f", rel_err {r['rel_err']:.1e}"
    note = r.get("error") or r.get("skipped")
    if note:
        s += f" ({note.splitlines()[-1][:160]})"
    return s


# --- Metadata --------------------------------------------------------------------------------
def git_rev() -> str:
    rev = os.environ.get("GPUKERN_GIT_REV", "").strip()
    if rev:
        return rev
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def driver_version() -> str:
    """The same string as examples/bench/record.rs: "580.159.04 (CUDA 13.0)"."""
    module = None
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            first = f.readline()
        if "Kernel Module" in first:
            # "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release ..."
            words = first.split("Kernel Module", 1)[1].split()
            module = next((w for w in words if "." in w and w.replace(".", "").isdigit()), None)
    except (OSError, IndexError):
        pass
    cuda = None
    try:
        version = ctypes.c_int(0)
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) == 0:
            cuda = f"CUDA {version.value // 1000}.{(version.value % 1000) // 10}"
    except OSError:
        pass
    if module and cuda:
        return f"{module} ({cuda})"
    return module or cuda or "unknown"


# --- Timing ----------------------------------------------------------------------------------
class Timer:
    """CUDA events on torch's current stream; every peer launches on that stream."""

    def __init__(self, torch: Any, budget: Budget) -> None:
        self.torch = torch
        self.budget = budget
        self.src = torch.zeros(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
        self.dst = torch.empty_like(self.src)
        # GPUKERN_BENCH_FLUSH=clean (the default): after the copy, read another buffer larger than
        # L2, so that the copy's last writes are written back before the start event, not during
        # the timed launches; `copy` for the copy alone (examples/bench/timing.rs).
        flush = os.environ.get("GPUKERN_BENCH_FLUSH", "") or "clean"
        if flush not in ("clean", "copy"):
            raise SystemExit(f"GPUKERN_BENCH_FLUSH={flush}: expected `clean` or `copy`")
        clean = flush == "clean"
        self.clean = torch.zeros(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda") if clean else None
        self.clean_out = torch.zeros((), dtype=torch.float32, device="cuda")
        self.timer_name = "cuda_events_clean_l2" if clean else "cuda_events"
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def _sample(self, launch: Callable[[int], Any], first: int, batch: int) -> float:
        self.dst.copy_(self.src)
        if self.clean is not None:
            self.torch.sum(self.clean, dim=0, out=self.clean_out)
        self.start.record()
        for i in range(batch):
            launch(first + i)
        self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end) / batch

    def measure(self, launch: Callable[[int], Any], max_batch: int = 4) -> Stats:
        """Times `launch(i)` (`i` counts launches, for rotating buffers); median per launch."""
        b = self.budget
        wall = time.monotonic()
        nxt = 0
        estimate = self._sample(launch, nxt, 1)
        nxt += 1
        warmup = 1
        if estimate < SLOW_MS:
            while warmup < b.warmup:
                estimate = min(estimate, self._sample(launch, nxt, 1))
                nxt += 1
                warmup += 1
        batch = 1
        if 0 < estimate < BATCH_TARGET_MS:
            batch = max(1, min(max_batch, int(BATCH_TARGET_MS / estimate)))
        min_reps = 3 if estimate >= SLOW_MS else b.min_reps
        times: list[float] = []
        gpu_s = 0.0
        while len(times) < b.max_reps:
            ms = self._sample(launch, nxt, batch)
            nxt += batch
            times.append(ms)
            gpu_s += ms * batch * 1e-3
            spent = gpu_s >= b.target_s or time.monotonic() - wall >= b.max_wall_s
            if len(times) >= min_reps and spent:
                break
        return Stats.of(times, batch, warmup, self.timer_name)


def wall_per_call(
    calls: int, warmup: int, max_s: float, call: Callable[[], Any], finish: Callable[[], Any]
) -> tuple[float, int]:
    """Mean wall ms per call over up to `calls` calls or `max_s` s; `finish` ends the timed span."""
    for _ in range(warmup):
        call()
    finish()
    start = time.perf_counter()
    done = 0
    while done < calls:
        for _ in range(min(100, calls - done)):
            call()
        done += min(100, calls - done)
        if time.perf_counter() - start >= max_s:
            break
    finish()
    return (time.perf_counter() - start) * 1e3 / done, done


def wall_median(max_reps: int, max_s: float, run: Callable[[], Any]) -> Stats:
    run()
    start = time.perf_counter()
    times: list[float] = []
    while len(times) < max_reps:
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1e3)
        if len(times) >= 3 and time.perf_counter() - start >= max_s:
            break
    return Stats.of(times, 1, 1, "wall_clock")


# --- Shared context --------------------------------------------------------------------------
class Ctx:
    """torch, the timer, the sink, inputs and references shared by every peer."""

    def __init__(self, torch: Any, sink: Sink, quick: bool) -> None:
        self.torch = torch
        self.sink = sink
        self.quick = quick
        self.timer = Timer(torch, QUICK if quick else FULL)
        self.gen = torch.Generator(device="cuda")

    def rand(self, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0) -> Any:
        """Uniform in [lo, hi), from a fresh seed."""
        self.gen.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        return self.torch.rand(shape, generator=self.gen, device="cuda", dtype=self.torch.float32) * (hi - lo) + lo

    def nan(self, shape: tuple[int, ...]) -> Any:
        """An output buffer full of NaN, so an element the kernel never writes fails the check."""
        return self.torch.full(shape, float("nan"), device="cuda", dtype=self.torch.float32)

    def check(self, out: Any, ref: Any, tol: float = F32_TOL) -> Check:
        """||out - ref|| / ||ref|| in float64 on the device (NaN if out holds a NaN)."""
        torch = self.torch
        diff = torch.linalg.vector_norm((out.double() - ref).flatten()).item()
        norm = torch.linalg.vector_norm(ref.flatten()).item()
        return Check(diff / norm if norm != 0 else diff, tol)


def matmul_ref(torch: Any, a: Any, b: Any) -> Any:
    return a.double() @ b.double()


def softmax_ref(torch: Any, x: Any, t: float) -> Any:
    return torch.softmax(x.double() * t, dim=-1)


def mm_base(kernel: str, impl: str, shape: tuple[int, int, int], **extra: Any) -> dict[str, Any]:
    m, n, k = shape
    return record(kernel, impl, f"{m}x{n}x{k}", m=m, n=n, k=k, **extra)


def mm_counts(shape: tuple[int, int, int], kernel: str = "matmul") -> tuple[float, float]:
    """The suite's minimum bytes and flops of a matrix product (`matmul`, `matmul_with_copies`)."""
    m, n, k = shape
    return bytes_of(kernel, m=m, n=n, k=k), flops_of(kernel, m=m, n=n, k=k)


def timed_check(
    ctx: Ctx,
    rec: dict[str, Any],
    run_once: Callable[[], Any],
    ref: Any,
    launch: Callable[[int], Any],
    nbytes: float | None,
    flops: float | None,
    tol: float = F32_TOL,
    max_batch: int = 4,
) -> dict[str, Any]:
    """Checks `run_once()` (the output) against `ref`; times `launch` only if it passes."""
    out = run_once()
    ctx.torch.cuda.current_stream().synchronize()
    check = ctx.check(out, ref, tol)
    rec = checked(rec, check)
    if not check.passed:
        return rec
    return timed(rec, ctx.timer.measure(launch, max_batch), nbytes, flops)


# --- PyTorch ---------------------------------------------------------------------------------
def set_tf32(torch: Any, on: bool) -> None:
    """TF32 for fp32 matmuls, through whichever API this torch has (mixing them is an error)."""
    mm = torch.backends.cuda.matmul
    if hasattr(mm, "fp32_precision"):
        mm.fp32_precision = "tf32" if on else "ieee"
    else:
        mm.allow_tf32 = on


def overhead_budget(ctx: Ctx) -> tuple[int, float]:
    return (1_000, 0.2) if ctx.quick else (10_000, 1.0)


# --- Softmax rows too long for one program (the torch, Triton and Numba peers) ----------------
TRITON_FUSED_MAX_COLS = 32768  # longer rows use the looped kernel, or the split-row kernels
# Fewer rows than this (the H200 has 132 SMs) and longer than TRITON_FUSED_MAX_COLS: one program
# per row would leave the GPU idle, so the row is split over programs (as gpukern splits it).
SPLIT_MAX_ROWS = 132


def one_long_row(rows: int, cols: int) -> bool:
    """Too few, too long rows for one program (block) per row: the case of 1 x 2^24."""
    return rows < SPLIT_MAX_ROWS and cols > TRITON_FUSED_MAX_COLS


def not_comparable(peer: str) -> str:
    """Why a one-block-per-row peer is not compared on a single very long row."""
    return (
        f"{peer} runs one block per row and has no split-row formulation; gpukern splits the row "
        "over many blocks, so this row is not a like-for-like comparison"
    )


# --- Peer libraries ----------------------------------------------------------------------------
def import_numba_cuda() -> Any:
    """numba.cuda, ready for the tutorial kernels. Each family file keeps it in a module global
    `cuda`, so that its kernels find it as a global (as in the tutorials)."""
    import numpy as np

    # numba-cuda still calls np.row_stack, which numpy 2.5 removed (TOOLCHAIN.md section 4);
    # the alias must be in place before the first kernel compiles.
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    from numba import cuda as numba_cuda

    try:  # small grids (the launch-overhead calls) warn about under-utilisation on every launch
        from numba.core.errors import NumbaPerformanceWarning

        warnings.simplefilter("ignore", NumbaPerformanceWarning)
    except ImportError:
        pass

    return numba_cuda


def allow_recompiles(torch: Any) -> None:
    """Every shape and dtype is compiled for static shapes: allow that many recompiles of one
    function (the default limit is 8)."""
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), 64))


# --- The run's summary -------------------------------------------------------------------------
def summary(records: list[dict[str, Any]]) -> str:
    header = ["kernel", "impl", "shape", "t/mode", "median", "GB/s", "TFLOP/s", "rel_err", "note"]
    rows = []
    for r in records:
        ms = r.get("median_ms")
        note = r.get("error") or r.get("skipped") or ("failed the check" if r.get("check") == "fail" else "")
        rows.append(
            [
                r["kernel"],
                r["impl"],
                r["shape"],
                " ".join(str(r[k]) for k in ("t", "mode") if k in r),
                "-" if ms is None else (f"{ms * 1e3:.2f} us" if ms < 0.1 else f"{ms:.3f} ms"),
                "-" if r.get("gbps") is None else f"{r['gbps']:.0f}",
                "-" if r.get("tflops") is None else f"{r['tflops']:.2f}",
                "-" if r.get("rel_err") is None else f"{r['rel_err']:.1e}",
                note.splitlines()[-1][:60] if note else "",
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if 4 <= i < 8 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])
