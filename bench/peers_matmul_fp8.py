"""The peers of gpukern's FP8 products (examples/bench/matmul_fp8.rs): `torch._scaled_mm` on
E4M3 operands, `a` of `m x k` row-major and `b` = `w.T` with `w` of `n x k` row-major (the
column-major operand cuBLASLt's FP8 kernels take: the "TN" layout), the result bf16. Per-tensor
scales with `use_fast_accum=True` and False (cuBLASLt), per-row scales (`scale_a` of `m x 1`,
`scale_b` of `1 x n`: torch's row-wise kernel) with both, and block scales (`1 x 128` of `a`,
`128 x 128` of `w`) where this torch supports them (else the record says why). Run by peers.py
(entry `torch_fp8` of its PEERS).

Records: `kernel` `matmul_fp8`, keys `m`, `n`, `k`, `scaling` (`tensor`, `row`, `block`),
`accumulation` (`fast` for `use_fast_accum=True`, `promoted` for False: cuBLASLt's
full-precision accumulation). Inputs uniform in [-1, 1), quantised with the record's scaling
(amax to 448, as gpukern's `quantize_e4m3_reference`); the check is the relative error norm over
64 rows by 256 columns of the result against the float64 product of the dequantised operands,
three bf16 unit roundoffs for promoted accumulation and eight for fast (as the Rust suite).
"""

from __future__ import annotations

from typing import Any

import peers_common as C

TOL = {"fast": 8.0 / 256.0, "promoted": 3.0 / 256.0}
CHECKED_ROWS = 64
CHECKED_COLUMNS = 256
E4M3_MAX = 448.0
BLOCK = 128

# (scaling, accumulation) of each record, as the Rust suite's VARIANTS.
VARIANTS = [("tensor", "fast"), ("tensor", "promoted"), ("row", "fast"), ("row", "promoted"), ("block", "promoted")]


def fp8_shapes(quick: bool) -> list[tuple[int, ...]]:
    """The suite's shapes `(m, n, k)` (bench/suite.json, family `matmul_fp8`)."""
    return C.shapes("matmul_fp8", quick)


def fp8_counts(shape: tuple[int, ...]) -> tuple[float, float]:
    m, n, k = shape
    return C.bytes_of("matmul_fp8", m=m, n=n, k=k), C.flops_of("matmul_fp8", m=m, n=n, k=k)


def checked(count: int, total: int) -> list[int]:
    """Every `ceil(total / count)`-th index (as the Rust suite)."""
    step = max(1, -(-total // count))
    return list(range(0, total, step))


def quantize(torch: Any, x: Any, scaling: str, block_rows: int) -> tuple[Any, Any]:
    """`x` (f32, `r x c`) to E4M3 with amax scales: per tensor (a 0-d scale), per row (`r x 1`),
    or per block of `block_rows x 128` (`ceil(r / block_rows) x ceil(c / 128)`). Returns the
    E4M3 tensor and the dequantisation scales (`amax / 448`, 1 where the amax is 0)."""
    r, c = x.shape
    if scaling == "tensor":
        amax = x.abs().amax()
    elif scaling == "row":
        amax = x.abs().amax(dim=1, keepdim=True)
    else:
        pr, pc = -(-r // block_rows) * block_rows, -(-c // BLOCK) * BLOCK
        padded = torch.zeros((pr, pc), device=x.device, dtype=x.dtype)
        padded[:r, :c] = x
        blocks = padded.abs().reshape(pr // block_rows, block_rows, pc // BLOCK, BLOCK)
        amax = blocks.amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax)).float()
    if scaling == "block":
        full = scale.repeat_interleave(block_rows, 0).repeat_interleave(BLOCK, 1)[:r, :c]
    else:
        full = scale
    q = (x / full).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


def dequantize(torch: Any, q: Any, scale: Any, scaling: str, block_rows: int) -> Any:
    r, c = q.shape
    if scaling == "block":
        full = scale.double().repeat_interleave(block_rows, 0).repeat_interleave(BLOCK, 1)[:r, :c]
    else:
        full = scale.double()
    return q.double() * full


def _run(ctx: Any) -> None:
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    for shape in fp8_shapes(ctx.quick):
        m, n, k = shape
        for scaling, accumulation in VARIANTS:
            fast = accumulation == "fast"
            call = f"torch._scaled_mm(a, w.T, scale_a, scale_b, out_dtype=bfloat16, use_fast_accum={fast})"
            base = C.mm_base(
                "matmul_fp8", "torch", shape, dtype="e4m3", math="e4m3", out="bf16", layout="b n x k",
                scaling=scaling, accumulation=accumulation, version=version, call=call,
            )

            def measure(shape: tuple[int, ...] = shape, base: dict[str, Any] = base, scaling: str = scaling,
                        accumulation: str = accumulation, fast: bool = fast) -> dict[str, Any]:
                m, n, k = shape
                nbytes, flops = fp8_counts(shape)
                qa, sa = quantize(torch, ctx.rand((m, k)), scaling, 1)
                qw, sw = quantize(torch, ctx.rand((n, k)), scaling, BLOCK)
                rows = torch.tensor(checked(CHECKED_ROWS, m), device="cuda")
                cols = torch.tensor(checked(CHECKED_COLUMNS, n), device="cuda")
                da = dequantize(torch, qa, sa, scaling, 1).index_select(0, rows)
                dw = dequantize(torch, qw, sw, scaling, BLOCK).index_select(0, cols)
                ref = da @ dw.T
                del da, dw
                if scaling == "tensor":
                    scale_a, scale_b = sa.reshape(()), sw.reshape(())
                elif scaling == "row":
                    scale_a, scale_b = sa.reshape(m, 1), sw.reshape(1, n)
                else:
                    # torch's block-wise form (cuBLASLt, CUDA 12.9 and later; the scale layout of
                    # torch's own test_scaled_mm_block_wise_numerics): `scale_a` per 1 x 128 of
                    # `a`, `m x k/128` outer-dim-major (column-major), `scale_b` per 128 x 128 of
                    # `w`, as `k/128 x n/128` (the transpose of `w`'s, with `b = w.T`).
                    scale_a, scale_b = sa.t().contiguous().t(), sw.t()
                out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                b = qw.T
                rec = {**base, "checked_rows": len(rows), "checked_columns": len(cols)}

                def launch(_: int) -> Any:
                    return torch._scaled_mm(qa, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16,
                                            use_fast_accum=fast)

                def once() -> Any:
                    return launch(0).index_select(0, rows).index_select(1, cols)

                try:
                    once()
                except Exception as e:  # noqa: BLE001 - a form this torch lacks is recorded, not fatal
                    return {**rec, "error": f"torch._scaled_mm refused {scaling} scales: {str(e)[:200]}"}
                del out
                return C.timed_check(ctx, rec, once, ref, launch, nbytes, flops, TOL[accumulation])

            sink.item(base, measure)


def peer_torch_fp8(ctx: Any) -> None:
    """`torch._scaled_mm` on E4M3, per-tensor, per-row and block scales, fast and not."""
    _run(ctx)


def selftest() -> list[str]:
    failures = []
    if checked(256, 8192)[:3] != [0, 32, 64] or len(checked(256, 8192)) != 256:
        failures.append("fp8: checked columns of n = 8192 are not every 32nd")
    b, f = fp8_counts((4096, 4096, 4096))
    if f != 2.0 * 4096**3 or b != 2.0 * 4096 * 4096 + 2.0 * 4096 * 4096:
        failures.append("fp8: the suite's counts are wrong")
    return failures
