"""The Triton peer (`triton` of peers.py's PEERS): our softmax kernels (one program per row; a
looped one for long rows; split-row kernels for a few very long rows) and Triton's blocked-matmul
tutorial kernel, with the same shapes, inputs, checks and timing as examples/bench.rs.

Moved out of peers.py whole; peers.py imports `build_triton`, `TRITON_MATMUL_CONFIGS` and
`split_softmax_py` back (peers_matmul_half.py and the selftest use them). The helpers (Ctx,
record, timed_check, Budget, ...) come from peers.py through `helpers()` when a peer runs.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from peers import Ctx


def helpers() -> Any:
    """peers.py's helpers, whether it runs as a script or was imported."""
    return sys.modules.get("peers") or sys.modules["__main__"]


def build_triton(triton: Any, tl: Any) -> dict[str, Any]:
    """Our Triton kernels, written in the style of Triton's tutorials."""

    @triton.jit
    def softmax_fused(x_ptr, y_ptr, t, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
        # One program per row, the whole row in registers: x is read once and y written once
        # (8 bytes per element), the minimum.
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        inside = cols < n_cols
        x = tl.load(x_ptr + row * x_stride + cols, mask=inside, other=0.0)
        z = tl.where(inside, x * t, -float("inf"))
        e = tl.exp(z - tl.max(z, axis=0))
        tl.store(y_ptr + row * y_stride + cols, e / tl.sum(e, axis=0), mask=inside)

    @triton.jit
    def softmax_split_stats(x_ptr, m_ptr, s_ptr, t, n_cols, x_stride, chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
        # Grid (chunks, rows): program (c, row) reduces columns [c * CHUNK, (c + 1) * CHUNK) of
        # its row to a running max and a sum of exp rescaled to it (online softmax).
        c = tl.program_id(0)
        row = tl.program_id(1).to(tl.int64)
        x_row = x_ptr + row * x_stride
        run_max = tl.full([BLOCK], -float("inf"), tl.float32)
        run_sum = tl.zeros([BLOCK], tl.float32)
        for start in range(0, CHUNK, BLOCK):
            cols = c * CHUNK + start + tl.arange(0, BLOCK)
            inside = cols < n_cols
            z = tl.where(inside, tl.load(x_row + cols, mask=inside, other=0.0) * t, -float("inf"))
            new_max = tl.maximum(run_max, z)
            rescale = tl.where(new_max == -float("inf"), 0.0, tl.exp(run_max - new_max))
            run_sum = run_sum * rescale + tl.where(inside, tl.exp(z - new_max), 0.0)
            run_max = new_max
        part_max = tl.max(run_max, axis=0)
        part_sum = tl.sum(tl.where(run_max == -float("inf"), 0.0, run_sum * tl.exp(run_max - part_max)), axis=0)
        tl.store(m_ptr + row * chunks + c, part_max)
        tl.store(s_ptr + row * chunks + c, part_sum)

    @triton.jit
    def softmax_split_norm(
        x_ptr, y_ptr, m_ptr, s_ptr, t, n_cols, x_stride, y_stride, chunks,
        CHUNK: tl.constexpr, BLOCK: tl.constexpr, PARTS: tl.constexpr,
    ):
        # Grid (chunks, rows): every program combines its row's partials (PARTS >= chunks) into
        # the row's max and total, then writes its chunk. x is read twice: 12 bytes per element.
        c = tl.program_id(0)
        row = tl.program_id(1).to(tl.int64)
        p = tl.arange(0, PARTS)
        have = p < chunks
        ms = tl.load(m_ptr + row * chunks + p, mask=have, other=-float("inf"))
        ss = tl.load(s_ptr + row * chunks + p, mask=have, other=0.0)
        row_max = tl.max(ms, axis=0)
        total = tl.sum(tl.where(ms == -float("inf"), 0.0, ss * tl.exp(ms - row_max)), axis=0)
        x_row = x_ptr + row * x_stride
        y_row = y_ptr + row * y_stride
        for start in range(0, CHUNK, BLOCK):
            cols = c * CHUNK + start + tl.arange(0, BLOCK)
            inside = cols < n_cols
            z = tl.load(x_row + cols, mask=inside, other=0.0) * t
            tl.store(y_row + cols, tl.exp(z - row_max) / total, mask=inside)

    @triton.jit
    def softmax_looped(x_ptr, y_ptr, t, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
        # Rows too long for registers: pass 1 keeps a running max and a sum rescaled to it
        # (online softmax), pass 2 writes. x is read twice: 12 bytes per element.
        row = tl.program_id(0).to(tl.int64)
        x_row = x_ptr + row * x_stride
        y_row = y_ptr + row * y_stride
        run_max = tl.full([BLOCK], -float("inf"), tl.float32)
        run_sum = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            inside = cols < n_cols
            z = tl.where(inside, tl.load(x_row + cols, mask=inside, other=0.0) * t, -float("inf"))
            new_max = tl.maximum(run_max, z)
            rescale = tl.where(new_max == -float("inf"), 0.0, tl.exp(run_max - new_max))
            run_sum = run_sum * rescale + tl.where(inside, tl.exp(z - new_max), 0.0)
            run_max = new_max
        row_max = tl.max(run_max, axis=0)
        total = tl.sum(tl.where(run_max == -float("inf"), 0.0, run_sum * tl.exp(run_max - row_max)), axis=0)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            inside = cols < n_cols
            z = tl.load(x_row + cols, mask=inside, other=0.0) * t
            tl.store(y_row + cols, tl.exp(z - row_max) / total, mask=inside)

    @triton.jit
    def matmul(
        a_ptr,
        b_ptr,
        c_ptr,
        M,
        N,
        K,
        stride_am,
        stride_ak,
        stride_bk,
        stride_bn,
        stride_cm,
        stride_cn,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        GROUP_M: tl.constexpr,
        PRECISION: tl.constexpr,
    ):
        # One program per BM x BN tile of C, walking K in steps of BK. Programs are numbered so
        # that GROUP_M consecutive ones share a column of B tiles, which then stay in L2.
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BM)
        tiles_n = tl.cdiv(N, BN)
        per_group = GROUP_M * tiles_n
        first_m = (pid // per_group) * GROUP_M
        group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (pid % per_group) % group_rows
        pid_n = (pid % per_group) // group_rows
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
        b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
            b = tl.load(b_ptrs, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
            a_ptrs += BK * stride_ak
            b_ptrs += BK * stride_bk
        c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
        tl.store(c_ptrs, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    return {
        "softmax_fused": softmax_fused,
        "softmax_looped": softmax_looped,
        "softmax_split_stats": softmax_split_stats,
        "softmax_split_norm": softmax_split_norm,
        "matmul": matmul,
    }


# Tile configurations tried per shape (BM, BN, BK, GROUP_M, num_warps, num_stages): a small
# fixed set instead of triton.autotune, so the tuning time stays bounded and visible. The first
# four are the Hopper-sized entries of the Triton matmul tutorial's autotune list (on sm_90 its
# `tl.dot` becomes `wgmma` for 16-bit operands); a configuration whose stages do not fit in shared
# memory (f32 operands at 128 x 256 x 64) fails to launch and is skipped.
TRITON_MATMUL_CONFIGS = [
    (128, 256, 64, 8, 8, 3),
    (64, 256, 32, 8, 4, 4),
    (128, 128, 64, 8, 8, 3),
    (128, 128, 32, 8, 4, 4),
    (128, 128, 32, 8, 8, 3),
    (128, 64, 32, 8, 8, 3),
    (64, 64, 32, 8, 4, 4),
]
SPLIT_CHUNK = 16384  # columns per program of the split-row kernels (2^24 columns: 1024 programs)
SPLIT_BLOCK = 2048  # columns per step inside a program


def split_softmax_py(row: list[float], t: float, chunk: int) -> list[float]:
    """The split-row softmax of the Triton kernels in plain Python (for --selftest): per chunk a
    max and a sum of exp relative to it, then the row's max and total from the partials, then
    every element normalised."""
    parts = []
    for start in range(0, len(row), chunk):
        z = [t * v for v in row[start : start + chunk]]
        m = max(z)
        parts.append((m, sum(math.exp(v - m) for v in z)))
    row_max = max(m for m, _ in parts)
    total = sum(s * math.exp(m - row_max) for m, s in parts)
    return [math.exp(t * v - row_max) / total for v in row]


def softmax_warps(block: int) -> int:
    return 4 if block < 2048 else 8 if block < 4096 else 16 if block < 16384 else 32


def selftest_triton() -> list[str]:
    """The split-row softmax's arithmetic (as the Triton kernels do it) against the plain
    formula, and a planted wrong combination that must differ: peers.py --selftest."""
    import random

    rng = random.Random(7)
    span = helpers().SOFTMAX_RANGE
    failures: list[str] = []
    for n, chunk, t in [(10, 3, 1.0), (1000, 64, 0.5), (4097, 1024, -2.0), (5, 16, 1.0)]:
        row = [rng.uniform(-span, span) for _ in range(n)]
        z = [t * v for v in row]
        m = max(z)
        e = [math.exp(v - m) for v in z]
        want = [v / sum(e) for v in e]
        got = split_softmax_py(row, t, chunk)
        err = max(abs(a - b) for a, b in zip(got, want))
        if err > 1e-12:
            failures.append(f"split softmax n={n} chunk={chunk} t={t}: max error {err}")
    # A planted wrong combination (partial sums added without rescaling) must be caught.
    row = [rng.uniform(-5, 5) for _ in range(100)]
    parts = [(max(row[i : i + 10]), sum(math.exp(v - max(row[i : i + 10])) for v in row[i : i + 10])) for i in range(0, 100, 10)]
    wrong_total = sum(s for _, s in parts)
    right_total = sum(s * math.exp(m - max(row)) for m, s in parts)
    if abs(wrong_total - right_total) < 1e-6:
        failures.append("the planted unrescaled combination was not different: the check cannot fail")
    return failures


def peer_triton(ctx: Ctx) -> None:
    import triton
    import triton.language as tl

    P = helpers()
    torch, sink = ctx.torch, ctx.sink
    version = triton.__version__
    k = build_triton(triton, tl)

    for rows, cols in P.softmax_shapes(ctx.quick):
        fused = cols <= P.TRITON_FUSED_MAX_COLS
        split = P.one_long_row(rows, cols)
        block = triton.next_power_of_2(cols) if fused else SPLIT_BLOCK if split else 4096
        warps = softmax_warps(block) if fused else 8 if split else 16
        kernel = k["softmax_fused"] if fused else k["softmax_looped"]
        chunks = triton.cdiv(cols, SPLIT_CHUNK)
        parts = triton.next_power_of_2(chunks)
        for t in P.TEMPERATURES:
            base = P.record(
                "softmax",
                "triton",
                f"{rows}x{cols}",
                rows=rows,
                cols=cols,
                t=t,
                version=version,
                variant="fused" if fused else "split_row" if split else "looped",
                block=block,
                num_warps=warps,
                **({"chunk": SPLIT_CHUNK, "programs_per_row": chunks} if split else {}),
            )

            def softmax(
                rows: int = rows,
                cols: int = cols,
                t: float = t,
                kernel: Any = kernel,
                block: int = block,
                warps: int = warps,
                base: dict[str, Any] = base,
            ) -> dict[str, Any]:
                sets = P.sets_for(8 * rows * cols)
                x = ctx.rand((rows, cols), -P.SOFTMAX_RANGE, P.SOFTMAX_RANGE)
                bufs = [(x.clone(), ctx.nan((rows, cols))) for _ in range(sets)]
                ref = P.softmax_ref(torch, x, t)
                # The split-row kernels' partial maxima and sums, one per program.
                pm = torch.empty((rows, chunks), dtype=torch.float32, device="cuda")
                ps = torch.empty_like(pm)

                def launch(i: int) -> Any:
                    xi, yi = bufs[i % sets]
                    if split:
                        grid = (chunks, rows)
                        stats, norm = k["softmax_split_stats"], k["softmax_split_norm"]
                        stats[grid](xi, pm, ps, t, cols, xi.stride(0), chunks, CHUNK=SPLIT_CHUNK, BLOCK=block, num_warps=warps)
                        norm[grid](
                            xi, yi, pm, ps, t, cols, xi.stride(0), yi.stride(0), chunks,
                            CHUNK=SPLIT_CHUNK, BLOCK=block, PARTS=parts, num_warps=warps,
                        )
                    else:
                        kernel[(rows,)](xi, yi, t, cols, xi.stride(0), yi.stride(0), BLOCK=block, num_warps=warps)
                    return yi

                return P.timed_check(ctx, {**base, "sets": sets}, lambda: launch(0), ref, launch, 8.0 * rows * cols, None)

            sink.item(base, softmax)

    for shape in P.matmul_shapes(ctx.quick):
        for precision in ("ieee", "tf32"):
            impl = "triton_tf32" if precision == "tf32" else "triton"
            base = P.mm_base(
                "matmul",
                impl,
                shape,
                math="tf32" if precision == "tf32" else "fp32",
                version=version,
                input_precision=precision,
            )

            def matmul(
                shape: tuple[int, int, int] = shape, precision: str = precision, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                m, n, kk = shape
                nbytes, flops = P.mm_counts(shape)
                sets = P.sets_for(int(nbytes))
                a, b = ctx.rand((m, kk)), ctx.rand((kk, n))
                ref = P.matmul_ref(torch, a, b)
                bufs = [(a.clone(), b.clone(), ctx.nan((m, n))) for _ in range(sets)]
                tol = P.TF32_TOL if precision == "tf32" else P.F32_TOL

                def launcher(cfg: tuple[int, ...]) -> Callable[[int], Any]:
                    bm, bn, bk, group, warps, stages = cfg
                    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)

                    def launch(i: int) -> Any:
                        x, y, z = bufs[i % sets]
                        k["matmul"][grid](
                            x,
                            y,
                            z,
                            m,
                            n,
                            kk,
                            x.stride(0),
                            x.stride(1),
                            y.stride(0),
                            y.stride(1),
                            z.stride(0),
                            z.stride(1),
                            BM=bm,
                            BN=bn,
                            BK=bk,
                            GROUP_M=group,
                            PRECISION=precision,
                            num_warps=warps,
                            num_stages=stages,
                        )
                        return z

                    return launch

                # Pick the fastest configuration that compiles and passes the check, with short timing.
                best: tuple[float, tuple[int, ...]] | None = None
                tried: dict[str, Any] = {}
                saved = ctx.timer.budget
                ctx.timer.budget = P.Budget(warmup=2, max_reps=10, target_s=0.05, max_wall_s=0.5, min_reps=3)
                try:
                    for cfg in TRITON_MATMUL_CONFIGS:
                        name = "BM{}-BN{}-BK{}-G{}-w{}-s{}".format(*cfg)
                        try:
                            launch = launcher(cfg)
                            out = launch(0)
                            torch.cuda.current_stream().synchronize()
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
                rec = {**base, "sets": sets, "configs_tried": tried}
                if best is None:
                    return {**rec, "error": "no configuration compiled and passed the check"}
                chosen = best[1]
                rec["config"] = "BM{}-BN{}-BK{}-G{}-w{}-s{}".format(*chosen)
                launch = launcher(chosen)
                return P.timed_check(ctx, rec, lambda: launch(0), ref, launch, nbytes, flops, tol)

            sink.item(base, matmul)
