"""The peers of examples/bench/decode_attention.rs, with the suite's shapes (bench/suite.json,
family `decode_attention`: batch 1 and 8, context 4096, 32 heads, 8 kv heads, head dim 128, one
query), bf16 inputs, checks against a float64 reference and timing:

* `torch`: `F.scaled_dot_product_attention(q, k, v, enable_gqa=True)` over K and V gathered
  into contiguous `[batch, kv_heads, context, head_dim]` tensors (the gather from a paged cache
  is done once, outside the timed region: the peer at its best), and the same call with K and V
  already expanded to the q heads (`torch-expanded`: a layout a user might keep instead);
* `torch-compile`: the GQA call through `torch.compile`;
* `flash-attn`: FlashAttention's `flash_attn_with_kvcache` over its own paged cache (pages of 256
  tokens, the block size its paged path requires) with a block table, when `flash_attn` is
  importable. When it is not (it is not installed on the lent H200 as of 2026-12-01, see
  /work/shared/TOOLCHAIN.md), one record says so with the import error, and no figure.

Run by peers.py (entries `torch_decode_attention` and `compile_decode_attention` of its PEERS).
"""

from __future__ import annotations

from typing import Any

import peers_common as C

# Relative error (norm) that passes: the bf16 output's rounding (2^-9) with a margin.
DECODE_TOL = 1e-2
# FlashAttention-2's paged cache needs pages of a multiple of 256 tokens.
FA_PAGE = 256


def decode_ref(torch: Any, q: Any, k: Any, v: Any) -> Any:
    """softmax(q k^T / sqrt(d)) v in float64; q [B, H, Q, D], k and v [B, KVH, S, D] (GQA by
    repeating each kv head over its q heads). Causal among the Q newest queries."""
    b, h, qn, d = q.shape
    group = h // k.shape[1]
    kd = k.double().repeat_interleave(group, dim=1)
    vd = v.double().repeat_interleave(group, dim=1)
    s = (q.double() @ kd.transpose(-1, -2)) / d**0.5
    ctx = k.shape[2]
    # Query i sits at position ctx - qn + i and sees keys up to it.
    pos = torch.arange(ctx, device=q.device)
    limit = torch.arange(ctx - qn, ctx, device=q.device)
    s = s.masked_fill(pos[None, :] > limit[:, None], float("-inf"))
    return torch.softmax(s, dim=-1) @ vd


def _inputs(ctx: Any, batch: int, heads: int, kv_heads: int, d: int, context: int, q_len: int) -> tuple[Any, Any, Any]:
    torch = ctx.torch
    q = ctx.rand((batch, heads, q_len, d), -4.0, 4.0).to(torch.bfloat16)
    k = ctx.rand((batch, kv_heads, context, d)).to(torch.bfloat16)
    v = ctx.rand((batch, kv_heads, context, d)).to(torch.bfloat16)
    return q, k, v


def _run(ctx: Any, compiled: bool) -> None:
    torch, sink = ctx.torch, ctx.sink
    F = torch.nn.functional
    version = torch.__version__

    def gqa(q: Any, k: Any, v: Any) -> Any:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    def dense(q: Any, k: Any, v: Any) -> Any:
        return F.scaled_dot_product_attention(q, k, v)

    if compiled:
        C.allow_recompiles(torch)
        variants = [("torch-compile", torch.compile(gqa, dynamic=False), "torch.compile(F.scaled_dot_product_attention(q, k, v, enable_gqa=True))", False)]
    else:
        variants = [
            ("torch", gqa, "F.scaled_dot_product_attention(q, k, v, enable_gqa=True)", False),
            ("torch-expanded", dense, "F.scaled_dot_product_attention(q, k_expanded, v_expanded)", True),
        ]
    for batch, heads, kv_heads, d, context, q_len in C.shapes("decode_attention", ctx.quick):
        if q_len != 1:
            # SDPA's is_causal aligns the mask to the top left, not to the newest queries.
            continue
        dims = dict(batch=batch, heads=heads, kv_heads=kv_heads, head_dim=d, context=context, q_len=q_len)
        shape = f"b{batch}h{heads}kv{kv_heads}d{d}ctx{context}q{q_len}"
        for impl, fn, call, expanded in variants:
            base = C.record(
                "decode_attention", impl, shape, **dims, dtype="bf16", version=version, call=call,
                allocates="its output, per call", layout="contiguous K/V gathered outside the timed region",
            )

            def measure(fn: Any = fn, expanded: bool = expanded, base: dict[str, Any] = base) -> dict[str, Any]:
                nbytes = C.bytes_of("decode_attention", **dims)
                sets = C.sets_for(int(nbytes * (heads // kv_heads if expanded else 1)))
                bufs = []
                for _ in range(sets):
                    q, k, v = _inputs(ctx, batch, heads, kv_heads, d, context, q_len)
                    if expanded:
                        k = k.repeat_interleave(heads // kv_heads, dim=1)
                        v = v.repeat_interleave(heads // kv_heads, dim=1)
                    bufs.append((q, k, v))
                q, k, v = bufs[0]
                ref = decode_ref(torch, q, k, v)

                def launch(i: int) -> Any:
                    return fn(*bufs[i % sets])

                return C.timed_check(ctx, {**base, "sets": sets}, lambda: launch(0).float(), ref, launch, nbytes, None, tol=DECODE_TOL)

            sink.item(base, measure)


def torch_decode(ctx: Any) -> None:
    """torch eager SDPA (GQA, and over expanded K/V), then FlashAttention's paged call if importable."""
    _run(ctx, compiled=False)
    flash_decode(ctx)


def compile_decode(ctx: Any) -> None:
    """The GQA SDPA call through `torch.compile`."""
    _run(ctx, compiled=True)


def flash_decode(ctx: Any) -> None:
    """`flash_attn_with_kvcache` over a paged cache, or one record saying it is not importable."""
    torch, sink = ctx.torch, ctx.sink
    try:
        from flash_attn import flash_attn_with_kvcache  # type: ignore[import-not-found]
    except Exception as e:  # noqa: BLE001 - any failure to import is reported as such
        sink.emit(C.record("decode_attention", "flash-attn", "all", skipped=f"flash_attn is not importable: {e!r}"))
        return
    for batch, heads, kv_heads, d, context, q_len in C.shapes("decode_attention", ctx.quick):
        dims = dict(batch=batch, heads=heads, kv_heads=kv_heads, head_dim=d, context=context, q_len=q_len)
        shape = f"b{batch}h{heads}kv{kv_heads}d{d}ctx{context}q{q_len}"
        base = C.record(
            "decode_attention", "flash-attn", shape, **dims, dtype="bf16", block_size=FA_PAGE,
            call="flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table=..., causal=True)",
        )

        def measure(base: dict[str, Any] = base, dims: dict[str, int] = dims) -> dict[str, Any]:
            nbytes = C.bytes_of("decode_attention", **dims)
            sets = C.sets_for(int(nbytes))
            pages = context // FA_PAGE + (context % FA_PAGE > 0)
            bufs = []
            for _ in range(sets):
                q, k, v = _inputs(ctx, batch, heads, kv_heads, d, context, q_len)
                padded = pages * FA_PAGE
                kp = torch.zeros((batch, kv_heads, padded, d), dtype=k.dtype, device="cuda")
                vp = torch.zeros_like(kp)
                kp[:, :, :context] = k
                vp[:, :, :context] = v
                # [num_pages, page, kv_heads, d], page ids shuffled.
                perm = torch.randperm(batch * pages, device="cuda")
                kc = torch.empty((batch * pages, FA_PAGE, kv_heads, d), dtype=k.dtype, device="cuda")
                vc = torch.empty_like(kc)
                kc[perm] = kp.permute(0, 2, 1, 3).reshape(batch * pages, FA_PAGE, kv_heads, d)
                vc[perm] = vp.permute(0, 2, 1, 3).reshape(batch * pages, FA_PAGE, kv_heads, d)
                table = perm.view(batch, pages).to(torch.int32)
                lens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
                bufs.append((q.transpose(1, 2).contiguous(), kc, vc, lens, table, (q, k, v)))
            qf, kc, vc, lens, table, (q, k, v) = bufs[0]
            ref = decode_ref(torch, q, k, v).transpose(1, 2)

            def launch(i: int) -> Any:
                qf, kc, vc, lens, table, _ = bufs[i % sets]
                return flash_attn_with_kvcache(qf, kc, vc, cache_seqlens=lens, block_table=table, causal=True)

            return C.timed_check(ctx, {**base, "sets": sets}, lambda: launch(0).float(), ref, launch, nbytes, None, tol=DECODE_TOL)

        sink.item(base, measure)
