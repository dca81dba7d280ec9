"""The peers of examples/bench/memory.rs: device-to-device copy (`y.copy_(x)`) and add, with the
suite's sizes (bench/suite.json, family `memory`): PyTorch eager and the Numba tutorial's
thread-indexed add. `increment_by_one` has no peer (it is gpukern's first example kernel).
"""

from __future__ import annotations

from typing import Any

import peers_common as C

# numba.cuda (C.import_numba_cuda()) once a Numba peer runs: a module global, so that the kernels
# below find it as a global, as in the tutorials.
cuda: Any = None
NUMBA_BLOCK = 256  # threads per block of the Numba add and softmax


def build_numba_add() -> dict[str, Any]:
    """The Numba documentation's add kernel, in its style (also timed by peers_overhead.py)."""

    @cuda.jit
    def add(a, b, c):
        # One thread per element.
        i = cuda.grid(1)
        if i < c.size:
            c[i] = a[i] + b[i]

    return {"add": add}


def torch_memory(ctx: C.Ctx) -> None:
    """torch: `y.copy_(x)` and `torch.add(a, b, out=c)`."""
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__

    for n in C.sizes("memory", ctx.quick):
        base = C.record("copy", "torch", str(n), n=n, version=version, call="y.copy_(x)")

        def copy(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = C.sets_for(8 * n)
            xs = [ctx.rand((n,)) for _ in range(sets)]
            ys = [ctx.nan((n,)) for _ in range(sets)]
            return C.timed_check(
                ctx,
                {**base, "sets": sets},
                lambda: ys[0].copy_(xs[0]),
                xs[0].double(),
                lambda i: ys[i % sets].copy_(xs[i % sets]),
                C.bytes_of("copy", n=n),
                None,
            )

        sink.item(base, copy)

    for n in C.sizes("memory", ctx.quick):
        base = C.record("add", "torch", str(n), n=n, version=version, call="torch.add(a, b, out=c)")

        def add(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = C.sets_for(12 * n)
            a, b = ctx.rand((n,)), ctx.rand((n,))
            bufs = [(a.clone(), b.clone(), ctx.nan((n,))) for _ in range(sets)]
            ref = a.double() + b.double()

            def launch(i: int) -> Any:
                x, y, z = bufs[i % sets]
                return torch.add(x, y, out=z)

            return C.timed_check(ctx, {**base, "sets": sets}, lambda: launch(0), ref, launch, C.bytes_of("add", n=n), None)

        sink.item(base, add)


def numba_memory(ctx: C.Ctx) -> None:
    """Numba: the tutorial's thread-indexed add."""
    import numba

    global cuda
    cuda = C.import_numba_cuda()
    torch, sink = ctx.torch, ctx.sink
    version = numba.__version__
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    arr = cuda.as_cuda_array

    kernels = build_numba_add()

    for n in C.sizes("memory", ctx.quick):
        base = C.record("add", "numba", str(n), n=n, version=version, variant="add")

        def add(n: int = n, base: dict[str, Any] = base) -> dict[str, Any]:
            sets = C.sets_for(12 * n)
            a, b = ctx.rand((n,)), ctx.rand((n,))
            ts = [(a.clone(), b.clone(), ctx.nan((n,))) for _ in range(sets)]
            bufs = [tuple(arr(t) for t in s) for s in ts]
            grid = (n + NUMBA_BLOCK - 1) // NUMBA_BLOCK

            def launch(i: int) -> Any:
                x, y, z = bufs[i % sets]
                kernels["add"][grid, NUMBA_BLOCK, stream](x, y, z)
                return ts[i % sets][2]

            return C.timed_check(
                ctx,
                {**base, "sets": sets},
                lambda: launch(0),
                a.double() + b.double(),
                launch,
                C.bytes_of("add", n=n),
                None,
                max_batch=1,
            )

        sink.item(base, add)
