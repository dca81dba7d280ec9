"""The peers of gpukern's grouped (mixture-of-experts) product (examples/bench/matmul_grouped.rs):
`torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)` in bf16 (`x` the `tokens x k` packed
tokens, `w` the experts' weights `E x n x k` as `nn.Linear` stores them, `offs` the int32
cumulative end rows on the device), and torch's dense product of the same flops,
`torch.matmul(x, w0.T, out=y)` with one `n x k` weight (impl `torch:dense`). Run by peers.py
(entry `torch_grouped` of its PEERS).

Records: `kernel` `matmul_grouped`, keys `experts`, `tokens`, `n`, `k`, `split` (`uniform`,
`skewed` as `skewed_counts`, `dense`). Inputs uniform in [-1, 1), rounded to bf16; the check is
over 256 rows by 64 columns of the result spread over it, against the float64 product of the
rounded inputs (as in the Rust suite), three bf16 unit roundoffs.
"""

from __future__ import annotations

from typing import Any

import peers_common as C

TOL = 3.0 / 256.0
CHECKED_ROWS = 256
CHECKED_COLUMNS = 64
KERNEL = "matmul_grouped"


def grouped_shapes(quick: bool) -> list[tuple[int, ...]]:
    """The suite's shapes `(experts, tokens, n, k, skewed)` (bench/suite.json)."""
    return C.shapes(KERNEL, quick)


def skewed_counts(experts: int, tokens: int) -> list[int]:
    """The skewed split, as examples/bench/matmul_grouped.rs: expert `e` weighs `4096 // (e + 1)`,
    every 16th none; `tokens * weight // total` each, the remainder to expert 0."""
    weights = [0 if e % 16 == 15 else 4096 // (e + 1) for e in range(experts)]
    total = max(1, sum(weights))
    counts = [tokens * w // total for w in weights]
    counts[0] += tokens - sum(counts)
    return counts


def split_counts(shape: tuple[int, ...]) -> list[int]:
    experts, tokens, _, _, skewed = shape
    if skewed:
        return skewed_counts(experts, tokens)
    return [tokens // experts + (1 if e < tokens % experts else 0) for e in range(experts)]


def grouped_counts(shape: tuple[int, ...], dense: bool) -> tuple[float, float]:
    experts, tokens, n, k, _ = shape
    e = 1 if dense else experts
    return C.bytes_of(KERNEL, experts=e, tokens=tokens, n=n, k=k), C.flops_of(KERNEL, experts=e, tokens=tokens, n=n, k=k)


def checked(tokens: int, n: int) -> tuple[list[int], list[int]]:
    """The rows and columns of the result the check reads (as the Rust suite)."""
    rows = list(range(0, tokens, max(1, -(-tokens // CHECKED_ROWS))))
    cols = list(range(0, n, max(1, -(-n // CHECKED_COLUMNS))))
    return rows, cols


def _base(shape: tuple[int, ...], impl: str, split: str, version: str, call: str) -> dict[str, Any]:
    experts, tokens, n, k, _ = shape
    name = f"e{experts}x{tokens}x{n}x{k}-{split}"
    rec = C.record(KERNEL, impl, name, experts=experts, tokens=tokens, n=n, k=k, split=split, math="bf16", layout="w E x n x k", version=version, call=call)
    rec["dtype"] = "bf16"
    return rec


def torch_grouped(ctx: Any) -> None:
    """`torch._grouped_mm` at every shape, and `torch.matmul` dense at the uniform ones."""
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    for shape in grouped_shapes(ctx.quick):
        experts, tokens, n, k, skewed = shape
        split = "skewed" if skewed else "uniform"
        rows_to_run = [("torch", split, False)]
        if not skewed:
            rows_to_run.append(("torch:dense", "dense", True))
        for impl, split_name, dense in rows_to_run:
            call = "torch.matmul(x, w.T, out=y)" if dense else "torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)"
            base = _base(shape, impl, split_name, version, call)

            def measure(shape: tuple[int, ...] = shape, base: dict[str, Any] = base, dense: bool = dense) -> dict[str, Any]:
                experts, tokens, n, k, _ = shape
                nbytes, flops = grouped_counts(shape, dense)
                sets = C.sets_for(int(nbytes))
                counts = split_counts(shape)
                ends = torch.tensor(counts, device="cuda", dtype=torch.int64).cumsum(0).to(torch.int32)
                x = ctx.rand((tokens, k)).to(torch.bfloat16)
                w = ctx.rand((1 if dense else experts, n, k)).to(torch.bfloat16)
                rows, cols = checked(tokens, n)
                rows_t = torch.tensor(rows, device="cuda")
                cols_t = torch.tensor(cols, device="cuda")
                expert_of = torch.searchsorted(ends.to(torch.int64), rows_t, right=True).clamp(max=w.shape[0] - 1)
                if dense:
                    expert_of = torch.zeros_like(expert_of)
                xs = x.index_select(0, rows_t).double()
                ws = w.index_select(1, cols_t)[expert_of].double()  # rows x cols x k
                ref = torch.einsum("rk,rck->rc", xs, ws)
                bufs = [(x.clone(), w.clone(), ends.clone()) for _ in range(sets)]
                del x, w
                rec = {**base, "sets": sets, "checked_elements": len(rows) * len(cols)}

                def launch(i: int) -> Any:
                    a, b, o = bufs[i % sets]
                    if dense:
                        return torch.matmul(a, b[0].T)
                    return torch._grouped_mm(a, b.transpose(-2, -1), offs=o)

                def once() -> Any:
                    return launch(0).index_select(0, rows_t).index_select(1, cols_t)

                rec = C.timed_check(ctx, rec, once, ref, launch, nbytes, flops, TOL)
                bufs.clear()
                return rec

            sink.item(base, measure)


def selftest() -> list[str]:
    failures = []
    c = skewed_counts(128, 65536)
    if sum(c) != 65536 or any(c[e] != 0 for e in range(15, 128, 16)) or not c[0] > c[1] > c[2]:
        failures.append("grouped: the skewed split does not add up or has experts 15, 31, ... non-empty")
    if split_counts((128, 65536, 1536, 2048, 0)) != [512] * 128:
        failures.append("grouped: the uniform split of 65536 over 128 is not 512 each")
    b, f = grouped_counts((128, 65536, 1536, 2048, 0), False)
    if f != 2.0 * 65536 * 1536 * 2048 or b != 2.0 * (65536 * 2048 + 128 * 1536 * 2048 + 65536 * 1536):
        failures.append("grouped: the suite's counts are wrong")
    return failures
