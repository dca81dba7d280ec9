"""torch.compile of the row softmax (Inductor's generated Triton kernel, the scale by `t` fused
into it), with the same shapes, inputs, checks and timing as the torch eager peer of peers.py and
examples/bench/softmax.rs. Imported by peers.py (entry `compile_softmax` of its PEERS); the
helpers come from peers.py, imported when the peer runs.
"""

from __future__ import annotations

from typing import Any


def _helpers() -> Any:
    """peers.py, whose Ctx, Sink, checks and `--shapes` the peers share: the running script
    itself when it runs as one (a second import would be a fresh copy of its settings)."""
    import sys

    main = sys.modules.get("__main__")
    if "peers" not in sys.modules and main is not None and hasattr(main, "softmax_shapes"):
        return main
    import peers

    return peers


def peer_compile_softmax(ctx: Any) -> None:
    """`torch.compile(lambda x: torch.softmax(t * x, dim=-1))` per temperature (at t = 1 without
    the scale), every softmax shape of peers.softmax_shapes."""
    P = _helpers()
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__

    def compiled(t: float) -> Any:
        if t == 1.0:
            return torch.compile(lambda x: torch.softmax(x, dim=-1), dynamic=False)
        return torch.compile(lambda x: torch.softmax(t * x, dim=-1), dynamic=False)

    for rows, cols in P.softmax_shapes(ctx.quick):
        for t in P.TEMPERATURES:
            call = "torch.compile(torch.softmax(x, dim=-1))" if t == 1.0 else "torch.compile(torch.softmax(t * x, dim=-1))"
            base = P.record("softmax", "torch_compile", f"{rows}x{cols}", rows=rows, cols=cols, t=t, version=version, call=call)
            if P.one_long_row(rows, cols):
                base.update(comparable=False, not_comparable=P.not_comparable("torch.compile(torch.softmax)"))

            def softmax(rows: int = rows, cols: int = cols, t: float = t, base: dict[str, Any] = base) -> dict[str, Any]:
                sets = P.sets_for(8 * rows * cols)
                x = ctx.rand((rows, cols), -P.SOFTMAX_RANGE, P.SOFTMAX_RANGE)
                xs = [x.clone() for _ in range(sets)]
                ref = P.softmax_ref(torch, x, t)
                f = compiled(t)
                return P.timed_check(
                    ctx, {**base, "sets": sets}, lambda: f(xs[0]), ref, lambda i: f(xs[i % sets]), 8.0 * rows * cols, None
                )

            sink.item(base, softmax)
