#!/usr/bin/env python3
"""The peers of gpukern's benchmark: PyTorch, Triton and Numba CUDA.

Same shapes, same method and same JSON Lines schema as examples/bench.rs (see
bench/README.md): random inputs fresh for every check, a check against a float64 reference
(computed on the device) before anything is timed, CUDA events around the launches after
warm-up, a large device-to-device copy before every sample (it evicts L2 and keeps the GPU
busy while the host queues the launches), rotation among several input buffers when the
data fits in L2, the median over the samples.

    PYTHONUNBUFFERED=1 python3 bench/peers.py --out bench/results/peers.jsonl [--quick]
        [--peers torch,triton,numba] [--budget-s 330]

Each peer, and each measurement inside it, is wrapped: a failure is recorded (median_ms
null, "error") and the run goes on. Measurements left when the time budget is spent are
recorded as skipped.
"""

from __future__ import annotations

import argparse
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
from datetime import datetime, timezone
from collections.abc import Callable
from typing import Any

# --- Method: the same constants as examples/bench/timing.rs and data.rs -----------------------
F32_TOL = 1e-4  # largest relative error an f32 result may show
TF32_TOL = 1e-2  # TF32 keeps 10 mantissa bits: ~1e-3 is its normal error
FLUSH_BYTES = 256 << 20  # copied before each sample: > L2 (60 MB), ~150 us of GPU work
BATCH_TARGET_MS = 0.02  # kernels shorter than this are launched several times per sample
SLOW_MS = 50.0  # a launch this slow gets one warm-up and at least 3 samples
ROTATE_BYTES = 120 << 20  # the rotated buffers exceed L2 twice over...
MAX_SETS = 16  # ...with at most this many copies
TEMPERATURES = (1.0, 0.5)
SOFTMAX_RANGE = 5.0  # softmax inputs are uniform in [-5, 5)
NUMBA_BLOCK = 256  # threads per block of the Numba add and softmax
NUMBA_TPB = 16  # the Numba tutorial's tile: 16 x 16 threads
NUMBA_NAIVE_MAX_FLOPS = 2 * 4096**3 * 1.05  # naive Numba matmul above 4096^3: too slow


@dataclass(frozen=True)
class Budget:
    warmup: int
    max_reps: int
    target_s: float
    max_wall_s: float
    min_reps: int


FULL = Budget(warmup=4, max_reps=100, target_s=0.4, max_wall_s=2.5, min_reps=10)
QUICK = Budget(warmup=2, max_reps=20, target_s=0.05, max_wall_s=0.5, min_reps=5)


def add_sizes(quick: bool) -> list[int]:
    return [1 << 20] if quick else [1 << 20, 1 << 24, 1 << 28]


def matmul_shapes(quick: bool) -> list[tuple[int, int, int]]:
    """(m, n, k): C (m x n) = A (m x k) @ B (k x n)."""
    if quick:
        return [(512, 512, 512)]
    square = [(d, d, d) for d in (512, 1024, 2048, 4096, 8192)]
    return square + [(1000, 1000, 1000), (4096, 4096, 64), (64, 4096, 4096), (1, 4096, 4096), (4097, 4095, 4093)]


def softmax_shapes(quick: bool) -> list[tuple[int, int]]:
    if quick:
        return [(8192, 128)]
    return [(8192, c) for c in (128, 1024, 4096, 8192, 32768)] + [(8192, 65536), (1024, 131072), (1, 1 << 24)]


def copies_shapes(quick: bool) -> list[tuple[int, int, int]]:
    return [(1024, 1024, 1024)] if quick else [(1024, 1024, 1024), (4096, 4096, 4096)]


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
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def _sample(self, launch: Callable[[int], Any], first: int, batch: int) -> float:
        self.dst.copy_(self.src)
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
        return Stats.of(times, batch, warmup, "cuda_events")


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


def mm_counts(shape: tuple[int, int, int]) -> tuple[float, float]:
    m, n, k = shape
    return 4.0 * (m * k + k * n + m * n), 2.0 * m * n * k


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


def peer_torch(ctx: Ctx) -> None:
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__

    for n in add_sizes(ctx.quick):
        base = record("copy", "torch", str(n), n=n, version=version, call="y.copy_(x)")

        def copy(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = sets_for(8 * n)
            xs = [ctx.rand((n,)) for _ in range(sets)]
            ys = [ctx.nan((n,)) for _ in range(sets)]
            return timed_check(
                ctx,
                {**base, "sets": sets},
                lambda: ys[0].copy_(xs[0]),
                xs[0].double(),
                lambda i: ys[i % sets].copy_(xs[i % sets]),
                8.0 * n,
                None,
            )

        sink.item(base, copy)

    for n in add_sizes(ctx.quick):
        base = record("add", "torch", str(n), n=n, version=version, call="torch.add(a, b, out=c)")

        def add(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = sets_for(12 * n)
            a, b = ctx.rand((n,)), ctx.rand((n,))
            bufs = [(a.clone(), b.clone(), ctx.nan((n,))) for _ in range(sets)]
            ref = a.double() + b.double()

            def launch(i: int) -> Any:
                x, y, z = bufs[i % sets]
                return torch.add(x, y, out=z)

            return timed_check(ctx, {**base, "sets": sets}, lambda: launch(0), ref, launch, 12.0 * n, None)

        sink.item(base, add)

    for shape in matmul_shapes(ctx.quick):
        for tf32 in (False, True):
            impl = "torch_tf32" if tf32 else "torch"
            base = mm_base(
                "matmul",
                impl,
                shape,
                math="tf32" if tf32 else "fp32",
                version=version,
                call="torch.matmul(a, b, out=c)",
            )

            def matmul(
                shape: tuple[int, int, int] = shape, tf32: bool = tf32, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                m, n, k = shape
                nbytes, flops = mm_counts(shape)
                sets = sets_for(int(nbytes))
                a, b = ctx.rand((m, k)), ctx.rand((k, n))
                ref = matmul_ref(torch, a, b)
                bufs = [(a.clone(), b.clone(), ctx.nan((m, n))) for _ in range(sets)]

                def launch(i: int) -> Any:
                    x, y, z = bufs[i % sets]
                    return torch.matmul(x, y, out=z)

                set_tf32(torch, tf32)
                try:
                    return timed_check(
                        ctx,
                        {**base, "sets": sets},
                        lambda: launch(0),
                        ref,
                        launch,
                        nbytes,
                        flops,
                        TF32_TOL if tf32 else F32_TOL,
                    )
                finally:
                    set_tf32(torch, False)

            sink.item(base, matmul)

    for rows, cols in softmax_shapes(ctx.quick):
        for t in TEMPERATURES:
            # At t = 1 torch runs its one fused kernel; at other t it scales first, as its users do.
            call = "torch.softmax(x, dim=-1)" if t == 1.0 else "torch.softmax(t * x, dim=-1)"
            base = record("softmax", "torch", f"{rows}x{cols}", rows=rows, cols=cols, t=t, version=version, call=call)
            if one_long_row(rows, cols):
                base.update(comparable=False, not_comparable=not_comparable("torch.softmax"))

            def softmax(
                rows: int = rows, cols: int = cols, t: float = t, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                sets = sets_for(8 * rows * cols)
                x = ctx.rand((rows, cols), -SOFTMAX_RANGE, SOFTMAX_RANGE)
                xs = [x.clone() for _ in range(sets)]
                ref = softmax_ref(torch, x, t)

                def launch(i: int) -> Any:
                    xi = xs[i % sets]
                    return torch.softmax(xi if t == 1.0 else t * xi, dim=-1)

                return timed_check(ctx, {**base, "sets": sets}, lambda: launch(0), ref, launch, 8.0 * rows * cols, None)

            sink.item(base, softmax)

    torch_overhead(ctx, version)
    torch_copies(ctx, version)


def overhead_budget(ctx: Ctx) -> tuple[int, float]:
    return (1_000, 0.2) if ctx.quick else (10_000, 1.0)


def torch_overhead(ctx: Ctx, version: str) -> None:
    """Wall time per tiny call: async (back-to-back, one sync), sync (a sync per call), and
    ndarray (from numpy arrays on the host, result back to numpy)."""
    torch, sink = ctx.torch, ctx.sink
    calls, max_s = overhead_budget(ctx)
    sync = torch.cuda.synchronize
    n, d = 1024, 32
    a, b = ctx.rand((n,)), ctx.rand((n,))
    an, bn = a.cpu().numpy(), b.cpu().numpy()
    ma, mb = ctx.rand((d, d)), ctx.rand((d, d))
    man, mbn = ma.cpu().numpy(), mb.cpu().numpy()
    # Outputs allocated once: the async and sync rows of every library (gpukern's `*_into`,
    # Numba's device arrays, these) write into an existing buffer and allocate nothing per call;
    # the ndarray rows all allocate their result, as host-to-host calls must.
    c, mc = ctx.nan((n,)), ctx.nan((d, d))

    def add_into() -> Any:
        return torch.add(a, b, out=c)

    def mm_into() -> Any:
        return torch.matmul(ma, mb, out=mc)

    def add_host() -> Any:
        return (torch.from_numpy(an).cuda() + torch.from_numpy(bn).cuda()).cpu().numpy()

    def mm_host() -> Any:
        return (torch.from_numpy(man).cuda() @ torch.from_numpy(mbn).cuda()).cpu().numpy()

    def synced(f: Callable[[], Any]) -> Callable[[], Any]:
        def call() -> Any:
            out = f()
            sync()
            return out

        return call

    add_ref, mm_ref = a.double() + b.double(), matmul_ref(torch, ma, mb)
    mm_label = f"{d}x{d}x{d}"
    # (op, shape, mode, one call returning its output, reference)
    cases: list[tuple[str, str, str, Callable[[], Any], Any]] = [
        ("add", str(n), "async", add_into, add_ref),
        ("add", str(n), "sync", synced(add_into), add_ref),
        ("add", str(n), "ndarray", add_host, add_ref),
        ("matmul", mm_label, "async", mm_into, mm_ref),
        ("matmul", mm_label, "sync", synced(mm_into), mm_ref),
        ("matmul", mm_label, "ndarray", mm_host, mm_ref),
    ]
    for op, label, mode, call, ref in cases:
        base = record(
            "launch_overhead",
            "torch",
            label,
            op=op,
            mode=mode,
            calls_planned=calls,
            version=version,
            allocates="per call" if mode == "ndarray" else "no (out=)",
        )

        def run(call: Callable[[], Any] = call, ref: Any = ref, base: dict[str, Any] = base) -> dict[str, Any]:
            set_tf32(torch, False)
            out = call()
            sync()
            check = ctx.check(torch.as_tensor(out).to("cuda"), ref)
            if not check.passed:
                return checked(base, check)
            ms, done = wall_per_call(calls, 100, max_s, call, sync)
            return per_call(checked(base, check), ms, done)

        sink.item(base, run)


def torch_copies(ctx: Ctx, version: str) -> None:
    """torch.matmul from numpy arrays (upload, multiply, download) against device-resident data."""
    torch, sink = ctx.torch, ctx.sink
    reps, max_s = (5, 0.3) if ctx.quick else (20, 1.5)
    sync = torch.cuda.synchronize
    for shape in copies_shapes(ctx.quick):
        for mode in ("copies", "resident"):
            base = mm_base("matmul_with_copies", "torch", shape, mode=mode, math="fp32", version=version)

            def measure(
                shape: tuple[int, int, int] = shape, mode: str = mode, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                m, n, k = shape
                nbytes, flops = mm_counts(shape)
                a, b = ctx.rand((m, k)), ctx.rand((k, n))
                ref = matmul_ref(torch, a, b)
                an, bn = a.cpu().numpy(), b.cpu().numpy()
                c = ctx.nan((m, n))

                def copies() -> Any:
                    return (torch.from_numpy(an).cuda() @ torch.from_numpy(bn).cuda()).cpu().numpy()

                def resident() -> Any:
                    torch.matmul(a, b, out=c)
                    sync()
                    return c

                run = copies if mode == "copies" else resident
                set_tf32(torch, False)
                check = ctx.check(torch.as_tensor(run()).to("cuda"), ref)
                if not check.passed:
                    return checked(base, check)
                return timed(checked(base, check), wall_median(reps, max_s, run), nbytes, flops)

            sink.item(base, measure)


# --- Triton ----------------------------------------------------------------------------------
def build_triton(triton: Any, tl: Any) -> dict[str, Any]:
    """Our Triton kernels, written in the style of Triton's tutorials."""

    @triton.jit
    def softmax_fused(x_ptr, y_ptr, t, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
        # One program per row, the whole row in registers: x is read once and y written once
        # (8 bytes per element), the minimum.
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        inside = cols < n_cols
        x = tl.load(x_ptr + row * x_stride + cols, mask=inside, other=0.0)
        z = tl.where(inside, x * t, -float("inf"))
        e = tl.exp(z - tl.max(z, axis=0))
        tl.store(y_ptr + row * y_stride + cols, e / tl.sum(e, axis=0), mask=inside)

    @triton.jit
    def softmax_split_stats(x_ptr, m_ptr, s_ptr, t, n_cols, x_stride, chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
        # Grid (chunks, rows): program (c, row) reduces columns [c * CHUNK, (c + 1) * CHUNK) of
        # its row to a running max and a sum of exp rescaled to it (online softmax).
        c = tl.program_id(0)
        row = tl.program_id(1).to(tl.int64)
        x_row = x_ptr + row * x_stride
        run_max = tl.full([BLOCK], -float("inf"), tl.float32)
        run_sum = tl.zeros([BLOCK], tl.float32)
        for start in range(0, CHUNK, BLOCK):
            cols = c * CHUNK + start + tl.arange(0, BLOCK)
            inside = cols < n_cols
            z = tl.where(inside, tl.load(x_row + cols, mask=inside, other=0.0) * t, -float("inf"))
            new_max = tl.maximum(run_max, z)
            rescale = tl.where(new_max == -float("inf"), 0.0, tl.exp(run_max - new_max))
            run_sum = run_sum * rescale + tl.where(inside, tl.exp(z - new_max), 0.0)
            run_max = new_max
        part_max = tl.max(run_max, axis=0)
        part_sum = tl.sum(tl.where(run_max == -float("inf"), 0.0, run_sum * tl.exp(run_max - part_max)), axis=0)
        tl.store(m_ptr + row * chunks + c, part_max)
        tl.store(s_ptr + row * chunks + c, part_sum)

    @triton.jit
    def softmax_split_norm(
        x_ptr, y_ptr, m_ptr, s_ptr, t, n_cols, x_stride, y_stride, chunks,
        CHUNK: tl.constexpr, BLOCK: tl.constexpr, PARTS: tl.constexpr,
    ):
        # Grid (chunks, rows): every program combines its row's partials (PARTS >= chunks) into
        # the row's max and total, then writes its chunk. x is read twice: 12 bytes per element.
        c = tl.program_id(0)
        row = tl.program_id(1).to(tl.int64)
        p = tl.arange(0, PARTS)
        have = p < chunks
        ms = tl.load(m_ptr + row * chunks + p, mask=have, other=-float("inf"))
        ss = tl.load(s_ptr + row * chunks + p, mask=have, other=0.0)
        row_max = tl.max(ms, axis=0)
        total = tl.sum(tl.where(ms == -float("inf"), 0.0, ss * tl.exp(ms - row_max)), axis=0)
        x_row = x_ptr + row * x_stride
        y_row = y_ptr + row * y_stride
        for start in range(0, CHUNK, BLOCK):
            cols = c * CHUNK + start + tl.arange(0, BLOCK)
            inside = cols < n_cols
            z = tl.load(x_row + cols, mask=inside, other=0.0) * t
            tl.store(y_row + cols, tl.exp(z - row_max) / total, mask=inside)

    @triton.jit
    def softmax_looped(x_ptr, y_ptr, t, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
        # Rows too long for registers: pass 1 keeps a running max and a sum rescaled to it
        # (online softmax), pass 2 writes. x is read twice: 12 bytes per element.
        row = tl.program_id(0).to(tl.int64)
        x_row = x_ptr + row * x_stride
        y_row = y_ptr + row * y_stride
        run_max = tl.full([BLOCK], -float("inf"), tl.float32)
        run_sum = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            inside = cols < n_cols
            z = tl.where(inside, tl.load(x_row + cols, mask=inside, other=0.0) * t, -float("inf"))
            new_max = tl.maximum(run_max, z)
            rescale = tl.where(new_max == -float("inf"), 0.0, tl.exp(run_max - new_max))
            run_sum = run_sum * rescale + tl.where(inside, tl.exp(z - new_max), 0.0)
            run_max = new_max
        row_max = tl.max(run_max, axis=0)
        total = tl.sum(tl.where(run_max == -float("inf"), 0.0, run_sum * tl.exp(run_max - row_max)), axis=0)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            inside = cols < n_cols
            z = tl.load(x_row + cols, mask=inside, other=0.0) * t
            tl.store(y_row + cols, tl.exp(z - row_max) / total, mask=inside)

    @triton.jit
    def matmul(
        a_ptr,
        b_ptr,
        c_ptr,
        M,
        N,
        K,
        stride_am,
        stride_ak,
        stride_bk,
        stride_bn,
        stride_cm,
        stride_cn,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        GROUP_M: tl.constexpr,
        PRECISION: tl.constexpr,
    ):
        # One program per BM x BN tile of C, walking K in steps of BK. Programs are numbered so
        # that GROUP_M consecutive ones share a column of B tiles, which then stay in L2.
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BM)
        tiles_n = tl.cdiv(N, BN)
        per_group = GROUP_M * tiles_n
        first_m = (pid // per_group) * GROUP_M
        group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (pid % per_group) % group_rows
        pid_n = (pid % per_group) // group_rows
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
        b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
            b = tl.load(b_ptrs, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
            a_ptrs += BK * stride_ak
            b_ptrs += BK * stride_bk
        c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
        tl.store(c_ptrs, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    return {
        "softmax_fused": softmax_fused,
        "softmax_looped": softmax_looped,
        "softmax_split_stats": softmax_split_stats,
        "softmax_split_norm": softmax_split_norm,
        "matmul": matmul,
    }


# Tile configurations tried per shape (BM, BN, BK, GROUP_M, num_warps, num_stages): a small
# fixed set instead of triton.autotune, so the tuning time stays bounded and visible.
TRITON_MATMUL_CONFIGS = [
    (128, 128, 32, 8, 8, 3),
    (128, 64, 32, 8, 8, 3),
    (64, 64, 32, 8, 4, 4),
]
TRITON_FUSED_MAX_COLS = 32768  # longer rows use the looped kernel, or the split-row kernels
# Fewer rows than this (the H200 has 132 SMs) and longer than TRITON_FUSED_MAX_COLS: one program
# per row would leave the GPU idle, so the row is split over programs (as gpukern splits it).
SPLIT_MAX_ROWS = 132
SPLIT_CHUNK = 16384  # columns per program of the split-row kernels (2^24 columns: 1024 programs)
SPLIT_BLOCK = 2048  # columns per step inside a program


def one_long_row(rows: int, cols: int) -> bool:
    """Too few, too long rows for one program (block) per row: the case of 1 x 2^24."""
    return rows < SPLIT_MAX_ROWS and cols > TRITON_FUSED_MAX_COLS


def not_comparable(peer: str) -> str:
    """Why a one-block-per-row peer is not compared on a single very long row."""
    return (
        f"{peer} runs one block per row and has no split-row formulation; gpukern splits the row "
        "over many blocks, so this row is not a like-for-like comparison"
    )


def split_softmax_py(row: list[float], t: float, chunk: int) -> list[float]:
    """The split-row softmax of the Triton kernels in plain Python (for --selftest): per chunk a
    max and a sum of exp relative to it, then the row's max and total from the partials, then
    every element normalised."""
    parts = []
    for start in range(0, len(row), chunk):
        z = [t * v for v in row[start : start + chunk]]
        m = max(z)
        parts.append((m, sum(math.exp(v - m) for v in z)))
    row_max = max(m for m, _ in parts)
    total = sum(s * math.exp(m - row_max) for m, s in parts)
    return [math.exp(t * v - row_max) / total for v in row]


def softmax_warps(block: int) -> int:
    return 4 if block < 2048 else 8 if block < 4096 else 16 if block < 16384 else 32


def peer_triton(ctx: Ctx) -> None:
    import triton
    import triton.language as tl

    torch, sink = ctx.torch, ctx.sink
    version = triton.__version__
    k = build_triton(triton, tl)

    for rows, cols in softmax_shapes(ctx.quick):
        fused = cols <= TRITON_FUSED_MAX_COLS
        split = one_long_row(rows, cols)
        block = triton.next_power_of_2(cols) if fused else SPLIT_BLOCK if split else 4096
        warps = softmax_warps(block) if fused else 8 if split else 16
        kernel = k["softmax_fused"] if fused else k["softmax_looped"]
        chunks = triton.cdiv(cols, SPLIT_CHUNK)
        parts = triton.next_power_of_2(chunks)
        for t in TEMPERATURES:
            base = record(
                "softmax",
                "triton",
                f"{rows}x{cols}",
                rows=rows,
                cols=cols,
                t=t,
                version=version,
                variant="fused" if fused else "split_row" if split else "looped",
                block=block,
                num_warps=warps,
                **({"chunk": SPLIT_CHUNK, "programs_per_row": chunks} if split else {}),
            )

            def softmax(
                rows: int = rows,
                cols: int = cols,
                t: float = t,
                kernel: Any = kernel,
                block: int = block,
                warps: int = warps,
                base: dict[str, Any] = base,
            ) -> dict[str, Any]:
                sets = sets_for(8 * rows * cols)
                x = ctx.rand((rows, cols), -SOFTMAX_RANGE, SOFTMAX_RANGE)
                bufs = [(x.clone(), ctx.nan((rows, cols))) for _ in range(sets)]
                ref = softmax_ref(torch, x, t)
                # The split-row kernels' partial maxima and sums, one per program.
                pm = torch.empty((rows, chunks), dtype=torch.float32, device="cuda")
                ps = torch.empty_like(pm)

                def launch(i: int) -> Any:
                    xi, yi = bufs[i % sets]
                    if split:
                        grid = (chunks, rows)
                        stats, norm = k["softmax_split_stats"], k["softmax_split_norm"]
                        stats[grid](xi, pm, ps, t, cols, xi.stride(0), chunks, CHUNK=SPLIT_CHUNK, BLOCK=block, num_warps=warps)
                        norm[grid](
                            xi, yi, pm, ps, t, cols, xi.stride(0), yi.stride(0), chunks,
                            CHUNK=SPLIT_CHUNK, BLOCK=block, PARTS=parts, num_warps=warps,
                        )
                    else:
                        kernel[(rows,)](xi, yi, t, cols, xi.stride(0), yi.stride(0), BLOCK=block, num_warps=warps)
                    return yi

                return timed_check(ctx, {**base, "sets": sets}, lambda: launch(0), ref, launch, 8.0 * rows * cols, None)

            sink.item(base, softmax)

    for shape in matmul_shapes(ctx.quick):
        for precision in ("ieee", "tf32"):
            impl = "triton_tf32" if precision == "tf32" else "triton"
            base = mm_base(
                "matmul",
                impl,
                shape,
                math="tf32" if precision == "tf32" else "fp32",
                version=version,
                input_precision=precision,
            )

            def matmul(
                shape: tuple[int, int, int] = shape, precision: str = precision, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                m, n, kk = shape
                nbytes, flops = mm_counts(shape)
                sets = sets_for(int(nbytes))
                a, b = ctx.rand((m, kk)), ctx.rand((kk, n))
                ref = matmul_ref(torch, a, b)
                bufs = [(a.clone(), b.clone(), ctx.nan((m, n))) for _ in range(sets)]
                tol = TF32_TOL if precision == "tf32" else F32_TOL

                def launcher(cfg: tuple[int, ...]) -> Callable[[int], Any]:
                    bm, bn, bk, group, warps, stages = cfg
                    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)

                    def launch(i: int) -> Any:
                        x, y, z = bufs[i % sets]
                        k["matmul"][grid](
                            x,
                            y,
                            z,
                            m,
                            n,
                            kk,
                            x.stride(0),
                            x.stride(1),
                            y.stride(0),
                            y.stride(1),
                            z.stride(0),
                            z.stride(1),
                            BM=bm,
                            BN=bn,
                            BK=bk,
                            GROUP_M=group,
                            PRECISION=precision,
                            num_warps=warps,
                            num_stages=stages,
                        )
                        return z

                    return launch

                # Pick the fastest configuration that compiles and passes the check, with short timing.
                best: tuple[float, tuple[int, ...]] | None = None
                tried: dict[str, Any] = {}
                saved = ctx.timer.budget
                ctx.timer.budget = Budget(warmup=2, max_reps=10, target_s=0.05, max_wall_s=0.5, min_reps=3)
                try:
                    for cfg in TRITON_MATMUL_CONFIGS:
                        name = "BM{}-BN{}-BK{}-G{}-w{}-s{}".format(*cfg)
                        try:
                            launch = launcher(cfg)
                            out = launch(0)
                            torch.cuda.current_stream().synchronize()
                            check = ctx.check(out, ref, tol)
                            if not check.passed:
                                tried[name] = f"failed the check: rel_err {check.rel_err:.2e}"
                                continue
                            ms = ctx.timer.measure(launch).median_ms
                            tried[name] = ms
                            if best is None or ms < best[0]:
                                best = (ms, cfg)
                        except Exception as e:  # noqa: BLE001 - a configuration may not fit
                            tried[name] = f"error: {str(e).splitlines()[0][:120] if str(e) else type(e).__name__}"
                finally:
                    ctx.timer.budget = saved
                rec = {**base, "sets": sets, "configs_tried": tried}
                if best is None:
                    return {**rec, "error": "no configuration compiled and passed the check"}
                chosen = best[1]
                rec["config"] = "BM{}-BN{}-BK{}-G{}-w{}-s{}".format(*chosen)
                launch = launcher(chosen)
                return timed_check(ctx, rec, lambda: launch(0), ref, launch, nbytes, flops, tol)

            sink.item(base, matmul)


# --- Numba CUDA ------------------------------------------------------------------------------
# numba.cuda once imported; a module global, so that the kernels below find it as a global (as
# in the tutorials) and Numba's CUDA simulator can stand in for it.
cuda: Any = None


def import_numba_cuda() -> Any:
    global cuda
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

    cuda = numba_cuda
    return cuda


def build_numba() -> dict[str, Any]:
    """The Numba documentation's tutorial kernels, in their style."""
    from numba import float32

    tpb = NUMBA_TPB  # compile-time constants for the shared arrays
    block = NUMBA_BLOCK

    @cuda.jit
    def add(a, b, c):
        # One thread per element.
        i = cuda.grid(1)
        if i < c.size:
            c[i] = a[i] + b[i]

    @cuda.jit
    def matmul_naive(A, B, C):
        # The tutorial's first matmul: one thread per element of C, x walking rows.
        i, j = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            tmp = float32(0.0)
            for kk in range(A.shape[1]):
                tmp += A[i, kk] * B[kk, j]
            C[i, j] = tmp

    @cuda.jit
    def matmul_tiled(A, B, C):
        # The tutorial's shared-memory matmul: 16 x 16 tiles of A and B staged in shared
        # memory, zero-padded at the edges so any shape works.
        sA = cuda.shared.array(shape=(tpb, tpb), dtype=float32)
        sB = cuda.shared.array(shape=(tpb, tpb), dtype=float32)
        x, y = cuda.grid(2)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tmp = float32(0.0)
        for i in range((A.shape[1] + tpb - 1) // tpb):
            sA[ty, tx] = 0
            sB[ty, tx] = 0
            if y < A.shape[0] and tx + i * tpb < A.shape[1]:
                sA[ty, tx] = A[y, tx + i * tpb]
            if x < B.shape[1] and ty + i * tpb < B.shape[0]:
                sB[ty, tx] = B[ty + i * tpb, x]
            cuda.syncthreads()
            for j in range(tpb):
                tmp += sA[ty, j] * sB[j, tx]
            cuda.syncthreads()
        if y < C.shape[0] and x < C.shape[1]:
            C[y, x] = tmp

    @cuda.jit
    def softmax_block_reduce(x, y, t):
        # One block per row: a block-wide max (shared-memory tree reduction), a block-wide sum
        # of exponentials, then the normalised write. x is read three times.
        row = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        cols = x.shape[1]
        buf = cuda.shared.array(shape=block, dtype=float32)
        mx = float32(-math.inf)
        for j in range(tid, cols, block):
            mx = max(mx, t * x[row, j])
        buf[tid] = mx
        cuda.syncthreads()
        s = block // 2
        while s > 0:
            if tid < s:
                buf[tid] = max(buf[tid], buf[tid + s])
            cuda.syncthreads()
            s //= 2
        mx = buf[0]
        cuda.syncthreads()
        acc = float32(0.0)
        for j in range(tid, cols, block):
            acc += math.exp(t * x[row, j] - mx)
        buf[tid] = acc
        cuda.syncthreads()
        s = block // 2
        while s > 0:
            if tid < s:
                buf[tid] += buf[tid + s]
            cuda.syncthreads()
            s //= 2
        inv = float32(1.0) / buf[0]
        for j in range(tid, cols, block):
            y[row, j] = math.exp(t * x[row, j] - mx) * inv

    return {"add": add, "matmul_naive": matmul_naive, "matmul_tiled": matmul_tiled, "softmax_block_reduce": softmax_block_reduce}


def numba_matmul_grid(kind: str, m: int, n: int) -> tuple[tuple[int, int], tuple[int, int]]:
    t = NUMBA_TPB
    if kind == "naive":  # x walks rows of C
        return ((m + t - 1) // t, (n + t - 1) // t), (t, t)
    return ((n + t - 1) // t, (m + t - 1) // t), (t, t)


def peer_numba(ctx: Ctx) -> None:
    import numpy as np

    import_numba_cuda()
    import numba

    torch, sink = ctx.torch, ctx.sink
    version = numba.__version__
    k = build_numba()
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    arr = cuda.as_cuda_array

    for n in add_sizes(ctx.quick):
        base = record("add", "numba", str(n), n=n, version=version, variant="add")

        def add(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = sets_for(12 * n)
            a, b = ctx.rand((n,)), ctx.rand((n,))
            ts = [(a.clone(), b.clone(), ctx.nan((n,))) for _ in range(sets)]
            bufs = [tuple(arr(t) for t in s) for s in ts]
            grid = (n + NUMBA_BLOCK - 1) // NUMBA_BLOCK

            def launch(i: int) -> Any:
                x, y, z = bufs[i % sets]
                k["add"][grid, NUMBA_BLOCK, stream](x, y, z)
                return ts[i % sets][2]

            return timed_check(
                ctx,
                {**base, "sets": sets},
                lambda: launch(0),
                a.double() + b.double(),
                launch,
                12.0 * n,
                None,
                max_batch=1,
            )

        sink.item(base, add)

    for shape in matmul_shapes(ctx.quick):
        for kind in ("naive", "tiled"):
            base = mm_base("matmul", f"numba:{kind}", shape, math="fp32", version=version, variant=kind)
            if kind == "naive" and mm_counts(shape)[1] > NUMBA_NAIVE_MAX_FLOPS:
                sink.emit({**base, "skipped": "naive Numba matmul above 4096^3 takes over a second per run"})
                continue

            def matmul(
                shape: tuple[int, int, int] = shape, kind: str = kind, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                m, n, kk = shape
                nbytes, flops = mm_counts(shape)
                sets = sets_for(int(nbytes))
                a, b = ctx.rand((m, kk)), ctx.rand((kk, n))
                ts = [(a.clone(), b.clone(), ctx.nan((m, n))) for _ in range(sets)]
                bufs = [tuple(arr(t) for t in s) for s in ts]
                grid, blk = numba_matmul_grid(kind, m, n)
                fn = k[f"matmul_{kind}"]

                def launch(i: int) -> Any:
                    x, y, z = bufs[i % sets]
                    fn[grid, blk, stream](x, y, z)
                    return ts[i % sets][2]

                return timed_check(
                    ctx,
                    {**base, "sets": sets},
                    lambda: launch(0),
                    matmul_ref(torch, a, b),
                    launch,
                    nbytes,
                    flops,
                    max_batch=1,
                )

            sink.item(base, matmul)

    for rows, cols in softmax_shapes(ctx.quick):
        for t in TEMPERATURES:
            base = record(
                "softmax",
                "numba",
                f"{rows}x{cols}",
                rows=rows,
                cols=cols,
                t=t,
                version=version,
                variant="block_reduction",
            )
            if one_long_row(rows, cols):
                base.update(comparable=False, not_comparable=not_comparable("the Numba tutorial softmax"))

            def softmax(
                rows: int = rows, cols: int = cols, t: float = t, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                sets = sets_for(8 * rows * cols)
                x = ctx.rand((rows, cols), -SOFTMAX_RANGE, SOFTMAX_RANGE)
                ts = [(x.clone(), ctx.nan((rows, cols))) for _ in range(sets)]
                bufs = [tuple(arr(t) for t in s) for s in ts]
                tf = np.float32(t)

                def launch(i: int) -> Any:
                    xi, yi = bufs[i % sets]
                    k["softmax_block_reduce"][rows, NUMBA_BLOCK, stream](xi, yi, tf)
                    return ts[i % sets][1]

                return timed_check(
                    ctx,
                    {**base, "sets": sets},
                    lambda: launch(0),
                    softmax_ref(torch, x, t),
                    launch,
                    8.0 * rows * cols,
                    None,
                    max_batch=1,
                )

            sink.item(base, softmax)

    # Wall time per tiny call, as for torch; "ndarray" passes host numpy arrays, which Numba
    # copies to the device and back around the launch.
    calls, max_s = overhead_budget(ctx)
    n, d = 1024, 32
    a, b, c = ctx.rand((n,)), ctx.rand((n,)), ctx.nan((n,))
    ma, mb, mc = ctx.rand((d, d)), ctx.rand((d, d)), ctx.nan((d, d))
    da, db, dc, dma, dmb, dmc = (arr(t) for t in (a, b, c, ma, mb, mc))
    an, bn, cn = a.cpu().numpy(), b.cpu().numpy(), np.empty(n, np.float32)
    man, mbn, mcn = ma.cpu().numpy(), mb.cpu().numpy(), np.empty((d, d), np.float32)
    g_add = (n + NUMBA_BLOCK - 1) // NUMBA_BLOCK
    g_mm, b_mm = numba_matmul_grid("tiled", d, d)
    add_k, mm_k = k["add"], k["matmul_tiled"]

    def sync() -> None:
        stream.synchronize()
        cuda.synchronize()

    def add_async() -> None:
        add_k[g_add, NUMBA_BLOCK, stream](da, db, dc)

    def add_sync() -> None:
        add_async()
        stream.synchronize()

    def add_host() -> None:
        add_k[g_add, NUMBA_BLOCK](an, bn, cn)

    def mm_async() -> None:
        mm_k[g_mm, b_mm, stream](dma, dmb, dmc)

    def mm_sync() -> None:
        mm_async()
        stream.synchronize()

    def mm_host() -> None:
        mm_k[g_mm, b_mm](man, mbn, mcn)

    add_ref, mm_ref = a.double() + b.double(), matmul_ref(torch, ma, mb)
    mm_label = f"{d}x{d}x{d}"
    # (op, impl, shape, mode, one call, where its output is, reference)
    cases: list[tuple[str, str, str, str, Callable[[], None], Callable[[], Any], Any]] = [
        ("add", "numba:add", str(n), "async", add_async, lambda: c, add_ref),
        ("add", "numba:add", str(n), "sync", add_sync, lambda: c, add_ref),
        ("add", "numba:add", str(n), "ndarray", add_host, lambda: torch.from_numpy(cn).cuda(), add_ref),
        ("matmul", "numba:tiled", mm_label, "async", mm_async, lambda: mc, mm_ref),
        ("matmul", "numba:tiled", mm_label, "sync", mm_sync, lambda: mc, mm_ref),
        ("matmul", "numba:tiled", mm_label, "ndarray", mm_host, lambda: torch.from_numpy(mcn).cuda(), mm_ref),
    ]
    for op, impl, label, mode, call, result, ref in cases:
        base = record("launch_overhead", impl, label, op=op, mode=mode, calls_planned=calls, version=version)

        def run(
            call: Callable[[], None] = call,
            result: Callable[[], Any] = result,
            ref: Any = ref,
            base: dict[str, Any] = base,
        ) -> dict[str, Any]:
            call()
            sync()
            check = ctx.check(result(), ref)
            if not check.passed:
                return checked(base, check)
            ms, done = wall_per_call(calls, 100, max_s, call, sync)
            return per_call(checked(base, check), ms, done)

        sink.item(base, run)


# --- Main ------------------------------------------------------------------------------------
from peers_multi import peer_multi  # noqa: E402 - multi-GPU peers (bench/peers_multi.py)

PEERS: dict[str, Callable[[Ctx], None]] = {"torch": peer_torch, "triton": peer_triton, "numba": peer_numba, "multi": peer_multi}

from peers_graph import peer_torch_graph  # noqa: E402 - graph_replay's peer (bench/peers_graph.py)

PEERS["torch_graph"] = peer_torch_graph
from peers_transfer import torch_transfer  # noqa: E402 - the transfer suite's peer (issue 14)

PEERS["torch_transfer"] = torch_transfer

from peers_reduce import peer_compile_reduce, peer_torch_reduce  # noqa: E402

PEERS.update(torch_reduce=peer_torch_reduce, compile_reduce=peer_compile_reduce)

from peers_norm import peer_compile_norm, peer_torch_norm, peer_triton_norm, selftest_norm  # noqa: E402

PEERS.update(torch_norm=peer_torch_norm, compile_norm=peer_compile_norm, triton_norm=peer_triton_norm)
from peers_matmul_half import peer_torch_half, peer_triton_half, selftest as half_selftest  # noqa: E402

PEERS.update(torch_half=peer_torch_half, triton_half=peer_triton_half)
from peers_softmax import peer_compile_softmax  # noqa: E402

PEERS["compile_softmax"] = peer_compile_softmax


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


def selftest() -> int:
    """Checks what can be checked without torch or a GPU: the split-row softmax's arithmetic
    (as the Triton kernels do it), which rows are split, buffer rotation, the statistics."""
    import random

    rng = random.Random(7)
    failures = []
    for n, chunk, t in [(10, 3, 1.0), (1000, 64, 0.5), (4097, 1024, -2.0), (5, 16, 1.0)]:
        row = [rng.uniform(-SOFTMAX_RANGE, SOFTMAX_RANGE) for _ in range(n)]
        z = [t * v for v in row]
        m = max(z)
        e = [math.exp(v - m) for v in z]
        want = [v / sum(e) for v in e]
        got = split_softmax_py(row, t, chunk)
        err = max(abs(a - b) for a, b in zip(got, want))
        if err > 1e-12:
            failures.append(f"split softmax n={n} chunk={chunk} t={t}: max error {err}")
    # A planted wrong combination (partial sums added without rescaling) must be caught.
    row = [rng.uniform(-5, 5) for _ in range(100)]
    parts = [(max(row[i : i + 10]), sum(math.exp(v - max(row[i : i + 10])) for v in row[i : i + 10])) for i in range(0, 100, 10)]
    wrong_total = sum(s for _, s in parts)
    right_total = sum(s * math.exp(m - max(row)) for m, s in parts)
    if abs(wrong_total - right_total) < 1e-6:
        failures.append("the planted unrescaled combination was not different: the check cannot fail")
    if not one_long_row(1, 1 << 24) or one_long_row(8192, 32768) or one_long_row(1, 32768):
        failures.append("one_long_row: 1 x 2^24 must be split, 8192 x 32768 and 1 x 32768 not")
    if sets_for(12 << 20) != 10 or sets_for(1 << 30) != 1:
        failures.append("sets_for: rotation does not match examples/bench/data.rs")
    st = Stats.of([3.0, 1.0, 2.0], 1, 0, "cuda_events")
    if st.median_ms != 2.0:
        failures.append(f"Stats.of: median of [3, 1, 2] is {st.median_ms}, not 2")
    failures += selftest_norm()
    failures += half_selftest()
    for f in failures:
        print(f"peers selftest: FAIL {f}", file=sys.stderr)
    print(f"peers selftest: {'FAILED' if failures else 'passed'} ({len(failures)} failure(s))")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/results/peers.jsonl", help="JSON Lines file to write")
    parser.add_argument("--quick", action="store_true", help="only the smallest shapes, short timing")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of: " + ",".join(PEERS))
    parser.add_argument(
        "--budget-s",
        type=float,
        default=330.0,
        help="measurements left after this many seconds are recorded as skipped",
    )
    parser.add_argument(
        "--selftest", action="store_true", help="check the pure-Python helpers (no torch, no GPU needed) and exit"
    )
    args = parser.parse_args()
    if args.selftest:
        return selftest()
    chosen = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PEERS]
    if unknown:
        parser.error(f"unknown peer(s) {unknown}; choose from {list(PEERS)}")

    try:
        import torch
    except ImportError as e:
        print(f"peers: cannot import torch ({e}); every peer needs it for data, references and timing", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("peers: no CUDA device: torch.cuda.is_available() is False; nothing was measured", file=sys.stderr)
        return 2

    meta = {
        "gpu": torch.cuda.get_device_name(0),
        "driver": driver_version(),
        "git_rev": git_rev(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    sink = Sink(args.out, meta, time.monotonic() + args.budget_s)
    print(
        f"peers: {meta['gpu']} | driver {meta['driver']} | rev {meta['git_rev']} | {','.join(chosen)}"
        f"{' (quick)' if args.quick else ''} -> {args.out}",
        file=sys.stderr,
    )
    # Every peer launches on this one stream, where the timing events are recorded too.
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        set_tf32(torch, False)
        ctx = Ctx(torch, sink, args.quick)
        for name in chosen:
            try:
                PEERS[name](ctx)
            except Exception as e:  # noqa: BLE001 - one peer failing must not stop the others
                detail = "".join(traceback.format_exception_only(type(e), e)).strip()
                sink.emit(record("setup", name, "-", error=detail[:500]))
                traceback.print_exc()
            torch.cuda.synchronize()
    sink.close()
    print(summary(sink.records))
    not_timed = sum(1 for r in sink.records if r.get("median_ms") is None)
    print(f"{len(sink.records)} records written to {args.out} ({not_timed} not timed: failed check, error or skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
