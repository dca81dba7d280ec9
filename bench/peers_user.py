"""The peers of examples/user-kernels, written as their users would write them, on the same
shapes as its bench binary (src/bin/bench.rs), with the same record names:

- `user_gelu`: y = gelu(x + bias, tanh form), x bf16 8192 x 8192, bias f32 per column, y bf16.
  `torch`: `F.gelu(x + bias.to(bf16), approximate="tanh")` (two kernels); `torch-compile`: the
  f32 formulation `F.gelu(x.float() + bias, approximate="tanh").to(bf16)`, fused by inductor;
  `triton`: one kernel over the flattened matrix, the bias gathered per column, @triton.autotune
  over block sizes and warps.
- `user_stencil`: one 5-point Jacobi step of an f32 8192 x 8192 grid (the mean of the four
  neighbours inside, the input on the boundary). `torch`: slicing (a clone and one fused
  expression per slice); `torch-compile`: the same function compiled; `triton`: 2-D blocks loading
  the five shifted tiles with masks, @triton.autotune over tile shapes and warps.
- `user_histogram`: 256 bins of 2^28 random bytes. `torch`: `torch.bincount(x, minlength=256)`;
  `torch-compile`: the same compiled (inductor may fall back to the eager kernel: the record says
  which); `triton`: `tl.histogram` per block then `tl.atomic_add`, @triton.autotune over block
  sizes.
- `user_gemm`: C = gelu(A B + bias, tanh form), A and B bf16 (4096^3 and 8192^3), bias f32 per
  column, C bf16; TFLOP/s count 2 m n k. `cublas`: `torch.matmul(a, b)` alone (the GEMM without
  its epilogue, cuBLAS's bf16 GEMM: the target's yardstick); `torch`: the matmul, then the bias
  and GELU in eager torch (three kernels); `torch-compile`: the fused f32 expression
  `F.gelu((a @ b).float() + bias, approximate="tanh").to(bf16)` under
  `torch.compile(mode="max-autotune-no-cudagraphs")` (inductor tunes its Triton GEMM templates
  against cuBLAS and may fuse the epilogue; `USER_GEMM_AUTOTUNE=0` compiles with the default
  mode instead, when tuning takes too long: the record's `mode` says which).
- `attention_fwd` with `mask: prefix_lm` (the crate's own mask): bf16 4x4096x16x128, the prefix a
  quarter of the sequence; `flex`: FlexAttention compiled with the prefix-LM `mask_mod`.
- `attention_bwd` with `mask: prefix_lm`: the same shape and mask; `flex`: FlexAttention's
  backward (`torch.autograd.grad` of the compiled forward), TFLOP/s 2.5 times the forward's count.
- `copy`: `dst.copy_(src)` of 2^26 floats (the ceiling, bytes read plus written), impl `torch`.

Every output is checked against an f64 reference (on the GPU) before it is timed; one that fails
is recorded with `"passed": false` and not timed. Times: `triton.testing.do_bench` (L2 cleared
between runs), the median. GB/s count each input read once and each output written once.

    python3 bench/peers_user.py OUT.jsonl [--quick] [--attention]
"""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

GELU_TOL = 2e-2  # bf16 output: a rounding of 2^-9, the bias rounded to bf16 in `torch`
STENCIL_TOL = 1e-6
GEMM_TOL = 2e-2  # bf16 output (2^-9) and bf16 intermediates in `torch`


def do_bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


class Sink:
    def __init__(self, path: str) -> None:
        self.out = open(path, "w")
        self.common = {
            "gpu": torch.cuda.get_device_name(0),
            "driver": os.environ.get("GPUKERN_DRIVER", "unknown"),
            "git_rev": os.environ.get("GPUKERN_GIT_REV", "unknown"),
            "torch": torch.__version__,
            "triton": triton.__version__,
        }

    def record(self, kernel: str, impl: str, shape: str, dtype: str, **fields) -> None:
        rec = {"kernel": kernel, "impl": impl, "shape": shape, "dtype": dtype, **self.common, **fields}
        line = json.dumps(rec)
        print(line, flush=True)
        self.out.write(line + "\n")
        self.out.flush()

    def measure(self, kernel, impl, shape, dtype, fn, check, bytes_, flops=None, **extra) -> None:
        """Runs `fn` once, checks it (`check(out) -> (rel_err, passed)`), then times it."""
        try:
            out = fn()
            torch.cuda.synchronize()
            rel_err, passed = check(out)
        except Exception as e:  # a peer that cannot run says why
            self.record(kernel, impl, shape, dtype, passed=False, error=f"{type(e).__name__}: {e}"[:300])
            return
        if not passed:
            self.record(kernel, impl, shape, dtype, passed=False, rel_err=rel_err)
            return
        ms = do_bench(fn)
        tflops = None if flops is None else flops / (ms * 1e-3) / 1e12
        self.record(kernel, impl, shape, dtype, median_ms=ms, gbps=bytes_ / (ms * 1e-3) / 1e9, tflops=tflops,
                    bytes=bytes_, rel_err=rel_err, passed=True, **extra)


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    diff = (got.double() - want).norm()
    norm = want.norm()
    return float(diff / norm) if norm > 0 else float(diff)


# ---------------------------------------------------------------------------------------------
# user_gelu


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for (b, w) in ((1024, 4), (2048, 4), (4096, 8), (8192, 8))],
    key=["n"],
)
@triton.jit
def bias_gelu_kernel(x_ptr, bias_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(bias_ptr + offs % cols, mask=mask)
    t = x + b
    u = 0.7978845608028654 * (t + 0.044715 * t * t * t)
    tanh = 2.0 * tl.sigmoid(2.0 * u) - 1.0
    y = 0.5 * t * (1.0 + tanh)
    tl.store(y_ptr + offs, y.to(tl.bfloat16), mask=mask)


def triton_bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    bias_gelu_kernel[grid](x, bias, y, n, x.shape[1])
    return y


def gelu_f32(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(x.float() + bias, approximate="tanh").to(torch.bfloat16)


def run_gelu(sink: Sink, rows: int, cols: int) -> None:
    g = torch.Generator(device="cuda").manual_seed(21)
    x = (torch.rand(rows, cols, device="cuda", generator=g) * 8 - 4).to(torch.bfloat16)
    bias = torch.rand(cols, device="cuda", generator=g) - 0.5
    t = x.double() + bias.double()
    want = 0.5 * t * (1 + torch.tanh(0.7978845608028654 * (t + 0.044715 * t ** 3)))
    del t

    def check(out):
        err = rel_err(out, want)
        return err, err <= GELU_TOL

    shape, bytes_ = f"{rows}x{cols}", float(4 * rows * cols + 4 * cols)
    bias16 = bias.to(torch.bfloat16)
    sink.measure("user_gelu", "torch", shape, "bf16", lambda: F.gelu(x + bias16, approximate="tanh"), check, bytes_)
    compiled = torch.compile(gelu_f32)
    sink.measure("user_gelu", "torch-compile", shape, "bf16", lambda: compiled(x, bias), check, bytes_)
    sink.measure("user_gelu", "triton", shape, "bf16", lambda: triton_bias_gelu(x, bias), check, bytes_)
    del want


# ---------------------------------------------------------------------------------------------
# user_stencil


def jacobi(x: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    out[1:-1, 1:-1] = 0.25 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])
    return out


@triton.autotune(
    configs=[
        triton.Config({"BM": bm, "BN": bn}, num_warps=w)
        for (bm, bn, w) in ((8, 256, 4), (16, 128, 4), (16, 256, 8), (32, 128, 8))
    ],
    key=["rows", "cols"],
)
@triton.jit
def jacobi_kernel(x_ptr, out_ptr, rows, cols, BM: tl.constexpr, BN: tl.constexpr):
    r = tl.program_id(1) * BM + tl.arange(0, BM)[:, None]
    c = tl.program_id(0) * BN + tl.arange(0, BN)[None, :]
    inside = (r < rows) & (c < cols)
    interior = (r > 0) & (r < rows - 1) & (c > 0) & (c < cols - 1)
    base = x_ptr + r.to(tl.int64) * cols + c
    mid = tl.load(base, mask=inside, other=0.0)
    up = tl.load(base - cols, mask=interior, other=0.0)
    down = tl.load(base + cols, mask=interior, other=0.0)
    left = tl.load(base - 1, mask=interior, other=0.0)
    right = tl.load(base + 1, mask=interior, other=0.0)
    v = tl.where(interior, 0.25 * (up + down + left + right), mid)
    tl.store(out_ptr + r.to(tl.int64) * cols + c, v, mask=inside)


def triton_jacobi(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    rows, cols = x.shape
    grid = lambda meta: (triton.cdiv(cols, meta["BN"]), triton.cdiv(rows, meta["BM"]))  # noqa: E731
    jacobi_kernel[grid](x, out, rows, cols)
    return out


def run_stencil(sink: Sink, rows: int, cols: int) -> None:
    g = torch.Generator(device="cuda").manual_seed(23)
    x = torch.rand(rows, cols, device="cuda", generator=g) * 2 - 1
    want = jacobi(x.double())

    def check(out):
        err = rel_err(out, want)
        return err, err <= STENCIL_TOL

    shape, bytes_ = f"{rows}x{cols}", float(8 * rows * cols)
    sink.measure("user_stencil", "torch", shape, "f32", lambda: jacobi(x), check, bytes_)
    compiled = torch.compile(jacobi)
    sink.measure("user_stencil", "torch-compile", shape, "f32", lambda: compiled(x), check, bytes_)
    sink.measure("user_stencil", "triton", shape, "f32", lambda: triton_jacobi(x), check, bytes_)
    del want


# ---------------------------------------------------------------------------------------------
# user_histogram


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for (b, w) in ((8192, 4), (16384, 8), (32768, 8))],
    key=["n"],
    reset_to_zero=["counts_ptr"],
)
@triton.jit
def histogram_kernel(x_ptr, counts_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # Bytes past `n` count in bin 256, which is not added to the histogram.
    x = tl.load(x_ptr + offs, mask=mask, other=0).to(tl.int32)
    x = tl.where(mask, x, 256)
    hist = tl.histogram(x, 512)
    bins = tl.arange(0, 512)
    tl.atomic_add(counts_ptr + bins, hist, mask=bins < 256)


def triton_histogram(x: torch.Tensor) -> torch.Tensor:
    counts = torch.zeros(256, dtype=torch.int32, device=x.device)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    histogram_kernel[grid](x, counts, n)
    return counts


def bincount(x: torch.Tensor) -> torch.Tensor:
    return torch.bincount(x, minlength=256)


def bincount_int(x: torch.Tensor) -> torch.Tensor:
    """For a torch whose `bincount` refuses bytes: widened first, as its users then write it."""
    return torch.bincount(x.int(), minlength=256)


def run_histogram(sink: Sink, n: int) -> None:
    g = torch.Generator(device="cuda").manual_seed(29)
    x = torch.randint(0, 256, (n,), device="cuda", dtype=torch.uint8, generator=g)
    want = torch.bincount(x.long(), minlength=256).double()

    def check(out):
        err = rel_err(out, want)
        return err, err == 0.0

    shape, bytes_ = f"2^{n.bit_length() - 1}", float(n)
    count = bincount
    try:
        bincount(x[:64])
    except RuntimeError:
        count = bincount_int
    sink.measure("user_histogram", "torch", shape, "u8", lambda: count(x), check, bytes_, call=count.__name__)
    compiled = torch.compile(count)
    sink.measure("user_histogram", "torch-compile", shape, "u8", lambda: compiled(x), check, bytes_)
    sink.measure("user_histogram", "triton", shape, "u8", lambda: triton_histogram(x), check, bytes_)


# ---------------------------------------------------------------------------------------------
# user_gemm


def gemm_bias_gelu_f32(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu((a @ b).float() + bias, approximate="tanh").to(torch.bfloat16)


def run_gemm(sink: Sink, m: int, n: int, k: int) -> None:
    g = torch.Generator(device="cuda").manual_seed(31)
    a = (torch.rand(m, k, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
    b = ((torch.rand(k, n, device="cuda", generator=g) * 2 - 1) / k ** 0.5).to(torch.bfloat16)
    bias = torch.rand(n, device="cuda", generator=g) - 0.5
    product = a.double() @ b.double()
    t = product + bias.double()
    want = 0.5 * t * (1 + torch.tanh(0.7978845608028654 * (t + 0.044715 * t ** 3)))
    del t

    def check_product(out):
        err = rel_err(out, product)
        return err, err <= GEMM_TOL

    def check(out):
        err = rel_err(out, want)
        return err, err <= GEMM_TOL

    shape = f"{m}^3" if m == n == k else f"{m}x{n}x{k}"
    bytes_, flops = float(2 * (m * k + k * n + m * n) + 4 * n), 2.0 * m * n * k
    sink.measure("user_gemm", "cublas", shape, "bf16", lambda: torch.matmul(a, b), check_product,
                 float(2 * (m * k + k * n + m * n)), flops=flops)
    bias16 = bias.to(torch.bfloat16)
    sink.measure("user_gemm", "torch", shape, "bf16", lambda: F.gelu(a @ b + bias16, approximate="tanh"), check,
                 bytes_, flops=flops)
    mode = "max-autotune-no-cudagraphs" if os.environ.get("USER_GEMM_AUTOTUNE", "1") != "0" else "default"
    compiled = torch.compile(gemm_bias_gelu_f32, mode=mode)
    sink.measure("user_gemm", "torch-compile", shape, "bf16", lambda: compiled(a, b, bias), check, bytes_,
                 flops=flops, mode=mode)
    del product, want


# ---------------------------------------------------------------------------------------------


def run_copy(sink: Sink, n: int) -> None:
    src = torch.rand(n, device="cuda")
    dst = torch.empty_like(src)

    def check(out):
        return 0.0, bool(torch.equal(out, src))

    def copy():
        dst.copy_(src)
        return dst

    sink.measure("copy", "torch", str(n), "f32", copy, check, float(8 * n))


# ---------------------------------------------------------------------------------------------
# attention_fwd with the prefix-LM mask (the crate's own `PrefixLm`, `mask: prefix_lm`)


def run_prefix_lm(sink: Sink, b: int, s: int, h: int, d: int) -> None:
    """FlexAttention compiled with the prefix-LM `mask_mod` (a query sees the first `prefix` keys
    and its own past), its `BlockMask` made once outside the timing, as FlexAttention's own
    prefix-LM example does; bf16 `[b, h, s, d]` (FlexAttention's layout). Checked on 256 sampled
    query rows of each (batch, head) against an f32 reference of those rows; TFLOP/s count `4 d`
    per kept pair, as the Rust side does."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    prefix = s // 4
    shape = f"{b}x{s}x{h}x{d}"
    q, k, v = (torch.rand((b, h, s, d), device="cuda").mul(2).sub(1).to(torch.bfloat16) for _ in range(3))

    def prefix_lm(b_, h_, qi, ki):
        return (ki < prefix) | (ki <= qi)

    block_mask = create_block_mask(prefix_lm, B=None, H=None, Q_LEN=s, KV_LEN=s, device="cuda")
    compiled = torch.compile(flex_attention, dynamic=False)
    rows = torch.linspace(0, s - 1, 256, device="cuda").long()
    keys = torch.arange(s, device="cuda")
    keep = (keys[None, :] < prefix) | (keys[None, :] <= rows[:, None])
    scores = (q[:, :, rows].float() @ k.float().transpose(-1, -2)) * d ** -0.5
    want = scores.masked_fill(~keep, float("-inf")).softmax(-1) @ v.float()

    def check(out):
        got = out[:, :, rows].float()
        err = (got - want).abs().max().item()
        return rel_err(got, want.double()), err <= 2 ** -8 + 2 * 2 ** -8 * want.abs().max().item()

    pairs = sum(max(prefix, i + 1) for i in range(s))
    flops = 4.0 * b * h * d * pairs
    sink.measure("attention_fwd", "flex", shape, "bf16", lambda: compiled(q, k, v, block_mask=block_mask),
                 check, float(2 * 4 * b * s * h * d), flops=flops, mask="prefix_lm", prefix=prefix,
                 call="torch.compile(flex_attention)(q, k, v, block_mask=create_block_mask(prefix_lm))")


def run_prefix_lm_bwd(sink: Sink, b: int, s: int, h: int, d: int) -> None:
    """FlexAttention's backward (compiled) with the prefix-LM `mask_mod` as `run_prefix_lm` makes
    it: the forward run once with `requires_grad`, then `torch.autograd.grad(out, (q, k, v), dout,
    retain_graph=True)` timed alone. Checked on head 0 of batch 0 (every row of the three
    gradients) against float64 autograd of the same mask, each gradient's error norm within
    `2^-7` of its norm; TFLOP/s count 2.5 times the forward's `4 d` per kept pair, as the Rust
    side does."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    prefix = s // 4
    shape = f"{b}x{s}x{h}x{d}"
    q, k, v, dout = (torch.rand((b, h, s, d), device="cuda").mul(2).sub(1).to(torch.bfloat16) for _ in range(4))

    def prefix_lm(b_, h_, qi, ki):
        return (ki < prefix) | (ki <= qi)

    block_mask = create_block_mask(prefix_lm, B=None, H=None, Q_LEN=s, KV_LEN=s, device="cuda")
    compiled = torch.compile(flex_attention, dynamic=False)
    keys = torch.arange(s, device="cuda")
    keep = (keys[None, :] < prefix) | (keys[None, :] <= keys[:, None])
    qq, kk, vv = (x[0, 0].double().requires_grad_(True) for x in (q, k, v))
    scores = (qq @ kk.transpose(-1, -2)) * d ** -0.5
    ref = torch.autograd.grad(scores.masked_fill(~keep, float("-inf")).softmax(-1) @ vv, (qq, kk, vv),
                              dout[0, 0].double())
    del scores, keep
    for x in (q, k, v):
        x.requires_grad_(True)
    out = compiled(q, k, v, block_mask=block_mask)

    def check(grads):
        errs = [rel_err(g[0, 0], r.detach()) for g, r in zip(grads, ref)]
        return max(errs), max(errs) <= 2 ** -7

    pairs = sum(max(prefix, i + 1) for i in range(s))
    flops = 2.5 * 4.0 * b * h * d * pairs
    sink.measure("attention_bwd", "flex", shape, "bf16",
                 lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True),
                 check, float(2 * 8 * b * s * h * d), flops=flops, mask="prefix_lm", prefix=prefix,
                 call="torch.autograd.grad of torch.compile(flex_attention)(q, k, v, "
                      "block_mask=create_block_mask(prefix_lm))")


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: peers_user.py OUT.jsonl [--quick] [--attention]")
    quick = "--quick" in sys.argv
    # `--attention`: the attention row alone (with the copy ceiling).
    attention_only = "--attention" in sys.argv
    sink = Sink(sys.argv[1])
    side = 2048 if quick else 8192
    run_copy(sink, (1 << 22) if quick else (1 << 26))
    if not attention_only:
        run_gelu(sink, side, side)
        run_stencil(sink, side, side)
        run_histogram(sink, (1 << 24) if quick else (1 << 28))
        for side in (2048,) if quick else (4096, 8192):
            run_gemm(sink, side, side, side)
    attention = (2, 2048, 16, 128) if quick else (4, 4096, 16, 128)
    run_prefix_lm(sink, *attention)
    run_prefix_lm_bwd(sink, *attention)


if __name__ == "__main__":
    main()
