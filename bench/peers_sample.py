"""The peers of examples/bench/sample.rs, with the suite's shapes (bench/suite.json, family
`sample`) and option sets: the next token of each row of f32 logits drawn by torch eager as a
decoding loop writes it (Hugging Face's warpers: divide by the temperature, `topk` for top-k,
a sort and `cumsum` for top-p, `softmax`, `multinomial`; `argmax` for greedy), and
`torch.compile` of the same function. Run by peers.py (entries `torch_sample`, `compile_sample`).

A drawn token is checked, not compared: torch's generator is not gpukern's, so the check is that
every token is a column whose logit survives the filters (for greedy, the row's argmax); the
record's `rel_err` is the share of rows that fail it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import peers_common as C

RANGE = 6.0  # logits are uniform in [-6, 6)

# (label, temperature, top_k, top_p), as examples/bench/sample.rs's option_sets().
OPTION_SETS = [("greedy", 0.0, 0, 1.0), ("t1", 1.0, 0, 1.0), ("t0.8-k50-p0.9", 0.8, 50, 0.9)]


def sampler(torch: Any, t: float, k: int, p: float) -> Callable[[Any], Any]:
    """The function a decode loop calls: logits [rows, cols] -> tokens [rows]."""

    def draw(x: Any) -> Any:
        if t == 0.0:
            return torch.argmax(x, dim=-1)
        x = x / t
        if k > 0:
            kth = torch.topk(x, k, dim=-1).values[:, -1:]
            x = x.masked_fill(x < kth, float("-inf"))
        if p < 1.0:
            sorted_x, order = torch.sort(x, dim=-1, descending=False)
            cum = torch.softmax(sorted_x, dim=-1).cumsum(dim=-1)
            drop_sorted = cum <= 1.0 - p
            drop_sorted[:, -1] = False
            drop = drop_sorted.scatter(1, order, drop_sorted)
            x = x.masked_fill(drop, float("-inf"))
        return torch.multinomial(torch.softmax(x, dim=-1), 1).squeeze(1)

    return draw


def kept(torch: Any, x: Any, t: float, k: int) -> Any:
    """A loose admissible set for the check: greedy's argmax, else the top-k survivors (top-p
    only shrinks it)."""
    if t == 0.0:
        return torch.nn.functional.one_hot(torch.argmax(x, dim=-1), x.shape[1]).bool()
    if k > 0:
        return x >= torch.topk(x, k, dim=-1).values[:, -1:]
    return torch.isfinite(x)


def _run(ctx: Any, impl: str, compiled: bool) -> None:
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    if compiled:
        C.allow_recompiles(torch)
    for rows, cols in C.shapes("sample", ctx.quick):
        for label, t, k, p in OPTION_SETS:
            fn = sampler(torch, t, k, p)
            call = "argmax" if t == 0.0 else "topk/sort-cumsum/softmax/multinomial"
            if compiled:
                fn = torch.compile(fn, dynamic=False)
                call = f"torch.compile({call}, dynamic=False)"
            base = C.record(
                "sample", impl, f"{rows}x{cols}", rows=rows, cols=cols, options=label,
                version=version, call=call, allocates="its output and temporaries, per call",
            )

            def one(rows: int = rows, cols: int = cols, fn: Any = fn, t: float = t, k: int = k,
                    base: dict[str, Any] = base) -> dict[str, Any]:
                x = ctx.rand((rows, cols), -RANGE, RANGE)
                tokens = fn(x)
                torch.cuda.current_stream().synchronize()
                ok = kept(torch, x, t, k).gather(1, tokens.long()[:, None]).squeeze(1)
                wrong = float((~ok).float().mean().item())
                rec = C.checked(base, C.Check(wrong, 0.0, "admissible_set"))
                if wrong > 0.0:
                    return rec
                nbytes = C.bytes_of("sample", rows=rows, cols=cols)
                return C.timed(rec, ctx.timer.measure(lambda _i: fn(x), 4), nbytes, None)

            sink.item(base, one)


def torch_sample(ctx: Any) -> None:
    """torch eager: Hugging Face's warpers and `multinomial` (greedy: `argmax`)."""
    _run(ctx, "torch", compiled=False)


def compile_sample(ctx: Any) -> None:
    """The same function through `torch.compile`."""
    _run(ctx, "torch-compile", compiled=True)
