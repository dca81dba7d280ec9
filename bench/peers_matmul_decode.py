"""The peers of gpukern's decode products (examples/bench/matmul_decode.rs): `torch.matmul(x,
w.T, out=y)` on bf16 (cuBLAS underneath, torch's default settings) and the same product under
`torch.compile` (Inductor; mode "max-autotune-no-cudagraphs", which may pick a Triton GEMV or
cuBLAS), `x` of `m x k`, `w` of `n x k` as `nn.Linear` stores it, the result bf16. Run by peers.py
(entries `torch_decode` and `compile_decode` of its PEERS).

Records: `kernel` `matmul_decode`, keys `m`, `n`, `k`, `layout` "w n x k". Inputs uniform in
[-1, 1), rounded to bf16; the check is over 256 columns of the result spread over `n` against
the float64 product of the rounded inputs (as in the Rust suite), three bf16 unit roundoffs.
"""

from __future__ import annotations

from typing import Any

import peers_common as C

TOL = 3.0 / 256.0
CHECKED_COLUMNS = 256


def decode_shapes(quick: bool) -> list[tuple[int, ...]]:
    """The suite's shapes `(m, n, k)` (bench/suite.json, family `matmul_decode`)."""
    return C.shapes("matmul_decode", quick)


def decode_counts(shape: tuple[int, ...]) -> tuple[float, float]:
    m, n, k = shape
    return C.bytes_of("matmul_decode", m=m, n=n, k=k), C.flops_of("matmul_decode", m=m, n=n, k=k)


def checked_columns(n: int) -> list[int]:
    """The columns of `y` the check reads: every `ceil(n / 256)`-th (as the Rust suite)."""
    step = max(1, -(-n // CHECKED_COLUMNS))
    return list(range(0, n, step))


def _run(ctx: Any, impl: str, compiled: bool) -> None:
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    if compiled:
        C.allow_recompiles(torch)

        def product(x: Any, w: Any) -> Any:
            return torch.matmul(x, w.T)

        fn = torch.compile(product, mode="max-autotune-no-cudagraphs", dynamic=False)
    for shape in decode_shapes(ctx.quick):
        m, n, k = shape
        call = "torch.compile(torch.matmul(x, w.T))" if compiled else "torch.matmul(x, w.T, out=y)"
        base = C.mm_base("matmul_decode", impl, shape, dtype="bf16", math="bf16", layout="w n x k", version=version, call=call)

        def measure(shape: tuple[int, ...] = shape, base: dict[str, Any] = base) -> dict[str, Any]:
            m, n, k = shape
            nbytes, flops = decode_counts(shape)
            sets = C.sets_for(int(nbytes))
            x = ctx.rand((m, k)).to(torch.bfloat16)
            w = ctx.rand((n, k)).to(torch.bfloat16)
            cols = torch.tensor(checked_columns(n), device="cuda")
            ref = x.double() @ w.index_select(0, cols).double().T
            bufs = [(x.clone(), w.clone(), torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)) for _ in range(sets)]
            del w
            rec = {**base, "sets": sets, "checked_columns": len(cols)}

            def launch(i: int) -> Any:
                a, b, y = bufs[i % sets]
                if compiled:
                    return fn(a, b)
                return torch.matmul(a, b.T, out=y)

            def once() -> Any:
                return launch(0).index_select(1, cols)

            rec = C.timed_check(ctx, rec, once, ref, launch, nbytes, flops, TOL)
            bufs.clear()
            return rec

        sink.item(base, measure)


def peer_torch_decode(ctx: Any) -> None:
    """`torch.matmul(x, w.T, out=y)` in bf16."""
    _run(ctx, "torch", compiled=False)


def peer_compile_decode(ctx: Any) -> None:
    """The same product through `torch.compile`."""
    _run(ctx, "torch-compile", compiled=True)


def selftest() -> list[str]:
    failures = []
    if checked_columns(28672)[:3] != [0, 112, 224] or len(checked_columns(28672)) != 256:
        failures.append("decode: checked columns of n = 28672 are not every 112th")
    if len(checked_columns(100)) != 100:
        failures.append("decode: n = 100 should check every column")
    b, f = decode_counts((1, 28672, 8192))
    if f != 2.0 * 28672 * 8192 or b != 2.0 * (8192 + 28672 * 8192 + 28672):
        failures.append("decode: the suite's counts are wrong")
    return failures
