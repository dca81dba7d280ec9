"""The peers of examples/bench/matmul.rs, with the suite's shapes (bench/suite.json, family
`matmul`): `torch.matmul` (fp32 and TF32), Triton's blocked-matmul tutorial kernel (grouped
ordering, `input_precision` "ieee" and "tf32", the fastest of TRITON_MATMUL_CONFIGS per shape;
peers_matmul_half.py runs the same kernel on bf16 and fp16), and the Numba tutorial's naive and
16 x 16 shared-memory matmuls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import peers_common as C

# numba.cuda (C.import_numba_cuda()) once a Numba peer runs: a module global, so that the kernels
# below find it as a global, as in the tutorials.
cuda: Any = None
NUMBA_TPB = 16  # the Numba tutorial's tile: 16 x 16 threads
NUMBA_NAIVE_MAX_FLOPS = 2 * 4096**3 * 1.05  # naive Numba matmul above 4096^3: too slow


def build_triton_matmul(triton: Any, tl: Any) -> Any:
    """Triton's matmul tutorial kernel, in its style."""

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

    return matmul


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


def build_numba_matmul() -> dict[str, Any]:
    """The Numba documentation's matmul kernels, in their style (the tiled one also timed by
    peers_overhead.py)."""
    from numba import float32

    tpb = NUMBA_TPB  # compile-time constants for the shared arrays

    @cuda.jit
    def matmul_naive(A, B, C):
        # The tutorial's first matmul: one thread per element of C, x walking rows.
        i, j = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            tmp = float32(0.0)
            for kk in range(A.shape[1]):
                tmp += A[i, kk] * B[kk, j]
            C[i, j] = tmp

    @cuda.jit
    def matmul_tiled(A, B, C):
        # The tutorial's shared-memory matmul: 16 x 16 tiles of A and B staged in shared
        # memory, zero-padded at the edges so any shape works.
        sA = cuda.shared.array(shape=(tpb, tpb), dtype=float32)
        sB = cuda.shared.array(shape=(tpb, tpb), dtype=float32)
        x, y = cuda.grid(2)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tmp = float32(0.0)
        for i in range((A.shape[1] + tpb - 1) // tpb):
            sA[ty, tx] = 0
            sB[ty, tx] = 0
            if y < A.shape[0] and tx + i * tpb < A.shape[1]:
                sA[ty, tx] = A[y, tx + i * tpb]
            if x < B.shape[1] and ty + i * tpb < B.shape[0]:
                sB[ty, tx] = B[ty + i * tpb, x]
            cuda.syncthreads()
            for j in range(tpb):
                tmp += sA[ty, j] * sB[j, tx]
            cuda.syncthreads()
        if y < C.shape[0] and x < C.shape[1]:
            C[y, x] = tmp

    return {"matmul_naive": matmul_naive, "matmul_tiled": matmul_tiled}


def numba_matmul_grid(kind: str, m: int, n: int) -> tuple[tuple[int, int], tuple[int, int]]:
    t = NUMBA_TPB
    if kind == "naive":  # x walks rows of C
        return ((m + t - 1) // t, (n + t - 1) // t), (t, t)
    return ((n + t - 1) // t, (m + t - 1) // t), (t, t)


def torch_matmul(ctx: C.Ctx) -> None:
    """torch: `torch.matmul(a, b, out=c)`, TF32 off and on."""
    torch, sink = ctx.torch, ctx.sink
    version = torch.__version__

    for shape in C.only(C.shapes("matmul", ctx.quick)):
        for tf32 in (False, True):
            impl = "torch_tf32" if tf32 else "torch"
            base = C.mm_base(
                "matmul",
                impl,
                shape,
                math="tf32" if tf32 else "fp32",
                version=version,
                call="torch.matmul(a, b, out=c)",
            )

            def matmul(
                shape: tuple[int, int, int] = shape, tf32: bool = tf32, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                m, n, k = shape
                nbytes, flops = C.mm_counts(shape)
                sets = C.sets_for(int(nbytes))
                a, b = ctx.rand((m, k)), ctx.rand((k, n))
                ref = C.matmul_ref(torch, a, b)
                bufs = [(a.clone(), b.clone(), ctx.nan((m, n))) for _ in range(sets)]

                def launch(i: int) -> Any:
                    x, y, z = bufs[i % sets]
                    return torch.matmul(x, y, out=z)

                C.set_tf32(torch, tf32)
                try:
                    return C.timed_check(
                        ctx,
                        {**base, "sets": sets},
                        lambda: launch(0),
                        ref,
                        launch,
                        nbytes,
                        flops,
                        C.TF32_TOL if tf32 else C.F32_TOL,
                    )
                finally:
                    C.set_tf32(torch, False)

            sink.item(base, matmul)


def triton_matmul(ctx: C.Ctx) -> None:
    """Triton: the tutorial's blocked matmul, the fastest configuration per shape."""
    import triton
    import triton.language as tl

    torch, sink = ctx.torch, ctx.sink
    version = triton.__version__
    kernel = build_triton_matmul(triton, tl)

    for shape in C.only(C.shapes("matmul", ctx.quick)):
        for precision in ("ieee", "tf32"):
            impl = "triton_tf32" if precision == "tf32" else "triton"
            base = C.mm_base(
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
                nbytes, flops = C.mm_counts(shape)
                sets = C.sets_for(int(nbytes))
                a, b = ctx.rand((m, kk)), ctx.rand((kk, n))
                ref = C.matmul_ref(torch, a, b)
                bufs = [(a.clone(), b.clone(), ctx.nan((m, n))) for _ in range(sets)]
                tol = C.TF32_TOL if precision == "tf32" else C.F32_TOL

                def launcher(cfg: tuple[int, ...]) -> Callable[[int], Any]:
                    bm, bn, bk, group, warps, stages = cfg
                    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)

                    def launch(i: int) -> Any:
                        x, y, z = bufs[i % sets]
                        kernel[grid](
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
                ctx.timer.budget = C.Budget(warmup=2, max_reps=10, target_s=0.05, max_wall_s=0.5, min_reps=3)
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
                return C.timed_check(ctx, rec, lambda: launch(0), ref, launch, nbytes, flops, tol)

            sink.item(base, matmul)


def numba_matmul(ctx: C.Ctx) -> None:
    """Numba: the tutorial's naive and shared-memory matmuls (naive skipped above 4096^3)."""
    import numba

    global cuda
    cuda = C.import_numba_cuda()
    torch, sink = ctx.torch, ctx.sink
    version = numba.__version__
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    arr = cuda.as_cuda_array

    kernels = build_numba_matmul()

    for shape in C.only(C.shapes("matmul", ctx.quick)):
        for kind in ("naive", "tiled"):
            base = C.mm_base("matmul", f"numba:{kind}", shape, math="fp32", version=version, variant=kind)
            if kind == "naive" and C.mm_counts(shape)[1] > NUMBA_NAIVE_MAX_FLOPS:
                sink.emit({**base, "skipped": "naive Numba matmul above 4096^3 takes over a second per run"})
                continue

            def matmul(
                shape: tuple[int, int, int] = shape, kind: str = kind, base: dict[str, Any] = base
            ) -> dict[str, Any]:
                m, n, kk = shape
                nbytes, flops = C.mm_counts(shape)
                sets = C.sets_for(int(nbytes))
                a, b = ctx.rand((m, kk)), ctx.rand((kk, n))
                ts = [(a.clone(), b.clone(), ctx.nan((m, n))) for _ in range(sets)]
                bufs = [tuple(arr(t) for t in s) for s in ts]
                grid, blk = numba_matmul_grid(kind, m, n)
                fn = kernels[f"matmul_{kind}"]

                def launch(i: int) -> Any:
                    x, y, z = bufs[i % sets]
                    fn[grid, blk, stream](x, y, z)
                    return ts[i % sets][2]

                return C.timed_check(
                    ctx,
                    {**base, "sets": sets},
                    lambda: launch(0),
                    C.matmul_ref(torch, a, b),
                    launch,
                    nbytes,
                    flops,
                    max_batch=1,
                )

            sink.item(base, matmul)
