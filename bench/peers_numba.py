"""The Numba CUDA peer (`numba` of peers.py's PEERS): the Numba documentation's tutorial kernels
(add, softmax, naive and shared-memory matmul) and their launch overhead, with the same shapes,
inputs, checks and timing as examples/bench.rs.

Moved out of peers.py whole; the helpers (Ctx, record, timed_check, ...) come from peers.py
through `helpers()` when a peer runs.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from peers import Ctx


def helpers() -> Any:
    """peers.py's helpers, whether it runs as a script or was imported."""
    return sys.modules.get("peers") or sys.modules["__main__"]


NUMBA_BLOCK = 256  # threads per block of the Numba add and softmax
NUMBA_TPB = 16  # the Numba tutorial's tile: 16 x 16 threads
NUMBA_NAIVE_MAX_FLOPS = 2 * 4096**3 * 1.05  # naive Numba matmul above 4096^3: too slow

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

    P = helpers()
    import_numba_cuda()
    import numba

    torch, sink = ctx.torch, ctx.sink
    version = numba.__version__
    k = build_numba()
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    arr = cuda.as_cuda_array

    for n in P.add_sizes(ctx.quick):
        base = P.record("add", "numba", str(n), n=n, version=version, variant="add")

        def add(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = P.sets_for(12 * n)
            a, b = ctx.rand((n,)), ctx.rand((n,))
            ts = [(a.clone(), b.clone(), ctx.nan((n,))) for _ in range(sets)]
            bufs = [tuple(arr(t) for t in s) for s in ts]
            grid = (n + NUMBA_BLOCK - 1) // NUMBA_BLOCK

            def launch(i: int) -> Any:
                x, y, z = bufs[i % sets]
                k["add"][grid, NUMBA_BLOCK, stream](x, y, z)
                return ts[i % sets][2]

            return P.timed_check(
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

    for shape in P.matmul_shapes(ctx.quick):
        for kind in ("naive", "tiled"):
            base = P.mm_base("matmul", f"numba:{kind}", shape, math="fp32", version=version, variant=kind)
            if kind == "naive" and P.mm_counts(shape)[1] > NUMBA_NAIVE_MAX_FLOPS:
                sink.emit({**base, "skipped": "naive Numba matmul above 4096^3 takes over a second per run"})
                continue

            def matmul(
                shape: tuple[int, int, int] = shape, kind: str = kind, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                m, n, kk = shape
                nbytes, flops = P.mm_counts(shape)
                sets = P.sets_for(int(nbytes))
                a, b = ctx.rand((m, kk)), ctx.rand((kk, n))
                ts = [(a.clone(), b.clone(), ctx.nan((m, n))) for _ in range(sets)]
                bufs = [tuple(arr(t) for t in s) for s in ts]
                grid, blk = numba_matmul_grid(kind, m, n)
                fn = k[f"matmul_{kind}"]

                def launch(i: int) -> Any:
                    x, y, z = bufs[i % sets]
                    fn[grid, blk, stream](x, y, z)
                    return ts[i % sets][2]

                return P.timed_check(
                    ctx,
                    {**base, "sets": sets},
                    lambda: launch(0),
                    P.matmul_ref(torch, a, b),
                    launch,
                    nbytes,
                    flops,
                    max_batch=1,
                )

            sink.item(base, matmul)

    for rows, cols in P.softmax_shapes(ctx.quick):
        for t in P.TEMPERATURES:
            base = P.record(
                "softmax",
                "numba",
                f"{rows}x{cols}",
                rows=rows,
                cols=cols,
                t=t,
                version=version,
                variant="block_reduction",
            )
            if P.one_long_row(rows, cols):
                base.update(comparable=False, not_comparable=P.not_comparable("the Numba tutorial softmax"))

            def softmax(
                rows: int = rows, cols: int = cols, t: float = t, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                sets = P.sets_for(8 * rows * cols)
                x = ctx.rand((rows, cols), -P.SOFTMAX_RANGE, P.SOFTMAX_RANGE)
                ts = [(x.clone(), ctx.nan((rows, cols))) for _ in range(sets)]
                bufs = [tuple(arr(t) for t in s) for s in ts]
                tf = np.float32(t)

                def launch(i: int) -> Any:
                    xi, yi = bufs[i % sets]
                    k["softmax_block_reduce"][rows, NUMBA_BLOCK, stream](xi, yi, tf)
                    return ts[i % sets][1]

                return P.timed_check(
                    ctx,
                    {**base, "sets": sets},
                    lambda: launch(0),
                    P.softmax_ref(torch, x, t),
                    launch,
                    8.0 * rows * cols,
                    None,
                    max_batch=1,
                )

            sink.item(base, softmax)

    # Wall time per tiny call, as for torch; "ndarray" passes host numpy arrays, which Numba
    # copies to the device and back around the launch.
    calls, max_s = P.overhead_budget(ctx)
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

    add_ref, mm_ref = a.double() + b.double(), P.matmul_ref(torch, ma, mb)
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
        base = P.record("launch_overhead", impl, label, op=op, mode=mode, calls_planned=calls, version=version)

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
                return P.checked(base, check)
            ms, done = P.wall_per_call(calls, 100, max_s, call, sync)
            return P.per_call(P.checked(base, check), ms, done)

        sink.item(base, run)
