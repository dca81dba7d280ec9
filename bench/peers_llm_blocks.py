"""The peers of gpukern's LLM building blocks (issue 37), with the same shapes (bench/suite.json,
families `residual_norm` and `glu`), byte models, inputs, checks and timing as
examples/bench/llm_blocks.rs, all bf16:

- `residual_rms_norm`: `h = x + res; y = F.rms_norm(h, (cols,), w, eps)`, returning `(h, y)`
  (torch >= 2.4; the f32 formula before);
- `swiglu`: `gate, up = x.chunk(2, -1); F.silu(gate) * up`;
- `geglu`: `gate, up = x.chunk(2, -1); F.gelu(gate, approximate="tanh") * up`;
- `rotary`: HF Llama's formulation (`LlamaRotaryEmbedding` and `apply_rotary_pos_emb`): the
  angles `positions * inv_freq` in f32, `cos`, `sin` cast to bf16, then
  `q * cos + rotate_half(q) * sin` and the same for `k`, new tensors (HF's are not in place);
- `embedding`: `F.embedding(ids, table)`.

`torch` runs them eagerly; `torch-compile` through `torch.compile(dynamic=False)` (Inductor fuses
each into one generated kernel), compiled by the check's call before anything is timed.

Run by peers.py (entries `torch_llm` and `compile_llm` of its PEERS). The families `rotary` and
`embedding` of the suite have the shapes; theta is Llama 3's 500000, positions below 8192.
"""

from __future__ import annotations

from typing import Any, Callable

import peers_common as C

EPS = 1e-5  # examples/bench/llm_blocks.rs EPS
THETA = 500000.0  # examples/bench/llm_blocks.rs THETA
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


def inv_freq(torch: Any, head_dim: int) -> Any:
    """`theta^(-2i / head_dim)` in float64, rounded once to f32 (as gpukern's table)."""
    i = torch.arange(0, head_dim, 2, dtype=torch.float64, device="cuda")
    return (THETA ** (-i / head_dim)).float()


def rotate_half(torch: Any, x: Any) -> Any:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotary_ref(torch: Any, q: Any, k: Any, pos: Any, freq: Any) -> Any:
    """The f32 angles, cos and sin in float64, the rotation in float64; q and k concatenated."""
    angle = (pos[:, None].float() * freq[None, :]).double()
    emb = torch.cat((angle, angle), dim=-1)[:, None, :]
    cos, sin = emb.cos(), emb.sin()
    out = [(x.double() * cos + rotate_half(torch, x.double()) * sin).flatten() for x in (q, k)]
    return torch.cat(out)


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

    def rotary(q: Any, k: Any, pos: Any, freq: Any) -> Any:
        freqs = pos[:, None].float() * freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(q.dtype)[:, None, :], emb.sin().to(q.dtype)[:, None, :]
        return q * cos + rotate_half(torch, q) * sin, k * cos + rotate_half(torch, k) * sin

    return {
        "rotary": (rotary, "HF apply_rotary_pos_emb with cos/sin from positions (bf16)"),
        "embedding": (lambda ids, table: F.embedding(ids, table), "F.embedding(ids, table)"),
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

    for tokens, heads, kv, d in C.shapes("rotary", ctx.quick):
        fn, call = fns["rotary"]
        base = C.record(
            "rotary", impl, f"{tokens}x{heads}x{kv}x{d}", dtype="bf16", tokens=tokens, heads=heads, kv_heads=kv,
            head_dim=d, theta=THETA, layout="half-split", version=torch.__version__, call=call,
            allocates="its outputs, per call",
        )

        def rope(
            tokens: int = tokens, heads: int = heads, kv: int = kv, d: int = d, fn: Any = fn,
            base: dict[str, Any] = base,
        ) -> dict[str, Any]:
            nbytes = C.bytes_of("rotary", tokens=tokens, heads=heads, kv_heads=kv, head_dim=d)
            sets = C.sets_for(int(nbytes))
            q = ctx.rand((tokens, heads, d)).to(bf16)
            k = ctx.rand((tokens, kv, d)).to(bf16)
            pos = (ctx.rand((tokens,), 0.0, 8192.0)).long()
            freq = inv_freq(torch, d)
            qs, ks = [q.clone() for _ in range(sets)], [k.clone() for _ in range(sets)]
            ref = rotary_ref(torch, q, k, pos, freq)

            def once() -> Any:
                a, b = fn(q, k, pos, freq)
                return torch.cat([a.flatten(), b.flatten()])

            return C.timed_check(
                ctx, {**base, "sets": sets}, once, ref, lambda i: fn(qs[i % sets], ks[i % sets], pos, freq), nbytes,
                None, BF16_TOL,
            )

        sink.item(base, rope)

    for tokens, vocab, hidden in C.shapes("embedding", ctx.quick):
        fn, call = fns["embedding"]
        base = C.record(
            "embedding", impl, f"{tokens}x{vocab}x{hidden}", dtype="bf16", tokens=tokens, vocab=vocab, hidden=hidden,
            version=torch.__version__, call=call, allocates="its output, per call",
        )

        def gather(
            tokens: int = tokens, vocab: int = vocab, hidden: int = hidden, fn: Any = fn, base: dict[str, Any] = base
        ) -> dict[str, Any]:
            nbytes = C.bytes_of("embedding", tokens=tokens, vocab=vocab, hidden=hidden)
            sets = C.sets_for(int(nbytes))
            table = ctx.rand((vocab, hidden)).to(bf16)
            ids = ctx.rand((tokens,), 0.0, float(vocab)).long().clamp_(0, vocab - 1)
            idss = [ids.clone() for _ in range(sets)]
            ref = table[ids].double()
            return C.timed_check(
                ctx, {**base, "sets": sets}, lambda: fn(ids, table), ref, lambda i: fn(idss[i % sets], table), nbytes,
                None, BF16_TOL,
            )

        sink.item(base, gather)


def peer_torch_llm(ctx: Any) -> None:
    """torch eager: the residual RMSNorm, SwiGLU, GeGLU, rotary and embedding as a model writes
    them."""
    _run(ctx, "torch", compiled=False)


def peer_compile_llm(ctx: Any) -> None:
    """The same functions through `torch.compile` (Inductor's generated Triton kernels)."""
    _run(ctx, "torch-compile", compiled=True)
