"""The PyTorch eager peer (`torch` of peers.py's PEERS): `y.copy_(x)`, `torch.add`, `torch.matmul`
(fp32 and TF32), `torch.softmax`, the launch overhead of small calls and a matmul with host-device
copies, with the same shapes, inputs, checks and timing as examples/bench.rs.

Moved out of peers.py whole; the helpers (Ctx, record, timed_check, Budget, ...) come from
peers.py through `helpers()` when a peer runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from peers import Ctx


def helpers() -> Any:
    """peers.py's helpers, whether it runs as a script or was imported."""
    return sys.modules.get("peers") or sys.modules["__main__"]


def peer_torch(ctx: Ctx) -> None:
    P = helpers()
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__

    for n in P.add_sizes(ctx.quick):
        base = P.record("copy", "torch", str(n), n=n, version=version, call="y.copy_(x)")

        def copy(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = P.sets_for(8 * n)
            xs = [ctx.rand((n,)) for _ in range(sets)]
            ys = [ctx.nan((n,)) for _ in range(sets)]
            return P.timed_check(
                ctx,
                {**base, "sets": sets},
                lambda: ys[0].copy_(xs[0]),
                xs[0].double(),
                lambda i: ys[i % sets].copy_(xs[i % sets]),
                8.0 * n,
                None,
            )

        sink.item(base, copy)

    for n in P.add_sizes(ctx.quick):
        base = P.record("add", "torch", str(n), n=n, version=version, call="torch.add(a, b, out=c)")

        def add(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = P.sets_for(12 * n)
            a, b = ctx.rand((n,)), ctx.rand((n,))
            bufs = [(a.clone(), b.clone(), ctx.nan((n,))) for _ in range(sets)]
            ref = a.double() + b.double()

            def launch(i: int) -> Any:
                x, y, z = bufs[i % sets]
                return torch.add(x, y, out=z)

            return P.timed_check(ctx, {**base, "sets": sets}, lambda: launch(0), ref, launch, 12.0 * n, None)

        sink.item(base, add)

    for shape in P.matmul_shapes(ctx.quick):
        for tf32 in (False, True):
            impl = "torch_tf32" if tf32 else "torch"
            base = P.mm_base(
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
                nbytes, flops = P.mm_counts(shape)
                sets = P.sets_for(int(nbytes))
                a, b = ctx.rand((m, k)), ctx.rand((k, n))
                ref = P.matmul_ref(torch, a, b)
                bufs = [(a.clone(), b.clone(), ctx.nan((m, n))) for _ in range(sets)]

                def launch(i: int) -> Any:
                    x, y, z = bufs[i % sets]
                    return torch.matmul(x, y, out=z)

                P.set_tf32(torch, tf32)
                try:
                    return P.timed_check(
                        ctx,
                        {**base, "sets": sets},
                        lambda: launch(0),
                        ref,
                        launch,
                        nbytes,
                        flops,
                        P.TF32_TOL if tf32 else P.F32_TOL,
                    )
                finally:
                    P.set_tf32(torch, False)

            sink.item(base, matmul)

    for rows, cols in P.softmax_shapes(ctx.quick):
        for t in P.TEMPERATURES:
            # At t = 1 torch runs its one fused kernel; at other t it scales first, as its users do.
            call = "torch.softmax(x, dim=-1)" if t == 1.0 else "torch.softmax(t * x, dim=-1)"
            base = P.record("softmax", "torch", f"{rows}x{cols}", rows=rows, cols=cols, t=t, version=version, call=call)
            if P.one_long_row(rows, cols):
                base.update(comparable=False, not_comparable=P.not_comparable("torch.softmax"))

            def softmax(
                rows: int = rows, cols: int = cols, t: float = t, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                sets = P.sets_for(8 * rows * cols)
                x = ctx.rand((rows, cols), -P.SOFTMAX_RANGE, P.SOFTMAX_RANGE)
                xs = [x.clone() for _ in range(sets)]
                ref = P.softmax_ref(torch, x, t)

                def launch(i: int) -> Any:
                    xi = xs[i % sets]
                    return torch.softmax(xi if t == 1.0 else t * xi, dim=-1)

                return P.timed_check(ctx, {**base, "sets": sets}, lambda: launch(0), ref, launch, 8.0 * rows * cols, None)

            sink.item(base, softmax)

    torch_overhead(ctx, version)
    torch_copies(ctx, version)


def torch_overhead(ctx: Ctx, version: str) -> None:
    """Wall time per tiny call: async (back-to-back, one sync), sync (a sync per call), and
    ndarray (from numpy arrays on the host, result back to numpy)."""
    P = helpers()
    torch, sink = ctx.torch, ctx.sink
    calls, max_s = P.overhead_budget(ctx)
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

    add_ref, mm_ref = a.double() + b.double(), P.matmul_ref(torch, ma, mb)
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
        base = P.record(
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
            P.set_tf32(torch, False)
            out = call()
            sync()
            check = ctx.check(torch.as_tensor(out).to("cuda"), ref)
            if not check.passed:
                return P.checked(base, check)
            ms, done = P.wall_per_call(calls, 100, max_s, call, sync)
            return P.per_call(P.checked(base, check), ms, done)

        sink.item(base, run)


def torch_copies(ctx: Ctx, version: str) -> None:
    """torch.matmul from numpy arrays (upload, multiply, download) against device-resident data."""
    P = helpers()
    torch, sink = ctx.torch, ctx.sink
    reps, max_s = (5, 0.3) if ctx.quick else (20, 1.5)
    sync = torch.cuda.synchronize
    for shape in P.copies_shapes(ctx.quick):
        for mode in ("copies", "resident"):
            base = P.mm_base("matmul_with_copies", "torch", shape, mode=mode, math="fp32", version=version)

            def measure(
                shape: tuple[int, int, int] = shape, mode: str = mode, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                m, n, k = shape
                nbytes, flops = P.mm_counts(shape)
                a, b = ctx.rand((m, k)), ctx.rand((k, n))
                ref = P.matmul_ref(torch, a, b)
                an, bn = a.cpu().numpy(), b.cpu().numpy()
                c = ctx.nan((m, n))

                def copies() -> Any:
                    return (torch.from_numpy(an).cuda() @ torch.from_numpy(bn).cuda()).cpu().numpy()

                def resident() -> Any:
                    torch.matmul(a, b, out=c)
                    sync()
                    return c

                run = copies if mode == "copies" else resident
                P.set_tf32(torch, False)
                check = ctx.check(torch.as_tensor(run()).to("cuda"), ref)
                if not check.passed:
                    return P.checked(base, check)
                return P.timed(P.checked(base, check), P.wall_median(reps, max_s, run), nbytes, flops)

            sink.item(base, measure)
