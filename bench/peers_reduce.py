"""The peers of gpukern's reductions (examples/bench/reduce.rs): PyTorch eager and torch.compile
of `x.sum()`, `x.argmax()` and, along each axis of a matrix, `x.sum(dim)`, `x.amax(dim)` and
`x.argmax(dim)`, with the suite's shapes (bench/suite.json, families `reduce` and `axis`). Run by
peers.py (entries `torch_reduce` and `compile_reduce` of its PEERS, with peers_transpose.py).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import peers_common as C


def reduce_sizes(quick: bool) -> list[int]:
    """The suite's lengths (bench/suite.json, family `reduce`)."""
    return C.sizes("reduce", quick)


def axis_shapes(quick: bool) -> list[tuple[int, ...]]:
    """The suite's matrices (bench/suite.json, family `axis`)."""
    return C.shapes("axis", quick)


# The axis reductions: the record's kernel, torch's call on `dim`. `dim = 1` is gpukern's
# `Axis(1)` (one output per row, impl suffix `:rows`), `dim = 0` its `Axis(0)` (`:cols`).
AXIS_OPS = {
    "sum_axis": "sum",
    "max_axis": "amax",
    "argmax_axis": "argmax",
}





def _ops(torch: Any, compiled: bool) -> dict[str, Callable[[Any], Any]]:
    ops: dict[str, Callable[[Any], Any]] = {
        "sum": lambda x: x.sum(),
        "argmax": lambda x: x.argmax(),
    }
    if compiled:
        C.allow_recompiles(torch)
        return {k: torch.compile(f, dynamic=False) for k, f in ops.items()}
    return ops




def _run(ctx: Any, impl: str, compiled: bool) -> None:
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    ops = _ops(torch, compiled)
    wrap = "torch.compile({}, dynamic=False)" if compiled else "{}"

    for n in reduce_sizes(ctx.quick):
        base = C.record("sum", impl, str(n), n=n, version=version, call=wrap.format("x.sum()"))

        def sum_(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = C.sets_for(4 * n)
            x = ctx.rand((n,), 0.0, 1.0)
            xs = [x.clone() for _ in range(sets)]
            ref = x.double().sum().reshape(1)
            return C.timed_check(
                ctx,
                {**base, "sets": sets},
                lambda: ops["sum"](xs[0]).reshape(1),
                ref,
                lambda i: ops["sum"](xs[i % sets]),
                C.bytes_of("sum", n=n),
                None,
            )

        sink.item(base, sum_)

    for n in reduce_sizes(ctx.quick):
        base = C.record("argmax", impl, str(n), n=n, version=version, call=wrap.format("x.argmax()"))

        def argmax(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = C.sets_for(4 * n)
            x = ctx.rand((n,))
            xs = [x.clone() for _ in range(sets)]
            want = int(x.double().argmax().item())
            got = int(ops["argmax"](xs[0]).item())
            check = C.Check(0.0 if got == want else math.inf, 0.0, "exact")
            rec = C.checked({**base, "sets": sets}, check)
            if not check.passed:
                return rec
            stats = ctx.timer.measure(lambda i: ops["argmax"](xs[i % sets]))
            return C.timed(rec, stats, C.bytes_of("argmax", n=n), None)

        sink.item(base, argmax)

    for rows, cols in axis_shapes(ctx.quick):
        shape = f"{rows}x{cols}"
        for kernel, method in AXIS_OPS.items():
            for dim, side in ((1, "rows"), (0, "cols")):
                call = wrap.format(f"x.{method}(dim={dim})")
                base = C.record(kernel, f"{impl}:{side}", shape, rows=rows, cols=cols, version=version, call=call)

                def axis_op(
                    rows: int = rows,
                    cols: int = cols,
                    method: str = method,
                    dim: int = dim,
                    kernel: str = kernel,
                    base: dict[str, Any] = base,
                ) -> dict[str, Any]:
                    def f(x: Any, method: str = method, dim: int = dim) -> Any:
                        return getattr(x, method)(dim=dim)

                    op = torch.compile(f, dynamic=False) if compiled else f
                    sets = C.sets_for(4 * rows * cols)
                    x = ctx.rand((rows, cols))
                    xs = [x.clone() for _ in range(sets)]
                    outputs = rows if dim == 1 else cols
                    # gpukern's minimum traffic (the suite's model): 4 bytes per element read, 4
                    # per output written.
                    nbytes = C.bytes_of(kernel, rows=rows, cols=cols, outputs=outputs)
                    if method == "argmax":
                        want = getattr(x.double(), method)(dim=dim)
                        got = op(xs[0])
                        torch.cuda.current_stream().synchronize()
                        check = C.Check(0.0 if bool(torch.equal(got, want)) else math.inf, 0.0, "exact")
                        rec = C.checked({**base, "sets": sets}, check)
                        if not check.passed:
                            return rec
                        stats = ctx.timer.measure(lambda i: op(xs[i % sets]))
                        return C.timed(rec, stats, nbytes, None)
                    ref = getattr(x.double(), method)(dim=dim)
                    return C.timed_check(
                        ctx,
                        {**base, "sets": sets},
                        lambda: op(xs[0]),
                        ref,
                        lambda i: op(xs[i % sets]),
                        nbytes,
                        None,
                        tol=0.0 if method == "amax" else C.F32_TOL,
                    )

                sink.item(base, axis_op)


def peer_torch_reduce(ctx: Any) -> None:
    """torch eager: `x.sum()`, `x.argmax()`, the axis reductions."""
    _run(ctx, "torch", compiled=False)


def peer_compile_reduce(ctx: Any) -> None:
    """The same functions through `torch.compile` (Inductor's generated Triton kernels)."""
    _run(ctx, "torch-compile", compiled=True)
