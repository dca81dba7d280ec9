"""The half-precision matmul (issue 13) in BENCHMARKS.md, rendered by bench/report.py from the
records of examples/bench/matmul_half.rs and bench/peers_matmul_half.py: the bf16 / fp16 section
and issue 13's targets (gpukern over cuBLAS `cublasGemmEx` of the same types).
"""

from __future__ import annotations

from typing import Any

from report_common import (
    Record, Run, best, fmt_err, fmt_ms, fmt_rate, fmt_ratio, impl_order, is_default, is_gpukern, not_measured, note,
    ordered, pretty, ratio_target, table, timed,
)


# --- Half-precision matmul (issue 13): examples/bench/matmul_half.rs, bench/peers_matmul_half.py
HALF_KERNEL = "matmul_half"
HALF_TYPES = ["bf16", "fp16"]
# Issue 13's targets: gpukern's half-precision matmul over cuBLAS `cublasGemmEx` of the same types.
HALF_GOALS = [("4096x4096x4096", 0.90), ("8192x8192x8192", 0.90), ("2048x2048x2048", 0.75), ("4097x4095x4093", 0.75)]


def half_of(dtype: str, out: str | None = None) -> Any:
    """A predicate on matmul_half records: operands of `dtype`, result `out` (default: `dtype`)."""
    return lambda r: r.get("dtype") == dtype and r.get("out", r.get("dtype")) == (out or dtype)


def half_impl(want: Any, dtype: str, out: str | None = None) -> Any:
    """`want` (an impl name or a predicate) among the matmul_half records of `dtype` and `out`."""
    ok = want if callable(want) else (lambda r: r["impl"] == want)
    of = half_of(dtype, out)
    return lambda r: of(r) and ok(r)


def half_section(run: Run) -> str:
    """bf16 and fp16 matmul: gpukern against cuBLAS of the same types, torch and Triton."""
    records = run.by_kernel.get(HALF_KERNEL, [])
    parts = ["## matmul (bf16, fp16)"]
    if not records:
        return "\n\n".join(parts + [not_measured(run, [HALF_KERNEL])])
    kind = "tflops"
    peers = ["torch", "triton"]
    rows = []
    for shape in ordered(r["shape"] for r in records):
        for dtype in HALF_TYPES:
            outs = ordered(str(r.get("out", dtype)) for r in records if r["shape"] == shape and r.get("dtype") == dtype)
            for out in sorted(outs, key=lambda o: o != dtype):
                here = [r for r in records if r["shape"] == shape and half_of(dtype, out)(r)]
                mine = best((r for r in here if is_gpukern(r)), kind)
                blas = best((r for r in here if r["impl"].startswith("cublas")), kind)
                row = [pretty(shape), dtype, out]
                variant = f" ({mine['impl'].split(':', 1)[-1]})" if mine else ""
                row += [fmt_rate(mine, kind) + variant if mine else "-", fmt_rate(blas, kind) if blas else "-"]
                row.append(fmt_ratio(mine[kind] / blas[kind] if mine and blas and mine.get(kind) and blas.get(kind) else None))
                for peer in peers:
                    theirs = best((r for r in here if r["impl"].split("_")[0] == peer), kind)
                    row.append(fmt_rate(theirs, kind) if theirs else "-")
                    ok = mine and theirs and mine.get(kind) and theirs.get(kind)
                    row.append(fmt_ratio(mine[kind] / theirs[kind] if ok else None))
                row += [fmt_err(mine) if mine else "-", fmt_err(blas) if blas else "-"]
                rows.append(row)
    header = ["m x n x k", "operands", "result", "gpukern", "cuBLAS", "gpukern / cuBLAS"]
    for peer in peers:
        header += [peer, f"gpukern / {peer}"]
    header += ["gpukern rel_err", "cuBLAS rel_err"]
    details = []
    shapes = ordered(r["shape"] for r in records)

    def order(r: Record) -> tuple[Any, ...]:
        dtype = str(r.get("dtype"))
        rank = HALF_TYPES.index(dtype) if dtype in HALF_TYPES else len(HALF_TYPES)
        return shapes.index(r["shape"]), rank, r.get("out", dtype) != dtype, impl_order(r["impl"])

    for r in sorted(records, key=order):
        impl = f"**{r['impl']}**" if is_gpukern(r) else r["impl"]
        details.append([
            pretty(r["shape"]), str(r.get("dtype", "-")), str(r.get("out", "-")), impl, fmt_ms(r.get("median_ms")),
            fmt_rate(r, kind), fmt_err(r), str(r.get("ref", "-")), note(r) or "-",
        ])
    parts += [
        "Row-major `C = A B` with bf16 or fp16 operands, products on tensor cores and sums in f32, the "
        "result in the operands' type (rounded once) or in f32. gpukern: `gpu.matmul_to_with(a, b, c, tile)` "
        "into an existing matrix (no allocation), the best of its kernels in the gpukern column: `mma` "
        "(`mma.sync`, every GPU from sm_80 on), `wgmma` (Hopper's `wgmma` fed by TMA on one warpgroup, bf16 "
        "with `k` and `n` multiples of 8) and `wgmma_ws` (a TMA producer warpgroup, two `wgmma` consumer "
        "warpgroups, 128 x 256 tiles, a persistent grid; bf16 and fp16, the same conditions); cuBLAS: `cublasGemmEx` with the same types in and out, "
        "`CUBLAS_COMPUTE_32F`, the default algorithm; torch: `torch.matmul(a, b, out=c)` with torch's "
        "default settings (f32 result: `torch.mm(a, b, out_dtype=torch.float32)`); Triton: the matmul "
        "tutorial kernel on the same types. TFLOP/s from 2mnk flops; `rel_err` against the f64 product of "
        "the same rounded inputs (a 16-bit result's own rounding alone gives a fraction of its unit "
        "roundoff: 2^-8 for bf16, 2^-11 for fp16). A dash: not measured (see Not timed).",
        table(header, rows, right=range(3, len(header))),
        "<details><summary>Every implementation, per case</summary>\n\n"
        + table(["m x n x k", "operands", "result", "impl", "median", "TFLOP/s", "rel_err", "ref", "note"], details, right=[4, 5, 6])
        + "\n\n</details>",
    ]
    return "\n\n".join(parts)


def half_targets(run: Run) -> list[list[str]]:
    """Issue 13's targets: BF16 and FP16 gpukern over cuBLAS of the same types, per shape."""
    rows = []
    for dtype in HALF_TYPES:
        for shape, goal in HALF_GOALS:
            label = f"{dtype.upper()} `matmul` >= {goal:.2f}x cuBLAS `cublasGemmEx` ({dtype}) at {pretty(shape).replace('x', ' x ')}"
            row = ratio_target(run, label, HALF_KERNEL, shape, half_impl(is_default, dtype), half_impl("cublas", dtype), goal)
            failed = [
                r for r in run.by_kernel.get(HALF_KERNEL, [])
                if r["shape"] == shape and half_impl(is_default, dtype)(r) and not timed(r)
            ]
            if row[2] == "unknown" and failed:
                row[1] = f"not timed: {failed[0]['impl']} {note(failed[0]) or 'see Not timed'}"
            rows.append(row)
    return rows
