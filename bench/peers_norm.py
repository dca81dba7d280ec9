"""The peers of gpukern's norms, with the same shapes (bench/suite.json, family `norm`), inputs,
checks and timing as examples/bench/norm.rs:

- `torch` (eager): `F.rms_norm` (torch >= 2.4; the formula `x * rsqrt(mean(x^2) + eps) * w`
  in f32 before that), `F.layer_norm`;
- `torch-compile`: `torch.compile` of the same functions (static shapes, compiled by the check's
  call, before anything is timed);
- `triton`: our RMSNorm and LayerNorm forward kernels, one program per row with the whole row
  in one block (x read once, y written once), the fastest `num_warps` of a few per shape.

Run by peers.py (entries `torch_norm`, `compile_norm` and `triton_norm` of its PEERS; the first
two run peers_cross_entropy.py's peers after these).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import peers_common as C

NORM_EPS = 1e-5  # eps of every norm call (examples/bench/norm.rs EPS)
NORM_X = (-1.0, 3.0)  # norm inputs are uniform in [-1, 3): rows of mean 1
NORM_W = (0.5, 1.5)  # the weight
NORM_B = (-0.5, 0.5)  # LayerNorm's bias
BF16_TOL = 1e-2  # one rounding to bf16 (8 significant bits) is at most 2^-9 relative
TRITON_WARPS = (4, 8, 16, 32)  # num_warps tried per shape for our Triton norms


def norm_shapes(quick: bool) -> list[tuple[int, ...]]:
    """The suite's shapes (bench/suite.json, family `norm`)."""
    return C.shapes("norm", quick)


def norm_traffic(kernel: str, rows: int, cols: int, size: int) -> float:
    """x read and y written once, the weight (and LayerNorm's bias) read once: the suite's model."""
    return C.bytes_of(kernel, rows=rows, cols=cols, e=size)




# --- References (float64 on the device) ------------------------------------------------------
def rms_norm_ref(torch: Any, x: Any, w: Any, eps: float) -> Any:
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def layer_norm_ref(torch: Any, x: Any, w: Any, b: Any, eps: float) -> Any:
    xd = x.double()
    d = xd - xd.mean(-1, keepdim=True)
    return d * torch.rsqrt(d.pow(2).mean(-1, keepdim=True) + eps) * w.double() + b.double()


# --- The functions timed ---------------------------------------------------------------------
def rms_norm_fn(torch: Any) -> tuple[Callable[..., Any], str]:
    """`F.rms_norm` where torch has it, else the formula in f32 (as models wrote it before)."""
    F = torch.nn.functional
    if hasattr(F, "rms_norm"):
        return (lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps)), "F.rms_norm(x, (cols,), w, eps)"

    def formula(x: Any, w: Any, eps: float) -> Any:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w

    return formula, "x * rsqrt(mean(x^2) + eps) * w (f32; torch has no F.rms_norm)"


def functions(torch: Any) -> dict[str, tuple[Callable[..., Any], str]]:
    F = torch.nn.functional
    rms, rms_call = rms_norm_fn(torch)
    return {
        "rms_norm": (rms, rms_call),
        "layer_norm": (
            lambda x, w, b, eps: F.layer_norm(x, (x.shape[-1],), w, b, eps),
            "F.layer_norm(x, (cols,), w, b, eps)",
        ),
    }




# --- torch eager and torch.compile -----------------------------------------------------------
def _run_torch(ctx: Any, impl: str, compiled: bool) -> None:
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__
    fns = functions(torch)
    if compiled:
        C.allow_recompiles(torch)
        fns = {k: (torch.compile(f, dynamic=False), f"torch.compile({c}, dynamic=False)") for k, (f, c) in fns.items()}
    dtypes = (("f32", torch.float32, C.F32_TOL, 4), ("bf16", torch.bfloat16, BF16_TOL, 2))

    for rows, cols in norm_shapes(ctx.quick):
        for kernel in ("rms_norm", "layer_norm"):
            for dtype, tdtype, tol, size in dtypes:
                fn, call = fns[kernel]
                base = C.record(
                    kernel, impl, f"{rows}x{cols}", dtype=dtype, rows=rows, cols=cols, eps=NORM_EPS,
                    version=version, call=call, allocates="its output, per call",
                )

                def norm(
                    rows: int = rows, cols: int = cols, kernel: str = kernel, tdtype: Any = tdtype,
                    tol: float = tol, size: int = size, fn: Any = fn, base: dict[str, Any] = base,
                ) -> dict[str, Any]:
                    nbytes = norm_traffic(kernel, rows, cols, size)
                    sets = C.sets_for(int(nbytes))
                    x = ctx.rand((rows, cols), *NORM_X).to(tdtype)
                    w, b = ctx.rand((cols,), *NORM_W).to(tdtype), ctx.rand((cols,), *NORM_B).to(tdtype)
                    xs = [x.clone() for _ in range(sets)]
                    if kernel == "rms_norm":
                        ref = rms_norm_ref(torch, x, w, NORM_EPS)

                        def launch(i: int) -> Any:
                            return fn(xs[i % sets], w, NORM_EPS)
                    else:
                        ref = layer_norm_ref(torch, x, w, b, NORM_EPS)

                        def launch(i: int) -> Any:
                            return fn(xs[i % sets], w, b, NORM_EPS)

                    return C.timed_check(ctx, {**base, "sets": sets}, lambda: launch(0), ref, launch, nbytes, None, tol)

                sink.item(base, norm)


def peer_torch_norm(ctx: Any) -> None:
    """torch eager: `F.rms_norm`, `F.layer_norm`."""
    _run_torch(ctx, "torch", compiled=False)


def peer_compile_norm(ctx: Any) -> None:
    """The same functions through `torch.compile` (Inductor's generated Triton kernels)."""
    _run_torch(ctx, "torch-compile", compiled=True)


# --- Triton ----------------------------------------------------------------------------------
def build_triton_norms(triton: Any, tl: Any) -> dict[str, Any]:
    """Our RMSNorm and LayerNorm forward kernels: one program per row, the row in one block."""

    @triton.jit
    def rms_norm_row(x_ptr, w_ptr, y_ptr, n_cols, x_stride, y_stride, eps, BLOCK: tl.constexpr):
        # The row is loaded once into registers (padded to BLOCK with zeros, which add nothing
        # to the sum of squares), normalised in f32, stored once in y's type.
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        inside = cols < n_cols
        x = tl.load(x_ptr + row * x_stride + cols, mask=inside, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(y_ptr + row * y_stride + cols, (x * inv_rms * w).to(y_ptr.dtype.element_ty), mask=inside)

    @triton.jit
    def layer_norm_row(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, x_stride, y_stride, eps, BLOCK: tl.constexpr):
        # The row in registers: its mean, then the variance of the deviations (two passes over
        # registers, no cancellation for a large mean), then y; padding lanes are kept out of
        # the variance.
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        inside = cols < n_cols
        x = tl.load(x_ptr + row * x_stride + cols, mask=inside, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        d = tl.where(inside, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=inside, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=inside)

    return {"rms_norm": rms_norm_row, "layer_norm": layer_norm_row}


def layer_norm_row_py(x: list[float], w: list[float], b: list[float], eps: float, block: int, masked: bool = True) -> list[float]:
    """The Triton LayerNorm's arithmetic in plain Python (for --selftest): the row padded with
    zeros to `block`, the mean, the deviations (zero on the padding when `masked`), the
    variance over the row's length."""
    n = len(x)
    padded = x + [0.0] * (block - n)
    mean = sum(padded) / n
    d = [(v - mean) if (i < n or not masked) else 0.0 for i, v in enumerate(padded)]
    rstd = 1.0 / math.sqrt(sum(v * v for v in d) / n + eps)
    return [d[i] * rstd * w[i] + b[i] for i in range(n)]


def selftest_norm() -> list[str]:
    """What can be checked without torch: the Triton LayerNorm's arithmetic on a padded block
    against the two-pass formula, a planted unmasked variance (must differ), the traffic."""
    import random

    rng = random.Random(11)
    failures = []
    for n, block in [(1, 1), (3, 4), (1000, 1024), (4097, 8192)]:
        x = [rng.uniform(*NORM_X) for _ in range(n)]
        w = [rng.uniform(*NORM_W) for _ in range(n)]
        b = [rng.uniform(*NORM_B) for _ in range(n)]
        mean = sum(x) / n
        var = sum((v - mean) ** 2 for v in x) / n
        want = [(v - mean) / math.sqrt(var + NORM_EPS) * w[i] + b[i] for i, v in enumerate(x)]
        got = layer_norm_row_py(x, w, b, NORM_EPS, block)
        err = max(abs(g - v) for g, v in zip(got, want))
        if err > 1e-9:
            failures.append(f"layer norm n={n} block={block}: max error {err}")
        if block > n and max(abs(g - v) for g, v in zip(layer_norm_row_py(x, w, b, NORM_EPS, block, masked=False), want)) < 1e-6:
            failures.append(f"layer norm n={n} block={block}: the planted unmasked variance was not different")
    if norm_traffic("rms_norm", 2, 3, 4) != 2 * 6 * 4 + 12 or norm_traffic("layer_norm", 2, 3, 2) != 2 * 6 * 2 + 12:
        failures.append("norm_traffic does not match examples/bench/norm.rs")
    if C.bytes_of("cross_entropy", rows=2, cols=3) != 48 or C.bytes_of("cross_entropy_mean", rows=2, cols=3) != 44:
        failures.append("the cross-entropy models do not match examples/bench/cross_entropy.rs")
    return failures


def peer_triton_norm(ctx: Any) -> None:
    """Our Triton norms (f32 and bf16), the fastest of TRITON_WARPS per shape."""
    import triton
    import triton.language as tl

    torch, sink = ctx.torch, ctx.sink
    version = triton.__version__
    kernels = build_triton_norms(triton, tl)
    dtypes = (("f32", torch.float32, C.F32_TOL, 4), ("bf16", torch.bfloat16, BF16_TOL, 2))

    for rows, cols in norm_shapes(ctx.quick):
        block = triton.next_power_of_2(cols)
        for kernel in ("rms_norm", "layer_norm"):
            for dtype, tdtype, tol, size in dtypes:
                base = C.record(
                    kernel, "triton", f"{rows}x{cols}", dtype=dtype, rows=rows, cols=cols, eps=NORM_EPS,
                    version=version, variant="row_in_one_block", block=block,
                )

                def norm(
                    rows: int = rows, cols: int = cols, kernel: str = kernel, tdtype: Any = tdtype,
                    tol: float = tol, size: int = size, base: dict[str, Any] = base,
                ) -> dict[str, Any]:
                    nbytes = norm_traffic(kernel, rows, cols, size)
                    sets = C.sets_for(int(nbytes))
                    x = ctx.rand((rows, cols), *NORM_X).to(tdtype)
                    w, b = ctx.rand((cols,), *NORM_W).to(tdtype), ctx.rand((cols,), *NORM_B).to(tdtype)
                    bufs = [(x.clone(), torch.full_like(x, float("nan"))) for _ in range(sets)]
                    if kernel == "rms_norm":
                        ref = rms_norm_ref(torch, x, w, NORM_EPS)
                    else:
                        ref = layer_norm_ref(torch, x, w, b, NORM_EPS)

                    def launcher(warps: int) -> Callable[[int], Any]:
                        def launch(i: int) -> Any:
                            xi, yi = bufs[i % sets]
                            if kernel == "rms_norm":
                                kernels[kernel][(rows,)](
                                    xi, w, yi, cols, xi.stride(0), yi.stride(0), NORM_EPS, BLOCK=block, num_warps=warps
                                )
                            else:
                                kernels[kernel][(rows,)](
                                    xi, w, b, yi, cols, xi.stride(0), yi.stride(0), NORM_EPS, BLOCK=block, num_warps=warps
                                )
                            return yi

                        return launch

                    # The fastest num_warps that compiles and passes the check, with short timing.
                    best: tuple[float, int] | None = None
                    tried: dict[str, Any] = {}
                    saved = ctx.timer.budget
                    ctx.timer.budget = C.Budget(warmup=2, max_reps=10, target_s=0.05, max_wall_s=0.5, min_reps=3)
                    try:
                        for warps in TRITON_WARPS:
                            if block < 32 * warps:
                                continue
                            try:
                                launch = launcher(warps)
                                out = launch(0)
                                torch.cuda.current_stream().synchronize()
                                check = ctx.check(out, ref, tol)
                                if not check.passed:
                                    tried[f"w{warps}"] = f"failed the check: rel_err {check.rel_err:.2e}"
                                    continue
                                ms = ctx.timer.measure(launch).median_ms
                                tried[f"w{warps}"] = ms
                                if best is None or ms < best[0]:
                                    best = (ms, warps)
                            except Exception as e:  # noqa: BLE001 - a configuration may not fit
                                tried[f"w{warps}"] = f"error: {str(e).splitlines()[0][:120] if str(e) else type(e).__name__}"
                    finally:
                        ctx.timer.budget = saved
                    rec = {**base, "sets": sets, "configs_tried": tried}
                    if best is None:
                        return {**rec, "error": "no num_warps compiled and passed the check"}
                    rec["num_warps"] = best[1]
                    launch = launcher(best[1])
                    for _, yi in bufs:
                        yi.fill_(float("nan"))
                    return C.timed_check(ctx, rec, lambda: launch(0), ref, launch, nbytes, None, tol)

                sink.item(base, norm)
