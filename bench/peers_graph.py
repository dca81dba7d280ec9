"""Peer of the `graph_replay` suite: the same chain of 100 small kernels (`x += 1` on 1,024
floats) captured with `torch.cuda.CUDAGraph` and replayed, and launched one by one.

Records match examples/bench/graph.rs: kernel `graph_replay`, shape `100x1024`,
`us_per_kernel` = mean wall time per replay (back to back, one synchronisation at the end) over
100. This is the per-node cost of a replayed graph on the same GPU through the graph API users
of PyTorch reach for; `torch:launches` is the same chain of eager `add_` calls.
"""

from __future__ import annotations

from typing import Any

import peers_common as C

CHAIN = 100
CHAIN_N = 1024




def peer_torch_graph(ctx: Any) -> None:
    """`torch.cuda.CUDAGraph` replay of 100 in-place increments against 100 eager launches."""
    torch, sink = ctx.torch, ctx.sink
    calls, max_s = (100, 0.2) if ctx.quick else (2000, 1.0)
    shape = f"{CHAIN}x{CHAIN_N}"
    x0 = ctx.rand((CHAIN_N,))

    def chain(x: Any) -> None:
        for _ in range(CHAIN):
            x.add_(1.0)

    # Capture on a side stream, as torch's documentation asks (warm-up first).
    xg = x0.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        chain(xg)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        chain(xg)
    xe = x0.clone()

    def check(got: Any, times: int) -> Any:
        ref = x0.double() + times
        err = float((got.double() - ref).norm() / ref.norm())
        return C.Check(err, 1e-6)

    for impl in ("torch:cudagraph", "torch:launches"):
        base = C.record(
            "graph_replay", impl, shape, op="x.add_(1)", kernels_per_call=CHAIN, mode="async",
            version=torch.__version__,
        )

        def measure(impl: str = impl, base: dict[str, Any] = base) -> dict[str, Any]:
            # The check: one replay (or one eager chain) adds 100 to a fresh copy.
            if impl == "torch:cudagraph":
                xg.copy_(x0)
                graph.replay()
                torch.cuda.synchronize()
                c = check(xg, CHAIN)
                run = graph.replay
            else:
                xe.copy_(x0)
                chain(xe)
                torch.cuda.synchronize()
                c = check(xe, CHAIN)
                run = lambda: chain(xe)  # noqa: E731
            if not c.passed:
                return C.checked(base, c)
            ms, done = C.wall_per_call(calls, 10, max_s, run, torch.cuda.synchronize)
            rec = C.checked(base, c)
            rec.update(median_ms=ms, us_per_kernel=ms * 1e3 / CHAIN, calls=done, stat="mean", timer="wall_clock")
            return rec

        sink.item(base, measure)
