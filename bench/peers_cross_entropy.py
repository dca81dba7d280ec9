"""The peers of examples/bench/cross_entropy.rs, with the suite's shapes (bench/suite.json, family
`cross_entropy`: 8 GiB of logits last), inputs, checks and timing: torch eager
`F.cross_entropy(reduction='none')` and `'mean'`, and `torch.compile` of the same functions. Run
by peers.py (entries `torch_norm` and `compile_norm` of its PEERS, after peers_norm.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import peers_common as C

CE_RANGE = 5.0  # logits are uniform in [-5, 5)
CE_REF_ROWS = 1024  # rows per step of the f64 cross-entropy reference (bounds its memory)


def ce_ref(torch: Any, x: Any, labels: Any) -> Any:
    """Per-row losses logsumexp(x) - x[label] in float64, CE_REF_ROWS rows at a time."""
    parts = []
    for start in range(0, x.shape[0], CE_REF_ROWS):
        xd = x[start : start + CE_REF_ROWS].double()
        picked = xd.gather(1, labels[start : start + CE_REF_ROWS, None]).squeeze(1)
        parts.append(torch.logsumexp(xd, dim=-1) - picked)
    return torch.cat(parts)


def functions(torch: Any) -> dict[str, tuple[Callable[..., Any], str]]:
    F = torch.nn.functional
    return {
        "cross_entropy": (
            lambda x, y: F.cross_entropy(x, y, reduction="none"),
            "F.cross_entropy(x, y, reduction='none')",
        ),
        "cross_entropy_mean": (
            lambda x, y: F.cross_entropy(x, y, reduction="mean"),
            "F.cross_entropy(x, y, reduction='mean')",
        ),
    }


def _run(ctx: Any, impl: str, compiled: bool) -> None:
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    fns = functions(torch)
    if compiled:
        C.allow_recompiles(torch)
        fns = {k: (torch.compile(f, dynamic=False), f"torch.compile({c}, dynamic=False)") for k, (f, c) in fns.items()}

    for rows, cols in C.shapes("cross_entropy", ctx.quick):
        for kernel, reduction in (("cross_entropy", "none"), ("cross_entropy_mean", "mean")):
            fn, call = fns[kernel]
            base = C.record(
                kernel, impl, f"{rows}x{cols}", rows=rows, cols=cols, reduction=reduction,
                version=version, call=call, allocates="its output, per call",
            )

            def ce(
                rows: int = rows, cols: int = cols, reduction: str = reduction, fn: Any = fn,
                kernel: str = kernel, base: dict[str, Any] = base,
            ) -> dict[str, Any]:
                nbytes = C.bytes_of(kernel, rows=rows, cols=cols)
                sets = C.sets_for(int(nbytes))
                x = ctx.rand((rows, cols), -CE_RANGE, CE_RANGE)
                labels = torch.randint(0, cols, (rows,), device="cuda", generator=ctx.gen)
                ref = ce_ref(torch, x, labels)
                if reduction == "mean":
                    ref = ref.mean()
                bufs = [(x, labels)] + [(x.clone(), labels.clone()) for _ in range(sets - 1)]

                def launch(i: int) -> Any:
                    xi, yi = bufs[i % sets]
                    return fn(xi, yi)

                return C.timed_check(ctx, {**base, "sets": sets}, lambda: launch(0), ref, launch, nbytes, None)

            sink.item(base, ce)


def torch_cross_entropy(ctx: Any) -> None:
    """torch eager: `F.cross_entropy`, per row and mean."""
    _run(ctx, "torch", compiled=False)


def compile_cross_entropy(ctx: Any) -> None:
    """The same functions through `torch.compile`."""
    _run(ctx, "torch-compile", compiled=True)
