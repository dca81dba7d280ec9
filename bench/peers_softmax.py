"""The peers of examples/bench/softmax.rs, with the suite's shapes and inverse temperatures
(bench/suite.json, family `softmax`): `torch.softmax` eager (its one fused kernel at t = 1,
`torch.softmax(t * x)` otherwise), `torch.compile` of the same function (`x * t` fused into it),
our Triton kernels (one program per row; a looped one for long rows; split-row kernels for a few
very long rows) and the Numba tutorial's block-reduction softmax.
"""

from __future__ import annotations

import math
from typing import Any

import peers_common as C

# numba.cuda (C.import_numba_cuda()) once a Numba peer runs: a module global, so that the kernels
# below find it as a global, as in the tutorials.
cuda: Any = None
NUMBA_BLOCK = 256  # threads per block of the Numba add and softmax


def build_triton_softmax(triton: Any, tl: Any) -> dict[str, Any]:
    """Our Triton softmax kernels, written in the style of Triton's tutorials."""

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

    return {
        "softmax_fused": softmax_fused,
        "softmax_looped": softmax_looped,
        "softmax_split_stats": softmax_split_stats,
        "softmax_split_norm": softmax_split_norm,
    }


SPLIT_CHUNK = 16384  # columns per program of the split-row kernels (2^24 columns: 1024 programs)
SPLIT_BLOCK = 2048  # columns per step inside a program


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


def selftest_triton() -> list[str]:
    """The split-row softmax's arithmetic (as the Triton kernels do it) against the plain
    formula, and a planted wrong combination that must differ: peers.py --selftest."""
    import random

    rng = random.Random(7)
    span = C.SOFTMAX_RANGE
    failures: list[str] = []
    for n, chunk, t in [(10, 3, 1.0), (1000, 64, 0.5), (4097, 1024, -2.0), (5, 16, 1.0)]:
        row = [rng.uniform(-span, span) for _ in range(n)]
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
    return failures


def build_numba_softmax() -> dict[str, Any]:
    """The Numba documentation's softmax (block reduction), in its style."""
    from numba import float32

    block = NUMBA_BLOCK  # a compile-time constant for the shared array

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

    return {"softmax_block_reduce": softmax_block_reduce}


def torch_softmax(ctx: C.Ctx) -> None:
    """torch: `torch.softmax(x)` at t = 1, `torch.softmax(t * x)` otherwise."""
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__

    for rows, cols in C.only(C.shapes("softmax", ctx.quick)):
        for t in C.temperatures():
            # At t = 1 torch runs its one fused kernel; at other t it scales first, as its users do.
            call = "torch.softmax(x, dim=-1)" if t == 1.0 else "torch.softmax(t * x, dim=-1)"
            base = C.record("softmax", "torch", f"{rows}x{cols}", rows=rows, cols=cols, t=t, version=version, call=call)
            if C.one_long_row(rows, cols):
                base.update(comparable=False, not_comparable=C.not_comparable("torch.softmax"))

            def softmax(
                rows: int = rows, cols: int = cols, t: float = t, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                sets = C.sets_for(8 * rows * cols)
                x = ctx.rand((rows, cols), -C.SOFTMAX_RANGE, C.SOFTMAX_RANGE)
                xs = [x.clone() for _ in range(sets)]
                ref = C.softmax_ref(torch, x, t)

                def launch(i: int) -> Any:
                    xi = xs[i % sets]
                    return torch.softmax(xi if t == 1.0 else t * xi, dim=-1)

                return C.timed_check(ctx, {**base, "sets": sets}, lambda: launch(0), ref, launch, C.bytes_of("softmax", rows=rows, cols=cols), None)

            sink.item(base, softmax)


def triton_softmax(ctx: C.Ctx) -> None:
    """Triton: our fused, looped and split-row softmax kernels."""
    import triton
    import triton.language as tl

    torch, sink = ctx.torch, ctx.sink
    version = triton.__version__
    k = build_triton_softmax(triton, tl)

    for rows, cols in C.only(C.shapes("softmax", ctx.quick)):
        fused = cols <= C.TRITON_FUSED_MAX_COLS
        split = C.one_long_row(rows, cols)
        block = triton.next_power_of_2(cols) if fused else SPLIT_BLOCK if split else 4096
        warps = softmax_warps(block) if fused else 8 if split else 16
        kernel = k["softmax_fused"] if fused else k["softmax_looped"]
        chunks = triton.cdiv(cols, SPLIT_CHUNK)
        parts = triton.next_power_of_2(chunks)
        for t in C.temperatures():
            base = C.record(
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
                sets = C.sets_for(8 * rows * cols)
                x = ctx.rand((rows, cols), -C.SOFTMAX_RANGE, C.SOFTMAX_RANGE)
                bufs = [(x.clone(), ctx.nan((rows, cols))) for _ in range(sets)]
                ref = C.softmax_ref(torch, x, t)
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

                return C.timed_check(ctx, {**base, "sets": sets}, lambda: launch(0), ref, launch, C.bytes_of("softmax", rows=rows, cols=cols), None)

            sink.item(base, softmax)


def numba_softmax(ctx: C.Ctx) -> None:
    """Numba: the tutorial's block-reduction softmax, one block per row."""
    import numpy as np

    import numba

    global cuda
    cuda = C.import_numba_cuda()
    torch, sink = ctx.torch, ctx.sink
    version = numba.__version__
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    arr = cuda.as_cuda_array

    kernels = build_numba_softmax()

    for rows, cols in C.only(C.shapes("softmax", ctx.quick)):
        for t in C.temperatures():
            base = C.record(
                "softmax",
                "numba",
                f"{rows}x{cols}",
                rows=rows,
                cols=cols,
                t=t,
                version=version,
                variant="block_reduction",
            )
            if C.one_long_row(rows, cols):
                base.update(comparable=False, not_comparable=C.not_comparable("the Numba tutorial softmax"))

            def softmax(
                rows: int = rows, cols: int = cols, t: float = t, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                sets = C.sets_for(8 * rows * cols)
                x = ctx.rand((rows, cols), -C.SOFTMAX_RANGE, C.SOFTMAX_RANGE)
                ts = [(x.clone(), ctx.nan((rows, cols))) for _ in range(sets)]
                bufs = [tuple(arr(t) for t in s) for s in ts]
                tf = np.float32(t)

                def launch(i: int) -> Any:
                    xi, yi = bufs[i % sets]
                    kernels["softmax_block_reduce"][rows, NUMBA_BLOCK, stream](xi, yi, tf)
                    return ts[i % sets][1]

                return C.timed_check(
                    ctx,
                    {**base, "sets": sets},
                    lambda: launch(0),
                    C.softmax_ref(torch, x, t),
                    launch,
                    C.bytes_of("softmax", rows=rows, cols=cols),
                    None,
                    max_batch=1,
                )

            sink.item(base, softmax)


def peer_compile_softmax(ctx: Any) -> None:
    """`torch.compile(lambda x: torch.softmax(t * x, dim=-1))` per temperature (at t = 1 without
    the scale), every softmax shape of the suite."""
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__

    def compiled(t: float) -> Any:
        if t == 1.0:
            return torch.compile(lambda x: torch.softmax(x, dim=-1), dynamic=False)
        return torch.compile(lambda x: torch.softmax(t * x, dim=-1), dynamic=False)

    for rows, cols in C.only(C.shapes("softmax", ctx.quick)):
        for t in C.temperatures():
            call = "torch.compile(torch.softmax(x, dim=-1))" if t == 1.0 else "torch.compile(torch.softmax(t * x, dim=-1))"
            base = C.record("softmax", "torch_compile", f"{rows}x{cols}", rows=rows, cols=cols, t=t, version=version, call=call)
            if C.one_long_row(rows, cols):
                base.update(comparable=False, not_comparable=C.not_comparable("torch.compile(torch.softmax)"))

            def softmax(rows: int = rows, cols: int = cols, t: float = t, base: dict[str, Any] = base) -> dict[str, Any]:
                sets = C.sets_for(8 * rows * cols)
                x = ctx.rand((rows, cols), -C.SOFTMAX_RANGE, C.SOFTMAX_RANGE)
                xs = [x.clone() for _ in range(sets)]
                ref = C.softmax_ref(torch, x, t)
                f = compiled(t)
                return C.timed_check(
                    ctx, {**base, "sets": sets}, lambda: f(xs[0]), ref, lambda i: f(xs[i % sets]), 8.0 * rows * cols, None
                )

            sink.item(base, softmax)
