"""The peers of gpukern's reductions and transpose: PyTorch eager and torch.compile of
`x.sum()`, `x.argmax()`, `x.t().contiguous()` and, along each axis of a matrix, `x.sum(dim)`,
`x.amax(dim)` and `x.argmax(dim)`, with the same shapes, checks and timing as
examples/bench/reduce.rs and transpose.rs. Imported by peers.py (entries `torch_reduce` and
`compile_reduce` of its PEERS); the helpers come from peers.py, imported when a peer runs.
"""

from __future__ import annotations

import math
from typing import Any, Callable


def reduce_sizes(quick: bool) -> list[int]:
    """The same lengths as examples/bench/reduce.rs."""
    return [1 << 20] if quick else [1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28]


def axis_shapes(quick: bool) -> list[tuple[int, int]]:
    """The same shapes as examples/bench/reduce.rs's axis suite."""
    return [(1024, 1024)] if quick else [(8192, 8192), (16, 1 << 22), (1 << 22, 16), (1 << 20, 64)]


# The axis reductions: the record's kernel, torch's call on `dim`. `dim = 1` is gpukern's
# `Axis(1)` (one output per row, impl suffix `:rows`), `dim = 0` its `Axis(0)` (`:cols`).
AXIS_OPS = {
    "sum_axis": "sum",
    "max_axis": "amax",
    "argmax_axis": "argmax",
}


def transpose_shapes(quick: bool) -> list[tuple[int, int]]:
    """The same shapes as examples/bench/transpose.rs."""
    return [(1024, 1024)] if quick else [(8192, 8192), (4097, 16381)]


def _helpers() -> Any:
    """peers.py, whose Ctx, Sink, checks and `--shapes` the peers share: the running script
    itself when it runs as one (a second import would be a fresh copy of its settings)."""
    import sys

    main = sys.modules.get("__main__")
    if "peers" not in sys.modules and main is not None and hasattr(main, "softmax_shapes"):
        return main
    import peers

    return peers


def _ops(torch: Any, compiled: bool) -> dict[str, Callable[[Any], Any]]:
    ops: dict[str, Callable[[Any], Any]] = {
        "sum": lambda x: x.sum(),
        "argmax": lambda x: x.argmax(),
        "transpose": lambda x: x.t().contiguous(),
    }
    if compiled:
        _allow_recompiles(torch)
        return {k: torch.compile(f, dynamic=False) for k, f in ops.items()}
    return ops


def _allow_recompiles(torch: Any) -> None:
    """Every shape is compiled for static shapes, as a user compiling for one shape gets: allow
    that many recompiles of one function (the default limit, 8, is below the axis reductions'
    shapes times calls; past it Dynamo stops compiling that function)."""
    from peers_norm import allow_recompiles

    allow_recompiles(torch)


def _run(ctx: Any, impl: str, compiled: bool) -> None:
    P = _helpers()
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    ops = _ops(torch, compiled)
    wrap = "torch.compile({}, dynamic=False)" if compiled else "{}"

    for n in reduce_sizes(ctx.quick):
        base = P.record("sum", impl, str(n), n=n, version=version, call=wrap.format("x.sum()"))

        def sum_(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = P.sets_for(4 * n)
            x = ctx.rand((n,), 0.0, 1.0)
            xs = [x.clone() for _ in range(sets)]
            ref = x.double().sum().reshape(1)
            return P.timed_check(
                ctx,
                {**base, "sets": sets},
                lambda: ops["sum"](xs[0]).reshape(1),
                ref,
                lambda i: ops["sum"](xs[i % sets]),
                4.0 * n,
                None,
            )

        sink.item(base, sum_)

    for n in reduce_sizes(ctx.quick):
        base = P.record("argmax", impl, str(n), n=n, version=version, call=wrap.format("x.argmax()"))

        def argmax(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = P.sets_for(4 * n)
            x = ctx.rand((n,))
            xs = [x.clone() for _ in range(sets)]
            want = int(x.double().argmax().item())
            got = int(ops["argmax"](xs[0]).item())
            check = P.Check(0.0 if got == want else math.inf, 0.0, "exact")
            rec = P.checked({**base, "sets": sets}, check)
            if not check.passed:
                return rec
            stats = ctx.timer.measure(lambda i: ops["argmax"](xs[i % sets]))
            return P.timed(rec, stats, 4.0 * n, None)

        sink.item(base, argmax)

    for rows, cols in axis_shapes(ctx.quick):
        shape = f"{rows}x{cols}"
        for kernel, method in AXIS_OPS.items():
            for dim, side in ((1, "rows"), (0, "cols")):
                call = wrap.format(f"x.{method}(dim={dim})")
                base = P.record(kernel, f"{impl}:{side}", shape, rows=rows, cols=cols, version=version, call=call)

                def axis_op(
                    rows: int = rows,
                    cols: int = cols,
                    method: str = method,
                    dim: int = dim,
                    base: dict[str, Any] = base,
                ) -> dict[str, Any]:
                    def f(x: Any, method: str = method, dim: int = dim) -> Any:
                        return getattr(x, method)(dim=dim)

                    op = torch.compile(f, dynamic=False) if compiled else f
                    sets = P.sets_for(4 * rows * cols)
                    x = ctx.rand((rows, cols))
                    xs = [x.clone() for _ in range(sets)]
                    outputs = rows if dim == 1 else cols
                    # gpukern's minimum traffic: 4 bytes per element read, 4 per output written.
                    nbytes = 4.0 * (rows * cols + outputs)
                    if method == "argmax":
                        want = getattr(x.double(), method)(dim=dim)
                        got = op(xs[0])
                        torch.cuda.current_stream().synchronize()
                        check = P.Check(0.0 if bool(torch.equal(got, want)) else math.inf, 0.0, "exact")
                        rec = P.checked({**base, "sets": sets}, check)
                        if not check.passed:
                            return rec
                        stats = ctx.timer.measure(lambda i: op(xs[i % sets]))
                        return P.timed(rec, stats, nbytes, None)
                    ref = getattr(x.double(), method)(dim=dim)
                    return P.timed_check(
                        ctx,
                        {**base, "sets": sets},
                        lambda: op(xs[0]),
                        ref,
                        lambda i: op(xs[i % sets]),
                        nbytes,
                        None,
                        tol=0.0 if method == "amax" else P.F32_TOL,
                    )

                sink.item(base, axis_op)

    for rows, cols in transpose_shapes(ctx.quick):
        shape = f"{rows}x{cols}"
        base = P.record("transpose", impl, shape, rows=rows, cols=cols, version=version, call=wrap.format("x.t().contiguous()"))

        def transpose(rows: int = rows, cols: int = cols, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = P.sets_for(8 * rows * cols)
            x = ctx.rand((rows, cols))
            xs = [x.clone() for _ in range(sets)]
            ref = x.double().t()
            return P.timed_check(
                ctx,
                {**base, "sets": sets},
                lambda: ops["transpose"](xs[0]),
                ref,
                lambda i: ops["transpose"](xs[i % sets]),
                8.0 * rows * cols,
                None,
                tol=0.0,
            )

        sink.item(base, transpose)


def peer_torch_reduce(ctx: Any) -> None:
    """torch eager: `x.sum()`, `x.argmax()`, `x.t().contiguous()`."""
    _run(ctx, "torch", compiled=False)


def peer_compile_reduce(ctx: Any) -> None:
    """The same functions through `torch.compile` (Inductor's generated Triton kernels)."""
    _run(ctx, "torch-compile", compiled=True)
