"""The peers of gpukern's LLM building blocks (issue 37), with the same shapes (bench/suite.json,
families `residual_norm` and `glu`), byte models, inputs, checks and timing as
examples/bench/llm_blocks.rs, all bf16:

- `residual_rms_norm`: `h = x + res; y = F.rms_norm(h, (cols,), w, eps)`, returning `(h, y)`
  (torch >= 2.4; the f32 formula before);
- `swiglu`: `gate, up = x.chunk(2, -1); F.silu(gate) * up`;
- `geglu`: `gate, up = x.chunk(2, -1); F.gelu(gate, approximate="tanh") * up`.

`torch` runs them eagerly; `torch-compile` through `torch.compile(dynamic=False)` (Inductor fuses
each into one generated kernel), compiled by the check's call before anything is timed.

Run by peers.py (entries `torch_llm` and `compile_llm` of its PEERS).
"""

from __future__ import annotations

from typing import Any, Callable

import peers_common as C

EPS = 1e-5  # examples/bench/llm_blocks.rs EPS
BF16_TOL = 1e-2  # one rounding to bf16 (8 significant bits) is at most 2^-9 relative


def residual_ref(torch: Any, x: Any, r: Any, w: Any) -> Any:
    """`h` rounded to bf16 (what the kernel stores and normalises), then RMSNorm in float64;
    `h` and `y` concatenated, as the check compares them."""
    h = (x.float() + r.float()).to(torch.bfloat16).double()
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * w.double()
    return torch.cat([h.flatten(), y.flatten()])


def glu_ref(torch: Any, x: Any, kernel: str) -> Any:
    gate, up = x.double().chunk(2, dim=-1)
    F = torch.nn.functional
    act = F.silu(gate) if kernel == "swiglu" else F.gelu(gate, approximate="tanh")
    return act * up


def functions(torch: Any) -> dict[str, tuple[Callable[..., Any], str]]:
    F = torch.nn.functional

    if hasattr(F, "rms_norm"):
        def residual(x: Any, r: Any, w: Any) -> Any:
            h = x + r
            return h, F.rms_norm(h, (h.shape[-1],), w, EPS)

        residual_call = "h = x + res; F.rms_norm(h, (cols,), w, eps)"
    else:
        def residual(x: Any, r: Any, w: Any) -> Any:
            h = x + r
            hf = h.float()
            return h, (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + EPS)).to(h.dtype) * w

        residual_call = "h = x + res; h * rsqrt(mean(h^2) + eps) * w (f32; torch has no F.rms_norm)"

    def swiglu(x: Any) -> Any:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up

    def geglu(x: Any) -> Any:
        gate, up = x.chunk(2, dim=-1)
        return F.gelu(gate, approximate="tanh") * up

    return {
        "residual_rms_norm": (residual, residual_call),
        "swiglu": (swiglu, "gate, up = x.chunk(2, -1); F.silu(gate) * up"),
        "geglu": (geglu, 'gate, up = x.chunk(2, -1); F.gelu(gate, approximate="tanh") * up'),
    }


def _run(ctx: Any, impl: str, compiled: bool) -> None:
    torch, sink = ctx.torch, ctx.sink
    fns = functions(torch)
    if compiled:
        C.allow_recompiles(torch)
        fns = {k: (torch.compile(f, dynamic=False), f"torch.compile({c}, dynamic=False)") for k, (f, c) in fns.items()}
    bf16 = torch.bfloat16

    for rows, cols in C.shapes("residual_norm", ctx.quick):
        fn, call = fns["residual_rms_norm"]
        base = C.record(
            "residual_rms_norm", impl, f"{rows}x{cols}", dtype="bf16", rows=rows, cols=cols, eps=EPS,
            version=torch.__version__, call=call, allocates="its outputs, per call",
        )

        def residual(rows: int = rows, cols: int = cols, fn: Any = fn, base: dict[str, Any] = base) -> dict[str, Any]:
            nbytes = C.bytes_of("residual_rms_norm", rows=rows, cols=cols, e=2)
            sets = C.sets_for(int(nbytes))
            x, r = ctx.rand((rows, cols), -2.0, 2.0).to(bf16), ctx.rand((rows, cols), -2.0, 2.0).to(bf16)
            w = ctx.rand((cols,), 0.5, 1.5).to(bf16)
            xs, rs = [x.clone() for _ in range(sets)], [r.clone() for _ in range(sets)]
            ref = residual_ref(torch, x, r, w)

            def once() -> Any:
                h, y = fn(x, r, w)
                return torch.cat([h.flatten(), y.flatten()])

            return C.timed_check(
                ctx, {**base, "sets": sets}, once, ref, lambda i: fn(xs[i % sets], rs[i % sets], w), nbytes, None,
                BF16_TOL,
            )

        sink.item(base, residual)

    for rows, n in C.shapes("glu", ctx.quick):
        for kernel in ("swiglu", "geglu"):
            fn, call = fns[kernel]
            base = C.record(
                kernel, impl, f"{rows}x{n}", dtype="bf16", rows=rows, n=n, version=torch.__version__, call=call,
                allocates="its output, per call",
            )

            def glu(
                rows: int = rows, n: int = n, kernel: str = kernel, fn: Any = fn, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                nbytes = C.bytes_of(kernel, rows=rows, n=n, e=2)
                sets = C.sets_for(int(nbytes))
                x = ctx.rand((rows, 2 * n), -4.0, 4.0).to(bf16)
                xs = [x.clone() for _ in range(sets)]
                ref = glu_ref(torch, x, kernel)
                return C.timed_check(
                    ctx, {**base, "sets": sets}, lambda: fn(x), ref, lambda i: fn(xs[i % sets]), nbytes, None, BF16_TOL
                )

            sink.item(base, glu)


def peer_torch_llm(ctx: Any) -> None:
    """torch eager: the residual RMSNorm, SwiGLU and GeGLU as a model writes them."""
    _run(ctx, "torch", compiled=False)


def peer_compile_llm(ctx: Any) -> None:
    """The same functions through `torch.compile` (Inductor's generated Triton kernels)."""
    _run(ctx, "torch-compile", compiled=True)
