"""The peers of examples/bench/transpose.rs: PyTorch eager and torch.compile of
`x.t().contiguous()`, with the suite's shapes (bench/suite.json, family `transpose`). Run by
peers.py (entries `torch_reduce` and `compile_reduce` of its PEERS, after peers_reduce.py).
"""

from __future__ import annotations

from typing import Any

import peers_common as C


def _run(ctx: Any, impl: str, compiled: bool) -> None:
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    wrap = "torch.compile({}, dynamic=False)" if compiled else "{}"

    def f(x: Any) -> Any:
        return x.t().contiguous()

    if compiled:
        C.allow_recompiles(torch)
    op = torch.compile(f, dynamic=False) if compiled else f

    for rows, cols in C.shapes("transpose", ctx.quick):
        shape = f"{rows}x{cols}"
        base = C.record("transpose", impl, shape, rows=rows, cols=cols, version=version, call=wrap.format("x.t().contiguous()"))

        def transpose(rows: int = rows, cols: int = cols, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = C.sets_for(8 * rows * cols)
            x = ctx.rand((rows, cols))
            xs = [x.clone() for _ in range(sets)]
            ref = x.double().t()
            return C.timed_check(
                ctx,
                {**base, "sets": sets},
                lambda: op(xs[0]),
                ref,
                lambda i: op(xs[i % sets]),
                C.bytes_of("transpose", rows=rows, cols=cols),
                None,
                tol=0.0,
            )

        sink.item(base, transpose)


def torch_transpose(ctx: Any) -> None:
    """torch eager: `x.t().contiguous()`."""
    _run(ctx, "torch", compiled=False)


def compile_transpose(ctx: Any) -> None:
    """The same function through `torch.compile`."""
    _run(ctx, "torch-compile", compiled=True)
