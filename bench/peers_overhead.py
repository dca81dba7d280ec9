"""The peers of examples/bench/overhead.rs: the launch overhead of small calls (a 1,024-element
add and a 32^3 matmul: async, sync and from host arrays) in torch and Numba, and a matmul with
host-device copies against device-resident data in torch (the suite's `matmul_with_copies`
shapes, bench/suite.json).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import peers_common as C
import peers_matmul
from peers_matmul import build_numba_matmul, numba_matmul_grid
import peers_memory
from peers_memory import NUMBA_BLOCK, build_numba_add


def torch_overhead(ctx: C.Ctx) -> None:
    """Wall time per tiny call: async (back-to-back, one sync), sync (a sync per call), and
    ndarray (from numpy arrays on the host, result back to numpy)."""
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    calls, max_s = C.overhead_budget(ctx)
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

    add_ref, mm_ref = a.double() + b.double(), C.matmul_ref(torch, ma, mb)
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
        base = C.record(
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
            C.set_tf32(torch, False)
            out = call()
            sync()
            check = ctx.check(torch.as_tensor(out).to("cuda"), ref)
            if not check.passed:
                return C.checked(base, check)
            ms, done = C.wall_per_call(calls, 100, max_s, call, sync)
            return C.per_call(C.checked(base, check), ms, done)

        sink.item(base, run)


def torch_copies(ctx: C.Ctx) -> None:
    """torch.matmul from numpy arrays (upload, multiply, download) against device-resident data."""
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    reps, max_s = (5, 0.3) if ctx.quick else (20, 1.5)
    sync = torch.cuda.synchronize
    for shape in C.shapes("matmul_with_copies", ctx.quick):
        for mode in ("copies", "resident"):
            base = C.mm_base("matmul_with_copies", "torch", shape, mode=mode, math="fp32", version=version)

            def measure(
                shape: tuple[int, int, int] = shape, mode: str = mode, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                m, n, k = shape
                nbytes, flops = C.mm_counts(shape, "matmul_with_copies")
                a, b = ctx.rand((m, k)), ctx.rand((k, n))
                ref = C.matmul_ref(torch, a, b)
                an, bn = a.cpu().numpy(), b.cpu().numpy()
                c = ctx.nan((m, n))

                def copies() -> Any:
                    return (torch.from_numpy(an).cuda() @ torch.from_numpy(bn).cuda()).cpu().numpy()

                def resident() -> Any:
                    torch.matmul(a, b, out=c)
                    sync()
                    return c

                run = copies if mode == "copies" else resident
                C.set_tf32(torch, False)
                check = ctx.check(torch.as_tensor(run()).to("cuda"), ref)
                if not check.passed:
                    return C.checked(base, check)
                return C.timed(C.checked(base, check), C.wall_median(reps, max_s, run), nbytes, flops)

            sink.item(base, measure)


def numba_overhead(ctx: C.Ctx) -> None:
    """Numba: wall time per tiny call of the tutorial add and shared-memory matmul."""
    import numpy as np

    import numba

    global cuda
    cuda = C.import_numba_cuda()
    torch, sink = ctx.torch, ctx.sink
    version = numba.__version__
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    arr = cuda.as_cuda_array

    # The kernels' files find numba.cuda in their module global.
    peers_memory.cuda = peers_matmul.cuda = cuda

    # Wall time per tiny call, as for torch; "ndarray" passes host numpy arrays, which Numba
    # copies to the device and back around the launch.
    calls, max_s = C.overhead_budget(ctx)
    n, d = 1024, 32
    a, b, c = ctx.rand((n,)), ctx.rand((n,)), ctx.nan((n,))
    ma, mb, mc = ctx.rand((d, d)), ctx.rand((d, d)), ctx.nan((d, d))
    da, db, dc, dma, dmb, dmc = (arr(t) for t in (a, b, c, ma, mb, mc))
    an, bn, cn = a.cpu().numpy(), b.cpu().numpy(), np.empty(n, np.float32)
    man, mbn, mcn = ma.cpu().numpy(), mb.cpu().numpy(), np.empty((d, d), np.float32)
    g_add = (n + NUMBA_BLOCK - 1) // NUMBA_BLOCK
    g_mm, b_mm = numba_matmul_grid("tiled", d, d)
    add_k, mm_k = build_numba_add()["add"], build_numba_matmul()["matmul_tiled"]

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

    add_ref, mm_ref = a.double() + b.double(), C.matmul_ref(torch, ma, mb)
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
        base = C.record("launch_overhead", impl, label, op=op, mode=mode, calls_planned=calls, version=version)

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
                return C.checked(base, check)
            ms, done = C.wall_per_call(calls, 100, max_s, call, sync)
            return C.per_call(C.checked(base, check), ms, done)

        sink.item(base, run)
