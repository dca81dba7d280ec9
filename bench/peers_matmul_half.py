"""The peers of gpukern's half-precision matmul (examples/bench/matmul_half.rs): PyTorch's
`torch.matmul` on bf16 and fp16 tensors (cuBLAS underneath, torch's default settings), and
Triton's matmul tutorial kernel (peers_matmul.py's `build_triton_matmul`) on the same types, with the same
shapes, record keys, checks and timing as the Rust suite. Run by peers.py (entries
`torch_half` and `triton_half` of its PEERS).

Records: `kernel` `matmul_half`; `dtype` and `math` the operands' type (`bf16`, `fp16`); `out` the
result type (the operands' own, and `f32` at one shape). Inputs uniform in [-1, 1), rounded to the
type; the reference is the float64 product of the rounded inputs (`torch_f64`), as for every
implementation in the Rust suite.
"""

from __future__ import annotations

from typing import Any, Callable

import peers_common as C
from peers_matmul import TRITON_MATMUL_CONFIGS, build_triton_matmul

# The same tolerances as matmul_half.rs: three unit roundoffs of the result type.
HALF_TOL = {"bf16": 3.0 / 256.0, "fp16": 3.0 / 2048.0}
F32_OUT_TOL = 1e-4  # peers_common.F32_TOL: an f32 result keeps the f32 sums' error


def half_shapes(quick: bool) -> list[tuple[int, ...]]:
    """The suite's shapes (bench/suite.json, family `matmul_half`)."""
    return C.shapes("matmul_half", quick)


def f32_out_shape(quick: bool) -> tuple[int, ...]:
    """The shape where the f32-result row is measured too (the suite's `f32_out`)."""
    return tuple(C.suite()["families"]["matmul_half"]["f32_out"]["quick" if quick else "full"])


def half_counts(shape: tuple[int, ...], out_bytes: int) -> tuple[float, float]:
    """Minimum bytes (16-bit operands, `out_bytes`-wide result) and flops of a product (the
    suite's `matmul_half` model)."""
    m, n, k = shape
    return C.bytes_of("matmul_half", m=m, n=n, k=k, o=out_bytes), C.flops_of("matmul_half", m=m, n=n, k=k)




def _types(torch: Any) -> list[tuple[str, Any]]:
    return [("bf16", torch.bfloat16), ("fp16", torch.float16)]


def _inputs(ctx: Any, shape: tuple[int, int, int], dtype: Any) -> tuple[Any, Any, Any]:
    """Fresh operands of `dtype` and the float64 product of exactly those values."""
    m, n, k = shape
    a, b = ctx.rand((m, k)).to(dtype), ctx.rand((k, n)).to(dtype)
    return a, b, a.double() @ b.double()


def _nan(ctx: Any, shape: tuple[int, int], dtype: Any) -> Any:
    return ctx.torch.full(shape, float("nan"), device="cuda", dtype=dtype)


def peer_torch_half(ctx: Any) -> None:
    """`torch.matmul(a, b, out=c)` on bf16 and fp16 (result in the operands' type), and at one
    shape `torch.mm(a, b, out_dtype=torch.float32)` (an f32 result, where this torch has it)."""
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    flags = torch.backends.cuda.matmul
    for shape in half_shapes(ctx.quick):
        for name, dtype in _types(torch):
            reduced = getattr(flags, f"allow_{name}_reduced_precision_reduction", None)
            rows = [("torch", name, dtype)]
            if shape == f32_out_shape(ctx.quick):
                rows.append(("torch_f32out", "f32", torch.float32))
            # One set of inputs per type and shape, shared by its rows (as in the Rust suite).
            shared: dict[str, Any] = {}
            for impl, out, out_dtype in rows:
                call = "torch.matmul(a, b, out=c)" if out != "f32" else "torch.mm(a, b, out_dtype=torch.float32, out=c)"
                base = C.mm_base(
                    "matmul_half", impl, shape, dtype=name, math=name, out=out, version=version, call=call,
                    reduced_precision_reduction=reduced,
                )

                def measure(
                    shape: tuple[int, int, int] = shape,
                    dtype: Any = dtype,
                    out: str = out,
                    out_dtype: Any = out_dtype,
                    base: dict[str, Any] = base,
                    shared: dict[str, Any] = shared,
                ) -> dict[str, Any]:
                    m, n, _ = shape
                    nbytes, flops = half_counts(shape, 4 if out == "f32" else 2)
                    sets = C.sets_for(int(nbytes))
                    if "inputs" not in shared:
                        shared["inputs"] = _inputs(ctx, shape, dtype)
                    a, b, ref = shared["inputs"]
                    bufs = [(a.clone(), b.clone(), _nan(ctx, (m, n), out_dtype)) for _ in range(sets)]
                    rec = {**base, "sets": sets}

                    def launch(i: int) -> Any:
                        x, y, z = bufs[i % sets]
                        if out == "f32":
                            return torch.mm(x, y, out_dtype=torch.float32, out=z)
                        return torch.matmul(x, y, out=z)

                    if out == "f32":
                        try:
                            launch(0)
                        except (TypeError, RuntimeError) as e:
                            # A torch without `out=` beside `out_dtype`: its allocating form.
                            def launch(i: int) -> Any:
                                x, y, _ = bufs[i % sets]
                                return torch.mm(x, y, out_dtype=torch.float32)

                            rec.update(call="torch.mm(a, b, out_dtype=torch.float32)", out_error=str(e)[:200])
                    tol = F32_OUT_TOL if out == "f32" else HALF_TOL[base["dtype"]]
                    rec = C.timed_check(ctx, rec, lambda: launch(0), ref, launch, nbytes, flops, tol)
                    bufs.clear()
                    return rec

                sink.item(base, measure)
            shared.clear()


def peer_triton_half(ctx: Any) -> None:
    """Triton's matmul tutorial kernel (peers_matmul.py's `build_triton_matmul`, f32 accumulator stored in the
    result's type) on bf16 and fp16, the fastest of peers_matmul.py's few tile configurations that
    passes the check, as for the f32 Triton rows."""
    import triton
    import triton.language as tl

    torch, sink = ctx.torch, ctx.sink
    version = triton.__version__
    kernel = build_triton_matmul(triton, tl)
    for shape in half_shapes(ctx.quick):
        for name, dtype in _types(torch):
            base = C.mm_base("matmul_half", "triton", shape, dtype=name, math=name, out=name, version=version)

            def measure(shape: tuple[int, int, int] = shape, dtype: Any = dtype, base: dict[str, Any] = base) -> dict[str, Any]:
                m, n, kk = shape
                nbytes, flops = half_counts(shape, 2)
                sets = C.sets_for(int(nbytes))
                a, b, ref = _inputs(ctx, shape, dtype)
                bufs = [(a.clone(), b.clone(), _nan(ctx, (m, n), dtype)) for _ in range(sets)]
                tol = HALF_TOL[base["dtype"]]

                def launcher(cfg: tuple[int, ...]) -> Callable[[int], Any]:
                    bm, bn, bk, group, warps, stages = cfg
                    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)

                    def launch(i: int) -> Any:
                        x, y, z = bufs[i % sets]
                        kernel[grid](
                            x, y, z, m, n, kk,
                            x.stride(0), x.stride(1), y.stride(0), y.stride(1), z.stride(0), z.stride(1),
                            BM=bm, BN=bn, BK=bk, GROUP_M=group, PRECISION="ieee",
                            num_warps=warps, num_stages=stages,
                        )
                        return z

                    return launch

                best, tried = _pick_config(ctx, launcher, ref, tol)
                rec = {**base, "sets": sets, "configs_tried": tried}
                if best is None:
                    return {**rec, "error": "no configuration compiled and passed the check"}
                rec["config"] = "BM{}-BN{}-BK{}-G{}-w{}-s{}".format(*best)
                launch = launcher(best)
                return C.timed_check(ctx, rec, lambda: launch(0), ref, launch, nbytes, flops, tol)

            sink.item(base, measure)


def _pick_config(
    ctx: Any, launcher: Callable[[tuple[int, ...]], Callable[[int], Any]], ref: Any, tol: float
) -> tuple[tuple[int, ...] | None, dict[str, Any]]:
    """The fastest of peers_matmul.py's Triton matmul configurations that compiles and passes the
    check (short timing each), and what each one gave."""
    best: tuple[float, tuple[int, ...]] | None = None
    tried: dict[str, Any] = {}
    saved = ctx.timer.budget
    ctx.timer.budget = C.Budget(warmup=2, max_reps=10, target_s=0.05, max_wall_s=0.5, min_reps=3)
    try:
        for cfg in TRITON_MATMUL_CONFIGS:
            name = "BM{}-BN{}-BK{}-G{}-w{}-s{}".format(*cfg)
            try:
                launch = launcher(cfg)
                out = launch(0)
                ctx.torch.cuda.current_stream().synchronize()
                check = ctx.check(out, ref, tol)
                if not check.passed:
                    tried[name] = f"failed the check: rel_err {check.rel_err:.2e}"
                    continue
                ms = ctx.timer.measure(launch).median_ms
                tried[name] = ms
                if best is None or ms < best[0]:
                    best = (ms, cfg)
            except Exception as e:  # noqa: BLE001 - a configuration may not fit
                tried[name] = f"error: {str(e).splitlines()[0][:120] if str(e) else type(e).__name__}"
    finally:
        ctx.timer.budget = saved
    return (best[1] if best else None), tried


def selftest() -> list[str]:
    """What can be checked without torch: the shapes and counts match matmul_half.rs."""
    failures = []
    if half_shapes(False) != [(1024,) * 3, (2048,) * 3, (4096,) * 3, (8192,) * 3, (4097, 4095, 4093)]:
        failures.append("half_shapes: not the shapes of examples/bench/matmul_half.rs")
    if f32_out_shape(False) not in half_shapes(False) or f32_out_shape(True) not in half_shapes(True):
        failures.append("f32_out_shape: not one of the measured shapes")
    if half_counts((2, 3, 4), 2) != (2.0 * (8 + 12) + 12, 48.0):
        failures.append("half_counts: wrong bytes or flops")
    return failures
