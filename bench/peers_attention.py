"""The peers of gpukern's attention forward, with the same shapes (bench/suite.json, family
`attention`), inputs (bf16 uniform in [-1, 1)), check and flop count as
examples/bench/attention.rs:

- `cudnn`: `F.scaled_dot_product_attention` with `sdpa_kernel(SDPBackend.CUDNN_ATTENTION)`;
- `flash`: the same with `SDPBackend.FLASH_ATTENTION` (FlashAttention-2 inside torch);
- `flex`: `torch.compile(flex_attention)`, with a causal `BlockMask` (`create_block_mask`, made
  once per shape, outside the timed region) for the causal rows;
- `triton`: the forward of Triton's fused-attention tutorial (FlashAttention-2's loop: a program
  per `BLOCK_M` query rows of one (batch, head), online softmax in base 2, causal as an unmasked
  stage below the diagonal and a masked stage on it), written out here in our words with the
  tutorial's autotuning: `BLOCK_M` 64 or 128, `BLOCK_N` 32, 64 or 128, 2 to 4 stages, 4 or 8
  warps, keyed on the sequence, head dim and mask, 8-warp configs of tiles under 128 x 128
  dropped as the tutorial does on Hopper. The first call of a shape tunes (outside the timing).

torch's layout is `[batch, heads, seq, head_dim]`: the peers get contiguous tensors of it (their
best case), where gpukern reads `[batch, seq, heads, head_dim]`. Records: kernel
`attention_fwd`, shape `BxSxHxD`, keys `b`, `seq`, `heads`, `head_dim`, `causal`, `dtype`;
TFLOP/s as FlashAttention counts (`4 b h s^2 d`, halved for causal). Each output is checked
before it is timed on sampled rows (batch 0, the first and last heads, 32 query rows spread over
the sequence) against a float64 reference of the same rounded inputs.

Run by peers.py (entries `torch_attention`: cudnn and flash; `flex_attention`: flex;
`triton_attention`: triton; `torch_attention_bwd`: the backward, kernel `attention_bwd`, cudnn
and flash, TFLOP/s 2.5 times the forward's count; `triton_attention_bwd`: the tutorial's
backward, `triton`; `flex_attention_masks` and `flex_attention_masks_bwd`: FlexAttention with
the mask rows' masks, forward and backward).
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any, Callable, Iterator

import peers_common as C

BF16_TOL = 1e-2  # as examples/bench/attention.rs TOL
SAMPLED_ROWS = 32  # query rows per sampled head (examples/bench/attention.rs SAMPLED_ROWS)


def attention_shapes(quick: bool) -> list[tuple[int, ...]]:
    """The suite's `(b, seq, heads, head_dim)` shapes (only those of `--shapes` where given)."""
    return C.only(C.shapes("attention", quick))


def attention_flops(b: int, s: int, h: int, d: int, causal: bool) -> float:
    full = C.flops_of("attention_fwd", b=b, seq=s, heads=h, head_dim=d)
    return full / 2 if causal else full


def sampled_rows(s: int) -> list[int]:
    """The query rows checked (the last among them), as the Rust bench picks them."""
    n = min(SAMPLED_ROWS, s)
    if SAMPLED_ROWS >= s:
        return list(range(n))
    return [r * (s - 1) // (SAMPLED_ROWS - 1) for r in range(n)]


def sampled_heads(h: int) -> list[int]:
    return [0, h - 1] if h > 1 else [0]


def reference(torch: Any, q: Any, k: Any, v: Any, causal: bool) -> Any:
    """float64 attention of the sampled rows of batch 0 (`[heads, rows, d]`), on the device."""
    s, d = q.shape[2], q.shape[3]
    rows = torch.tensor(sampled_rows(s), device=q.device)
    outs = []
    for hh in sampled_heads(q.shape[1]):
        qs = q[0, hh, rows].double()
        kk, vv = k[0, hh].double(), v[0, hh].double()
        scores = (qs @ kk.T) / d**0.5
        if causal:
            keys = torch.arange(s, device=q.device)
            scores = scores.masked_fill(keys[None, :] > rows[:, None], float("-inf"))
        outs.append(torch.softmax(scores, dim=-1) @ vv)
    return torch.stack(outs)


def sampled(torch: Any, out: Any) -> Any:
    s = out.shape[2]
    rows = torch.tensor(sampled_rows(s), device=out.device)
    return torch.stack([out[0, hh, rows] for hh in sampled_heads(out.shape[1])])


def _sdpa(torch: Any, backend_name: str) -> Callable[[Any, Any, Any, bool], Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)
    F = torch.nn.functional

    def run(q: Any, k: Any, v: Any, causal: bool) -> Any:
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def _cases(ctx: Any, kernel: str, impl: str, call: str) -> Iterator[tuple[int, int, int, int, bool, dict[str, Any]]]:
    """The suite's attention shapes, each causal and not, with the record of `impl` for `kernel`
    (`attention_fwd` or `attention_bwd`): `(b, s, h, d, causal, record)`."""
    for b, s, h, d in attention_shapes(ctx.quick):
        for causal in (False, True):
            yield b, s, h, d, causal, C.record(
                kernel, impl, f"{b}x{s}x{h}x{d}", b=b, seq=s, heads=h, head_dim=d, causal=causal,
                dtype="bf16", version=ctx.torch.__version__, call=call,
            )


def _run(ctx: Any, impl: str, make: Callable[[int, bool], Callable[[Any, Any, Any], Any]], call: str) -> None:
    torch, sink = ctx.torch, ctx.sink
    for b, s, h, d, causal, base in _cases(ctx, "attention_fwd", impl, call):

        def measure(b: int = b, s: int = s, h: int = h, d: int = d, causal: bool = causal, base: dict[str, Any] = base) -> dict[str, Any]:
            q, k, v = (ctx.rand((b, h, s, d)).to(torch.bfloat16) for _ in range(3))
            fn = make(s, causal)
            ref = reference(torch, q, k, v, causal)

            def launch(i: int) -> Any:
                return fn(q, k, v)

            return C.timed_check(
                ctx, base, lambda: sampled(torch, launch(0)), ref, launch, None,
                attention_flops(b, s, h, d, causal), BF16_TOL, max_batch=2,
            )

        sink.item(base, measure)


def torch_attention(ctx: Any) -> None:
    """torch SDPA with the cuDNN backend, then the FLASH backend, each forced."""
    torch = ctx.torch
    for impl, backend in (("cudnn", "CUDNN_ATTENTION"), ("flash", "FLASH_ATTENTION")):
        sdpa = _sdpa(torch, backend)
        _run(
            ctx, impl, lambda s, causal, sdpa=sdpa: (lambda q, k, v: sdpa(q, k, v, causal)),
            f"F.scaled_dot_product_attention under sdpa_kernel(SDPBackend.{backend})",
        )


def flex_attention(ctx: Any) -> None:
    """FlexAttention compiled (`torch.compile(flex_attention)`), causal through a block mask."""
    torch = ctx.torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention as flex

    C.allow_recompiles(torch)
    compiled = torch.compile(flex, dynamic=False)

    def make(s: int, causal: bool) -> Callable[[Any, Any, Any], Any]:
        if not causal:
            return lambda q, k, v: compiled(q, k, v)
        mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, B=None, H=None, Q_LEN=s, KV_LEN=s, device="cuda")
        return lambda q, k, v: compiled(q, k, v, block_mask=mask)

    _run(ctx, "flex", make, "torch.compile(flex_attention)(q, k, v[, block_mask=causal])")


# The mask rows (examples/bench/attention_masks.rs MASK_SHAPES, WINDOW, DOCUMENTS, SOFT_CAP):
# shape 4x4096x16x128, each mask as its own FlexAttention mask_mod / score_mod.
MASK_SHAPES = [(4, 4096, 16, 128)]
WINDOW = 1024
DOCUMENTS = 4
SOFT_CAP = 30.0
MASKS = ("sliding_window", "document", "alibi", "softcap")


def alibi_slope(hh: int, h: int) -> float:
    """ALiBi's slope of head `hh` of `h` (the paper's, as `gpukern_device::attention::Alibi`)."""
    return 2.0 ** (-8.0 * (hh + 1) / h)


def flex_mods(torch: Any, s: int, h: int, name: str) -> tuple[Any, Any]:
    """FlexAttention's `(mask_mod, score_mod)` for the mask row `name` at sequence `s` with `h`
    heads: the window and the documents as a `mask_mod` (document ids as a tensor it indexes, as
    FlexAttention's own document-masking example does), ALiBi and the soft cap as a `score_mod`
    with the causal `mask_mod`; `score_mod` None for the masks that drop pairs only."""
    doc_ids = (torch.arange(s, device="cuda") // (s // DOCUMENTS)).to(torch.int32)
    slopes = torch.tensor([alibi_slope(i, h) for i in range(h)], device="cuda")

    def causal(b_, h_, qi, ki):
        return qi >= ki

    def window(b_, h_, qi, ki):
        return (qi >= ki) & (qi - ki < WINDOW)

    def document(b_, h_, qi, ki):
        return doc_ids[qi] == doc_ids[ki]

    def alibi(score, b_, h_, qi, ki):
        return score + slopes[h_] * (ki - qi)

    def softcap(score, b_, h_, qi, ki):
        return SOFT_CAP * torch.tanh(score / SOFT_CAP)

    mask_mod = {"sliding_window": window, "document": document}.get(name, causal)
    return mask_mod, {"alibi": alibi, "softcap": softcap}.get(name)


def mask_pairs(name: str, s: int) -> float:
    """The (query, key) pairs one head of one sequence keeps, as the Rust bench counts them (ALiBi
    and the soft cap with the causal mask; the soft cap's rows counted all `s^2` until BENCHMARKS.md's
    thirty-eighth round)."""
    if name == "sliding_window":
        return sum(min(i + 1, WINDOW) for i in range(s))
    if name == "document":
        return DOCUMENTS * (s // DOCUMENTS) ** 2
    if name in ("alibi", "softcap"):
        return s * (s + 1) / 2
    return s * s


def masked_reference(torch: Any, q: Any, k: Any, v: Any, name: str) -> Any:
    """float64 attention with the mask of the sampled rows of batch 0 (`[heads, rows, d]`)."""
    s, d, h = q.shape[2], q.shape[3], q.shape[1]
    rows = torch.tensor(sampled_rows(s), device=q.device)
    keys = torch.arange(s, device=q.device)
    outs = []
    for hh in sampled_heads(h):
        qs = q[0, hh, rows].double()
        kk, vv = k[0, hh].double(), v[0, hh].double()
        scores = (qs @ kk.T) / d**0.5
        qi, ki = rows[:, None], keys[None, :]
        if name == "sliding_window":
            keep = (ki <= qi) & (ki > qi - WINDOW)
        elif name == "document":
            keep = (qi // (s // DOCUMENTS)) == (ki // (s // DOCUMENTS))
        elif name == "alibi":
            keep = ki <= qi
            scores = scores + alibi_slope(hh, h) * (ki - qi).double()
        else:
            keep = ki <= qi
            scores = SOFT_CAP * torch.tanh(scores / SOFT_CAP)
        scores = scores.masked_fill(~keep, float("-inf"))
        outs.append(torch.softmax(scores, dim=-1) @ vv)
    return torch.stack(outs)


def flex_attention_masks(ctx: Any) -> None:
    """FlexAttention compiled with each mask of the mask rows (`flex_mods`): the window and
    documents as a `BlockMask` from a `mask_mod` (made outside the timing), ALiBi and the soft cap
    as a `score_mod` with the causal `BlockMask`."""
    torch, sink = ctx.torch, ctx.sink
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention as flex

    C.allow_recompiles(torch)
    compiled = torch.compile(flex, dynamic=False)
    for b, s, h, d in MASK_SHAPES:
        for name in MASKS:
            mask_mod, score_mod = flex_mods(torch, s, h, name)
            base = C.record(
                "attention_fwd", "flex", f"{b}x{s}x{h}x{d}", b=b, seq=s, heads=h, head_dim=d,
                causal=name != "document", mask=name, dtype="bf16", version=torch.__version__,
                call=f"torch.compile(flex_attention)(q, k, v, score_mod={score_mod is not None}, block_mask=create_block_mask({mask_mod.__name__}))",
            )

            def measure(b: int = b, s: int = s, h: int = h, d: int = d, name: str = name,
                        mask_mod: Any = mask_mod, score_mod: Any = score_mod, base: dict[str, Any] = base) -> dict[str, Any]:
                q, k, v = (ctx.rand((b, h, s, d)).to(torch.bfloat16) for _ in range(3))
                block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=s, KV_LEN=s, device="cuda")
                ref = masked_reference(torch, q, k, v, name)

                def launch(i: int) -> Any:
                    return compiled(q, k, v, score_mod=score_mod, block_mask=block_mask)

                return C.timed_check(
                    ctx, base, lambda: sampled(torch, launch(0)), ref, launch, None,
                    4.0 * b * h * d * mask_pairs(name, s), BF16_TOL, max_batch=2,
                )

            sink.item(base, measure)


# The backward's mask rows (examples/bench/attention_masks.rs BACKWARD_MASKS): every mask on
# MASK_SHAPES; and ALiBi and the soft cap (BACKWARD_SCORE_MASKS) on BACKWARD_SCORE_SHAPES (head dim 64).
BACKWARD_MASKS = ("sliding_window", "document", "alibi", "softcap")
BACKWARD_SCORE_SHAPES = [(8, 2048, 32, 64)]
BACKWARD_SCORE_MASKS = ("alibi", "softcap")


def flex_attention_masks_bwd(ctx: Any) -> None:
    """FlexAttention's backward (compiled) with the window and the documents as a `BlockMask` from
    a `mask_mod`, ALiBi and the soft cap as a `score_mod` with the causal one, as
    `flex_attention_masks` makes them: the forward run once with `requires_grad`,
    then `torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)` timed alone; checked on
    sampled rows of the three gradients against the float64 autograd with the same mask
    (`reference_grads`). Records `attention_bwd`, impl `flex`, TFLOP/s 2.5 times the forward's
    count of kept pairs, as the Rust bench counts them."""
    torch, sink = ctx.torch, ctx.sink
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention as flex

    C.allow_recompiles(torch)
    compiled = torch.compile(flex, dynamic=False)
    rows = [(shape, BACKWARD_MASKS) for shape in MASK_SHAPES]
    rows += [(shape, BACKWARD_SCORE_MASKS) for shape in BACKWARD_SCORE_SHAPES]
    for (b, s, h, d), names in rows:
        for name in names:
            mask_mod, score_mod = flex_mods(torch, s, h, name)
            base = C.record(
                "attention_bwd", "flex", f"{b}x{s}x{h}x{d}", b=b, seq=s, heads=h, head_dim=d,
                causal=name != "document", mask=name, dtype="bf16", version=torch.__version__,
                call=f"torch.autograd.grad of torch.compile(flex_attention)(q, k, v, score_mod={score_mod is not None}, block_mask=create_block_mask({mask_mod.__name__}))",
            )

            def measure(b: int = b, s: int = s, h: int = h, d: int = d, name: str = name,
                        mask_mod: Any = mask_mod, score_mod: Any = score_mod,
                        base: dict[str, Any] = base) -> dict[str, Any]:
                q, k, v = (ctx.rand((b, h, s, d)).to(torch.bfloat16) for _ in range(3))
                dout = ctx.rand((b, h, s, d)).to(torch.bfloat16)
                block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=s, KV_LEN=s, device="cuda")
                qi = torch.arange(s, device="cuda")[:, None]
                ki = torch.arange(s, device="cuda")[None, :]
                keep = mask_mod(0, 0, qi, ki)
                ref = reference_grads(torch, q, k, v, dout, False, keep, alibi=name == "alibi",
                                      softcap=SOFT_CAP if name == "softcap" else None)
                del keep
                for x in (q, k, v):
                    x.requires_grad_(True)
                out = compiled(q, k, v, score_mod=score_mod, block_mask=block_mask)

                def launch(i: int) -> Any:
                    return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

                got = sampled_grads(torch, launch(0))
                torch.cuda.current_stream().synchronize()
                checks = [ctx.check(g, r, BF16_TOL) for g, r in zip(got, ref)]
                worst = max(checks, key=lambda c: float("inf") if c.rel_err != c.rel_err else c.rel_err)
                del ref, got
                rec = C.checked(base, worst)
                if not worst.passed:
                    return rec
                flops = 2.5 * 4.0 * b * h * d * mask_pairs(name, s)
                return C.timed(rec, ctx.timer.measure(launch, 2), None, flops)

            sink.item(base, measure)


# The varlen row (examples/bench/attention_masks.rs SEQ_LENS): 16384 tokens of 8 sequences packed
# in a batch of one, causal within each sequence, 16 heads of 128.
SEQ_LENS = [4096, 512, 3000, 1024, 2048, 3584, 1120, 1000]
VARLEN_HEADS, VARLEN_HEAD_DIM = 16, 128


def varlen_reference(torch: Any, q: Any, k: Any, v: Any) -> Any:
    """float64 attention of the sampled rows (`[heads, rows, d]`) of packed `[1, h, T, d]` operands,
    each row seeing its own sequence's keys up to itself."""
    t, d, h = q.shape[2], q.shape[3], q.shape[1]
    seq = torch.repeat_interleave(torch.arange(len(SEQ_LENS), device=q.device),
                                  torch.tensor(SEQ_LENS, device=q.device))
    rows = torch.tensor(sampled_rows(t), device=q.device)
    keys = torch.arange(t, device=q.device)
    keep = (seq[rows][:, None] == seq[None, :]) & (keys[None, :] <= rows[:, None])
    outs = []
    for hh in sampled_heads(h):
        scores = (q[0, hh, rows].double() @ k[0, hh].double().T) / d**0.5
        scores = scores.masked_fill(~keep, float("-inf"))
        outs.append(torch.softmax(scores, dim=-1) @ v[0, hh].double())
    return torch.stack(outs)


def varlen_flops() -> float:
    return 4.0 * VARLEN_HEADS * VARLEN_HEAD_DIM * sum(n * (n + 1) / 2 for n in SEQ_LENS)


def _varlen_run(ctx: Any, impl: str, call: str, make: Callable[[Any, Any, Any], Callable[[int], Any]]) -> None:
    """One varlen record: `make(q, k, v)` (packed `[1, h, T, d]`) gives the launch, whose output is
    `[1, h, T, d]`."""
    torch, sink = ctx.torch, ctx.sink
    t, h, d = sum(SEQ_LENS), VARLEN_HEADS, VARLEN_HEAD_DIM
    base = C.record(
        "attention_fwd", impl, f"1x{t}x{h}x{d}", b=1, seq=t, heads=h, head_dim=d, causal=True,
        mask="varlen", sequences=len(SEQ_LENS), dtype="bf16", version=torch.__version__, call=call,
    )

    def measure() -> dict[str, Any]:
        q, k, v = (ctx.rand((1, h, t, d)).to(torch.bfloat16) for _ in range(3))
        launch = make(q, k, v)
        ref = varlen_reference(torch, q, k, v)
        return C.timed_check(
            ctx, base, lambda: sampled(torch, launch(0)), ref, launch, None, varlen_flops(), BF16_TOL,
            max_batch=2,
        )

    sink.item(base, measure)


def torch_varlen(ctx: Any) -> None:
    """torch's `varlen_attn` (FlashAttention's varlen forward) on the packed `[T, h, d]` operands,
    causal within each sequence (`window_size=(-1, 0)`)."""
    torch = ctx.torch
    from torch.nn.attention.varlen import varlen_attn

    cu = torch.tensor([0, *itertools.accumulate(SEQ_LENS)], device="cuda", dtype=torch.int32)
    longest = max(SEQ_LENS)
    # Causal as torch 2.10+ spells it (a window of all keys before and none after); earlier
    # releases took `is_causal`.
    causal = ({"window_size": (-1, 0)} if "window_size" in inspect.signature(varlen_attn).parameters
              else {"is_causal": True})

    def make(q: Any, k: Any, v: Any) -> Callable[[int], Any]:
        qp, kp, vp = (x[0].transpose(0, 1).contiguous() for x in (q, k, v))

        def launch(i: int) -> Any:
            out = varlen_attn(qp, kp, vp, cu, cu, longest, longest, **causal)
            return out.transpose(0, 1).unsqueeze(0)

        return launch

    _varlen_run(ctx, "torch-varlen", "torch.nn.attention.varlen.varlen_attn(q, k, v, cu, cu, max, max, "
                "window_size=(-1, 0))", make)


def flex_varlen(ctx: Any) -> None:
    """FlexAttention compiled with the sequences as documents and the causal mask (its own
    document-masking example), the `BlockMask` made once outside the timing."""
    torch = ctx.torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention as flex

    C.allow_recompiles(torch)
    compiled = torch.compile(flex, dynamic=False)
    t = sum(SEQ_LENS)
    seq = torch.repeat_interleave(torch.arange(len(SEQ_LENS), device="cuda"),
                                  torch.tensor(SEQ_LENS, device="cuda")).to(torch.int32)

    def varlen_causal(b_, h_, qi, ki):
        return (seq[qi] == seq[ki]) & (qi >= ki)

    def make(q: Any, k: Any, v: Any) -> Callable[[int], Any]:
        block_mask = create_block_mask(varlen_causal, B=None, H=None, Q_LEN=t, KV_LEN=t, device="cuda")

        def launch(i: int) -> Any:
            return compiled(q, k, v, block_mask=block_mask)

        return launch

    _varlen_run(ctx, "flex", "torch.compile(flex_attention)(q, k, v, block_mask=create_block_mask(varlen_causal))",
                make)


def build_triton_attention(triton: Any, tl: Any) -> Any:
    """The Triton fused-attention tutorial's forward (see the module documentation), autotuned:
    `attn(q, k, v, out, causal)` on contiguous `[b, h, s, d]` tensors, `s` a multiple of 128."""

    def prune(configs: list[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
        # The causal split needs BLOCK_N to divide BLOCK_M; on Hopper the tutorial drops 8-warp
        # configs of tiles under 128 x 128.
        return [
            c for c in configs
            if c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0
            and not (c.num_warps == 8 and c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] < 128 * 128)
        ]

    configs = [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=stages, num_warps=warps)
        for bm in (64, 128)
        for bn in (32, 64, 128)
        for stages in (2, 3, 4)
        for warps in (4, 8)
    ]

    @triton.jit
    def tiles(acc, l_i, m_i, q, k_base, v_base, offs_m, lo, hi, qk_scale,
              HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        for start_n in range(lo, hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            # K^T tile [HEAD_DIM, BLOCK_N] and V tile [BLOCK_N, HEAD_DIM] of rows start_n..
            kt = tl.load(k_base + (start_n + offs_n)[None, :] * HEAD_DIM + offs_d[:, None])
            qk = tl.dot(q, kt)
            if MASKED:
                keep = offs_m[:, None] >= (start_n + offs_n)[None, :]
                qk = qk * qk_scale + tl.where(keep, 0.0, -1.0e6)
                m_ij = tl.maximum(m_i, tl.max(qk, 1))
                qk = qk - m_ij[:, None]
            else:
                m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
                qk = qk * qk_scale - m_ij[:, None]
            p = tl.math.exp2(qk)
            alpha = tl.math.exp2(m_i - m_ij)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            v = tl.load(v_base + (start_n + offs_n)[:, None] * HEAD_DIM + offs_d[None, :])
            acc = tl.dot(p.to(v.dtype), v, acc)
            m_i = m_ij
        return acc, l_i, m_i

    @triton.autotune(configs=configs, key=["N_CTX", "HEAD_DIM", "CAUSAL"], prune_configs_by={"early_config_prune": prune})
    @triton.jit
    def attn_fwd(Q, K, V, Out, qk_scale, N_CTX,
                 HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        start_m = tl.program_id(0)
        base = tl.program_id(1).to(tl.int64) * N_CTX * HEAD_DIM
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, HEAD_DIM)
        q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        if CAUSAL:
            # Below the diagonal block: no mask; then the diagonal block, masked.
            acc, l_i, m_i = tiles(acc, l_i, m_i, q, K + base, V + base, offs_m, 0, start_m * BLOCK_M, qk_scale,
                                  HEAD_DIM, BLOCK_N, False)
            acc, l_i, m_i = tiles(acc, l_i, m_i, q, K + base, V + base, offs_m, start_m * BLOCK_M,
                                  (start_m + 1) * BLOCK_M, qk_scale, HEAD_DIM, BLOCK_N, True)
        else:
            acc, l_i, m_i = tiles(acc, l_i, m_i, q, K + base, V + base, offs_m, 0, N_CTX, qk_scale,
                                  HEAD_DIM, BLOCK_N, False)
        acc = acc / l_i[:, None]
        tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(Out.dtype.element_ty))

    def attn(q: Any, k: Any, v: Any, out: Any, causal: bool) -> Any:
        b, h, s, d = q.shape
        if s % 128 != 0:
            raise ValueError(f"the tutorial kernel takes sequences that are multiples of 128, not {s}")
        qk_scale = d**-0.5 * 1.4426950408889634  # 1/sqrt(d) in base 2

        def grid(meta: dict[str, Any]) -> tuple[int, int]:
            return (triton.cdiv(s, meta["BLOCK_M"]), b * h)

        attn_fwd[grid](q, k, v, out, qk_scale, s, HEAD_DIM=d, CAUSAL=causal)
        return out

    return attn


def triton_attention(ctx: Any) -> None:
    """The Triton fused-attention tutorial's forward (`build_triton_attention`), autotuned."""
    import triton
    import triton.language as tl

    torch = ctx.torch
    attn = build_triton_attention(triton, tl)

    def make(s: int, causal: bool) -> Callable[[Any, Any, Any], Any]:
        out: dict[tuple[int, ...], Any] = {}

        def run(q: Any, k: Any, v: Any) -> Any:
            if q.shape not in out:
                out[q.shape] = torch.empty_like(q)
            return attn(q, k, v, out[q.shape], causal)

        return run

    _run(ctx, "triton", make, f"Triton fused-attention tutorial forward (triton {triton.__version__}, autotuned)")


def attention_bwd_flops(b: int, s: int, h: int, d: int, causal: bool) -> float:
    full = C.flops_of("attention_bwd", b=b, seq=s, heads=h, head_dim=d)
    return full / 2 if causal else full


def reference_grads(torch: Any, q: Any, k: Any, v: Any, dout: Any, causal: bool, keep: Any = None,
                    alibi: bool = False, softcap: float | None = None) -> list[Any]:
    """float64 gradients of the sampled heads of batch 0 (autograd of the written-out maths):
    `dq` at the sampled query rows, `dk` and `dv` at the sampled key rows, `[heads, rows, d]`;
    the pairs `keep` (`[s, s]` booleans) keeps where given, else causal or all; with `alibi`,
    ALiBi's bias `slope_h (k - q)` added to each head's scores; with `softcap`, the scores
    capped to `softcap tanh(x / softcap)`."""
    heads = sampled_heads(q.shape[1])
    s, d, h = q.shape[2], q.shape[3], q.shape[1]
    qq, kk, vv = (x[0, heads].double().requires_grad_(True) for x in (q, k, v))
    scores = (qq @ kk.transpose(-1, -2)) / d**0.5
    if alibi:
        pos = torch.arange(s, device=q.device, dtype=torch.float64)
        slopes = torch.tensor([alibi_slope(hh, h) for hh in heads], device=q.device, dtype=torch.float64)
        scores = scores + slopes[:, None, None] * (pos[None, :] - pos[:, None])[None]
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    if keep is None and causal:
        keep = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ vv
    grads = torch.autograd.grad(out, (qq, kk, vv), dout[0, heads].double())
    rows = torch.tensor(sampled_rows(s), device=q.device)
    return [g[:, rows].detach() for g in grads]


def sampled_grads(torch: Any, grads: Any) -> list[Any]:
    """The sampled rows of `(dq, dk, dv)` (`[b, h, s, d]` each), as `reference_grads` orders them."""
    s = grads[0].shape[2]
    rows = torch.tensor(sampled_rows(s), device=grads[0].device)
    heads = sampled_heads(grads[0].shape[1])
    return [g[0, heads][:, rows] for g in grads]


def _run_bwd(ctx: Any, impl: str, call: str,
             prepare: Callable[[Any, Any, Any, Any, bool], Callable[[int], Any]]) -> None:
    """One backward peer over the suite's shapes, causal and not: random bf16 `q`, `k`, `v` and
    `dout` (`[b, h, s, d]`), the float64 reference of their sampled rows, then `prepare(q, k, v,
    dout, causal)` (the forward, outside the timing) gives the launch of `(dq, dk, dv)`, checked
    on the sampled rows (the worst of the three relative errors) before it is timed."""
    torch, sink = ctx.torch, ctx.sink
    for b, s, h, d, causal, base in _cases(ctx, "attention_bwd", impl, call):

        def measure(b: int = b, s: int = s, h: int = h, d: int = d, causal: bool = causal,
                    base: dict[str, Any] = base) -> dict[str, Any]:
            q, k, v = (ctx.rand((b, h, s, d)).to(torch.bfloat16) for _ in range(3))
            dout = ctx.rand((b, h, s, d)).to(torch.bfloat16)
            ref = reference_grads(torch, q, k, v, dout, causal)
            launch = prepare(q, k, v, dout, causal)
            got = sampled_grads(torch, launch(0))
            torch.cuda.current_stream().synchronize()
            checks = [ctx.check(g, r, BF16_TOL) for g, r in zip(got, ref)]
            worst = max(checks, key=lambda c: float("inf") if c.rel_err != c.rel_err else c.rel_err)
            del ref, got
            rec = C.checked(base, worst)
            if not worst.passed:
                return rec
            return C.timed(rec, ctx.timer.measure(launch, 2), None, attention_bwd_flops(b, s, h, d, causal))

        sink.item(base, measure)


def torch_attention_bwd(ctx: Any) -> None:
    """torch SDPA's backward with the cuDNN backend, then the FLASH backend, each forced: the
    forward run once with `requires_grad`, then `torch.autograd.grad(out, (q, k, v), dout,
    retain_graph=True)` timed alone. Checked on sampled rows of the three gradients against the
    float64 autograd of the same inputs (the worst of the three relative errors; `_run_bwd`)."""
    torch = ctx.torch
    for impl, backend in (("cudnn", "CUDNN_ATTENTION"), ("flash", "FLASH_ATTENTION")):
        sdpa = _sdpa(torch, backend)

        def prepare(q: Any, k: Any, v: Any, dout: Any, causal: bool, sdpa: Any = sdpa) -> Callable[[int], Any]:
            for x in (q, k, v):
                x.requires_grad_(True)
            out = sdpa(q, k, v, causal)
            return lambda i: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

        _run_bwd(
            ctx, impl,
            f"torch.autograd.grad of F.scaled_dot_product_attention under sdpa_kernel(SDPBackend.{backend})",
            prepare,
        )


def build_triton_attention_bwd(triton: Any, tl: Any) -> Any:
    """The Triton fused-attention tutorial's backward (FlashAttention-2's: `delta = rowsum(dO o
    O)` first, then `dK`/`dV` by a program per `BLOCK_N` keys walking the query blocks, and `dQ`
    by a program per `BLOCK_M` queries walking the key blocks, the probabilities recomputed from
    the forward's log-sum-exp in base 2), written out here in our words, autotuned over block
    sizes, stages and warps: `bwd(q, k, v, o, do, lse, causal) -> (dq, dk, dv)` on contiguous
    `[b, h, s, d]` tensors, `lse` `[b, h, s]` float32 (natural log), `s` a multiple of 128."""

    def configs(big: str, small: str) -> list[Any]:
        return [
            triton.Config({big: b, small: m}, num_stages=stages, num_warps=warps)
            for b in (64, 128)
            for m in (32, 64)
            for stages in (2, 3)
            for warps in (4, 8)
        ]

    @triton.jit
    def delta_rows(O, DO, Delta, N_CTX, HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
        rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        base = tl.program_id(1).to(tl.int64) * N_CTX
        offs_d = tl.arange(0, HEAD_DIM)
        at = (base + rows[:, None]) * HEAD_DIM + offs_d[None, :]
        o = tl.load(O + at).to(tl.float32)
        do = tl.load(DO + at).to(tl.float32)
        tl.store(Delta + base + rows, tl.sum(o * do, 1))

    @triton.autotune(configs=configs("BLOCK_N", "BLOCK_M"), key=["N_CTX", "HEAD_DIM", "CAUSAL"])
    @triton.jit
    def dk_dv(Q, K, V, DO, Lse2, Delta, DK, DV, scale, scale_log2, N_CTX,
              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
        start_n = tl.program_id(0) * BLOCK_N
        base = tl.program_id(1).to(tl.int64) * N_CTX
        offs_n = start_n + tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        kv_at = (base + offs_n[:, None]) * HEAD_DIM + offs_d[None, :]
        k = tl.load(K + kv_at)
        v = tl.load(V + kv_at)
        dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
        dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
        # Causal: the query blocks from the one holding this block's first key on.
        lo = (start_n // BLOCK_M) * BLOCK_M if CAUSAL else 0
        for start_m in range(lo, N_CTX, BLOCK_M):
            offs_m = start_m + tl.arange(0, BLOCK_M)
            q_at = (base + offs_m[:, None]) * HEAD_DIM + offs_d[None, :]
            q = tl.load(Q + q_at)
            do = tl.load(DO + q_at)
            lse2 = tl.load(Lse2 + base + offs_m)
            delta = tl.load(Delta + base + offs_m)
            # Transposed scores and probabilities: [BLOCK_N, BLOCK_M].
            pt = tl.math.exp2(tl.dot(k, tl.trans(q)) * scale_log2 - lse2[None, :])
            if CAUSAL:
                pt = tl.where(offs_m[None, :] >= offs_n[:, None], pt, 0.0)
            dv = tl.dot(pt.to(do.dtype), do, dv)
            dpt = tl.dot(v, tl.trans(do))
            dst = pt * (dpt - delta[None, :])
            dk = tl.dot(dst.to(q.dtype), q, dk)
        tl.store(DK + kv_at, (dk * scale).to(DK.dtype.element_ty))
        tl.store(DV + kv_at, dv.to(DV.dtype.element_ty))

    def prune_dq(configs: list[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
        # The causal bound (the end of the query block) must be a multiple of BLOCK_N.
        return [c for c in configs if c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0]

    @triton.autotune(configs=configs("BLOCK_M", "BLOCK_N"), key=["N_CTX", "HEAD_DIM", "CAUSAL"],
                     prune_configs_by={"early_config_prune": prune_dq})
    @triton.jit
    def dq_rows(Q, K, V, DO, Lse2, Delta, DQ, scale, scale_log2, N_CTX,
                HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        start_m = tl.program_id(0) * BLOCK_M
        base = tl.program_id(1).to(tl.int64) * N_CTX
        offs_m = start_m + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, HEAD_DIM)
        q_at = (base + offs_m[:, None]) * HEAD_DIM + offs_d[None, :]
        q = tl.load(Q + q_at)
        do = tl.load(DO + q_at)
        lse2 = tl.load(Lse2 + base + offs_m)
        delta = tl.load(Delta + base + offs_m)
        dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        hi = start_m + BLOCK_M if CAUSAL else N_CTX
        for start_n in range(0, hi, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            kv_at = (base + offs_n[:, None]) * HEAD_DIM + offs_d[None, :]
            k = tl.load(K + kv_at)
            v = tl.load(V + kv_at)
            p = tl.math.exp2(tl.dot(q, tl.trans(k)) * scale_log2 - lse2[:, None])
            if CAUSAL:
                p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
            dp = tl.dot(do, tl.trans(v))
            ds = p * (dp - delta[:, None])
            dq = tl.dot(ds.to(k.dtype), k, dq)
        tl.store(DQ + q_at, (dq * scale).to(DQ.dtype.element_ty))

    def bwd(q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, causal: bool) -> tuple[Any, Any, Any]:
        b, h, s, d = q.shape
        if s % 128 != 0:
            raise ValueError(f"the tutorial kernel takes sequences that are multiples of 128, not {s}")
        scale = d**-0.5
        scale_log2 = scale * 1.4426950408889634
        lse2 = lse * 1.4426950408889634
        delta = lse.new_empty(lse.shape)
        dq, dk, dv = (x.new_empty(x.shape) for x in (q, k, v))
        delta_rows[(s // 128, b * h)](o, do, delta, s, HEAD_DIM=d, BLOCK=128)
        dk_dv[lambda m: (s // m["BLOCK_N"], b * h)](q, k, v, do, lse2, delta, dk, dv, scale, scale_log2, s,
                                                     HEAD_DIM=d, CAUSAL=causal)
        dq_rows[lambda m: (s // m["BLOCK_M"], b * h)](q, k, v, do, lse2, delta, dq, scale, scale_log2, s,
                                                      HEAD_DIM=d, CAUSAL=causal)
        return dq, dk, dv

    return bwd


def triton_attention_bwd(ctx: Any) -> None:
    """The Triton fused-attention tutorial's backward (`build_triton_attention_bwd`), autotuned:
    the output and log-sum-exp from torch's FLASH forward (outside the timing), then the three
    kernels timed (the `lse` scaling to base 2 among them). Checked as `torch_attention_bwd`."""
    import triton
    import triton.language as tl

    torch = ctx.torch
    bwd = build_triton_attention_bwd(triton, tl)

    def prepare(q: Any, k: Any, v: Any, dout: Any, causal: bool) -> Callable[[int], Any]:
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal)[:2]
        return lambda i: bwd(q, k, v, out, dout, lse, causal)

    _run_bwd(ctx, "triton", f"Triton fused-attention tutorial backward (triton {triton.__version__}, autotuned)",
             prepare)


def selftest_attention() -> list[str]:
    """What can be checked without torch: the sampled rows and the flop count."""
    failures = []
    if sampled_rows(5) != [0, 1, 2, 3, 4] or sampled_rows(1000)[-1] != 999 or len(sampled_rows(1000)) != SAMPLED_ROWS:
        failures.append("attention: sampled rows differ from examples/bench/attention.rs")
    if attention_flops(1, 4, 2, 8, False) != 4 * 2 * 4 * 4 * 8 or attention_flops(1, 4, 2, 8, True) != 2 * 2 * 4 * 4 * 8:
        failures.append("attention: the flop count is not FlashAttention's")
    if attention_bwd_flops(1, 4, 2, 8, True) != 2.5 * attention_flops(1, 4, 2, 8, True):
        failures.append("attention: the backward's flop count is not 2.5 times the forward's")
    return failures
