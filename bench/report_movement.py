"""Data movement (issue 14) in BENCHMARKS.md, rendered by bench/report.py: host-device transfers,
the pipelined batch, CUDA graph replay, several GPUs (all-reduce, data-parallel matmul), and
issue 14's targets from the same records.
"""

from __future__ import annotations

from report_common import (
    Run, fmt_ms, fmt_ratio, impl_order, is_gpukern, measured, not_measured, num, ordered, pretty, table,
    unmeasured,
)


# --- Data movement (issue 14): transfers, the pipelined batch, graphs, several GPUs -----------
# The host-device copy paths, in the table's order (examples/bench/transfer.rs, bench/peers_transfer.py).
TRANSFER_IMPLS = [
    "gpukern:pinned", "gpukern:staged", "cudarc:pageable", "gpukern:to_vec", "torch:pinned", "torch:pageable"
]
# The pipelined batch's timings (examples/bench/transfer.rs, `pipelined`): mode -> column.
PIPELINED_MODES = {
    "copies": "copies alone", "compute": "compute alone", "serial": "one stream", "pipelined": "pipelined"
}
# Issue 14's goals.
PINNED_GOAL, OVERLAP_GOAL, GRAPH_GOAL_US, BUSBW_GOAL, SCALING_GOAL = 0.8, 1.15, 1.0, 0.8, 1.8


def mib(shape: str) -> str:
    """Floats as MiB of f32: "67108864" -> "256 MiB"; other shapes as they are."""
    return f"{(4 * int(shape)) >> 20} MiB" if shape.isdigit() else shape


def transfer_section(run: Run) -> str:
    records = measured(run, "transfer")
    parts = ["## Host-device transfers"]
    if not records:
        return "\n\n".join(parts + [not_measured(run, ["transfer"])])
    impls = [i for i in TRANSFER_IMPLS if any(r["impl"] == i for r in records)]
    impls += sorted(ordered(r["impl"] for r in records if r["impl"] not in impls), key=impl_order)
    rows = []
    for shape, direction in ordered((r["shape"], str(r.get("direction", "-"))) for r in records):
        here = {r["impl"]: r for r in records if r["shape"] == shape and str(r.get("direction", "-")) == direction}
        mine, torch = num(here.get("gpukern:pinned"), "gbps"), num(here.get("torch:pinned"), "gbps")
        rates = [num(here.get(i), "gbps") for i in impls]
        row = [shape, direction] + [f"{g:.1f}" if g else "-" for g in rates]
        rows.append(row + [fmt_ratio(mine / torch if mine and torch else None, percent=True)])
    parts += [
        "One copy of the whole buffer between host and device, in GB/s (the bytes copied, once, over "
        "the wall time of the copy and its wait). `gpukern:pinned`: a `PinnedBuffer` copied into or "
        "out of a device buffer; `gpukern:staged`: `Gpu::upload` / `Gpu::download` through the "
        "reused pinned staging buffers; `cudarc:pageable`: cudarc's copy from or into a reused `Vec`; "
        "`gpukern:to_vec`: a download into a fresh `Vec`; `torch:pinned`: `Tensor.to('cuda', "
        "non_blocking=True)` from and `copy_` into a pinned tensor; `torch:pageable`: `.to` from and "
        "into pageable memory. A dash: not measured (see Not timed).",
        table(["size", "direction", *impls, "gpukern:pinned / torch:pinned"], rows, right=range(2, len(impls) + 3)),
    ]
    return "\n\n".join(parts)


def pipelined_section(run: Run) -> str:
    records = measured(run, "pipelined")
    parts = ["## Pipelined batch (upload, matmul, download)"]
    if not records:
        return "\n\n".join(parts + [not_measured(run, ["pipelined"])])
    rows = []
    for shape, impl in ordered((r["shape"], r["impl"]) for r in records):
        by_mode = {r.get("mode"): r for r in records if r["shape"] == shape and r["impl"] == impl}
        ms = {m: num(by_mode.get(m), "median_ms") for m in PIPELINED_MODES}
        bound = max(ms["copies"], ms["compute"]) if ms["copies"] and ms["compute"] else None
        q = ms["pipelined"] / bound if ms["pipelined"] and bound else None
        rows.append([pretty(shape), impl, *(fmt_ms(ms[m]) for m in PIPELINED_MODES), fmt_ms(bound), fmt_ratio(q)])
    streams = ordered(str(r["streams"]) for r in records if r.get("mode") == "pipelined" and r.get("streams"))
    parts += [
        "The `transfer` example's batch `C_i = A_i B` (chunks x n^3: every `A_i` uploaded from pinned "
        "memory, multiplied by a resident `B`, every `C_i` downloaded into pinned memory), wall time "
        "of the whole batch: the copies alone, the products alone on resident data, upload / compute "
        "/ download chunk by chunk on one stream, and pipelined over "
        f"{' / '.join(streams) or 'several'} streams (`Gpu::pipelined`). The overlap bound is "
        "max(copies, compute); the last column is pipelined over that bound (1.00x: full overlap).",
        table(
            ["chunks x n^3", "impl", *PIPELINED_MODES.values(), "max(copies, compute)", "pipelined / bound"],
            rows,
            right=range(2, 8),
        ),
    ]
    return "\n\n".join(parts)


def graph_section(run: Run) -> str:
    records = measured(run, "graph_replay")
    parts = ["## CUDA graph replay"]
    if not records:
        return "\n\n".join(parts + [not_measured(run, ["graph_replay"])])
    rows = []
    for shape in ordered(r["shape"] for r in records):
        here = sorted((r for r in records if r["shape"] == shape), key=lambda r: impl_order(r["impl"]))
        def launches_of(impl: str) -> float | None:
            lib = impl.split(":")[0]
            return num(next((r for r in here if r["impl"] == f"{lib}:launches"), None), "us_per_kernel")

        for r in here:
            per = num(r, "us_per_kernel")
            launches = launches_of(r["impl"])
            vs = per / launches if per and launches and not r["impl"].endswith(":launches") else None
            kernels = r.get("kernels_per_call", "-")
            rows.append([
                shape, r["impl"], str(r.get("op", "-")), str(kernels), f"{r['median_ms'] * 1e3:.2f}",
                f"{per:.3f}" if per is not None else "-", fmt_ratio(vs, percent=True),
            ])
    parts += [
        "A chain of small kernels (`increment_by_one` on 1,024 floats) replayed as one captured graph "
        "(`gpukern:graph`) against the same kernels launched one by one (`gpukern:launches`), and the "
        "same chain of `x.add_(1)` in PyTorch, captured with `torch.cuda.CUDAGraph` and replayed "
        "(`torch:cudagraph`) or launched eagerly (`torch:launches`); calls back to back with one "
        "synchronize at the end; mean wall time per call and per kernel, in microseconds (the "
        "last column against the same library's separate launches):",
        table(
            ["kernels x floats", "impl", "kernel", "kernels per call", "us per call", "us per kernel",
             "of separate launches"],
            rows,
            right=range(3, 7),
        ),
    ]
    return "\n\n".join(parts)


def multi_gpu_section(run: Run) -> str:
    parts = ["## Several GPUs"]
    reduce = sorted(measured(run, "all_reduce"), key=lambda r: impl_order(r["impl"]))
    if reduce:
        torch = {(r["shape"], r.get("gpus")): num(r, "busbw_gb_s") for r in reduce if not is_gpukern(r)}
        rows = []
        for r in reduce:
            bus, theirs = num(r, "busbw_gb_s"), torch.get((r["shape"], r.get("gpus")))
            vs = bus / theirs if is_gpukern(r) and bus and theirs else None
            algbw = num(r, "algbw_gb_s")
            rows.append([
                r["impl"], str(r.get("gpus", "-")), mib(r["shape"]), fmt_ms(r["median_ms"]),
                f"{algbw:.1f}" if algbw is not None else "-", f"{bus:.1f}" if bus is not None else "-",
                fmt_ratio(vs, percent=True),
            ])
        text = (
            "All-reduce (sum) of f32 on every GPU, median wall time, with NCCL's bandwidths: algbw = "
            "bytes / time, busbw = algbw x 2 (n - 1) / n. `gpukern:nccl` is `GpuGroup::all_reduce_sum`, "
            "`torch.distributed:nccl` one process per GPU (`dist.all_reduce`):"
        )
        header = ["impl", "GPUs", "per GPU", "median", "algbw GB/s", "busbw GB/s", "of torch.distributed busbw"]
        parts += ["### All-reduce", text, table(header, rows, right=range(1, 7))]
    else:
        parts += ["### All-reduce", not_measured(run, ["all_reduce"])]
    matmuls = sorted(measured(run, "data_parallel_matmul"), key=lambda r: (r["shape"], num(r, "gpus") or 0))
    if matmuls:
        one = {r["shape"]: r["median_ms"] for r in matmuls if r["impl"] == "gpukern:1gpu"}
        rows = []
        for r in matmuls:
            speedup = num(r, "speedup") or (one[r["shape"]] / r["median_ms"] if r["shape"] in one else None)
            gflops = num(r, "gflop_s")
            rows.append([
                pretty(r["shape"]), r["impl"], str(r.get("gpus", "-")), fmt_ms(r["median_ms"]),
                f"{gflops / 1e3:.1f}" if gflops is not None else "-", fmt_ratio(speedup),
            ])
        text = (
            "A batch of fast fp32 matmuls (batch x m x n x k, operands resident) on one GPU and split "
            "over two (one host thread per GPU), median wall time of the whole batch, and the speed-up "
            "over one GPU:"
        )
        header = ["batch x m x n x k", "impl", "GPUs", "median", "TFLOP/s", "speed-up"]
        parts += ["### Data-parallel matmul", text, table(header, rows, right=range(2, 6))]
    else:
        parts += ["### Data-parallel matmul", not_measured(run, ["data_parallel_matmul"])]
    return "\n\n".join(parts)


def data_movement_sections(run: Run) -> list[str]:
    return [transfer_section(run), pipelined_section(run), graph_section(run), multi_gpu_section(run)]


# --- Issue 14's targets (rows of the targets table, report_targets.py) -----------------------
def pinned_target(run: Run, direction: str) -> list[str]:
    """gpukern's pinned copy against torch's in one direction, at 256 MiB if measured there, else
    at the largest size both measured."""
    label = f"pinned {direction} of 256 MiB >= {100 * PINNED_GOAL:.0f}% of torch pinned (`non_blocking=True`)"
    pairs = []
    for r in measured(run, "transfer"):
        if r["impl"] == "gpukern:pinned" and r.get("direction") == direction and num(r, "gbps"):
            peer = next(
                (
                    p
                    for p in measured(run, "transfer")
                    if p["impl"] == "torch:pinned" and p.get("direction") == direction
                    and p["shape"] == r["shape"] and num(p, "gbps")
                ),
                None,
            )
            if peer:
                pairs.append((r["shape"] == "256MiB", num(r, "n") or 0, r, peer))
    if not pairs:
        return unmeasured(label)
    _, _, mine, peer = max(pairs, key=lambda x: x[:2])
    q = mine["gbps"] / peer["gbps"]
    figure = f"{mine['gbps']:.1f} / {peer['gbps']:.1f} GB/s = **{100 * q:.1f}%** at {mine['shape']}"
    return [label, figure, "met" if q >= PINNED_GOAL else f"missed by {100 * (PINNED_GOAL - q):.1f} points"]


def overlap_target(run: Run) -> list[str]:
    label = f"pipelined batch <= {OVERLAP_GOAL:.2f}x max(copy time, compute time)"
    records = measured(run, "pipelined")
    for shape, impl in ordered((r["shape"], r["impl"]) for r in records):
        ms = {r.get("mode"): num(r, "median_ms") for r in records if r["shape"] == shape and r["impl"] == impl}
        copies, compute, piped = ms.get("copies"), ms.get("compute"), ms.get("pipelined")
        if copies and compute and piped:
            q = piped / max(copies, compute)
            figure = (
                f"{fmt_ms(piped)} / max({fmt_ms(copies)}, {fmt_ms(compute)}) = **{q:.2f}x** "
                f"({pretty(shape)}, {impl})"
            )
            return [label, figure, "met" if q <= OVERLAP_GOAL else "missed"]
    return unmeasured(label)


def graph_target(run: Run) -> list[str]:
    label = f"graph replay <= {GRAPH_GOAL_US:g} us per kernel, chain of 100 small kernels"
    by_impl = {r["impl"]: r for r in measured(run, "graph_replay")}
    per = num(by_impl.get("gpukern:graph"), "us_per_kernel")
    if per is None:
        return unmeasured(label)
    launches = num(by_impl.get("gpukern:launches"), "us_per_kernel")
    figure = f"**{per:.3f} us** per kernel" + (f" (separate launches: {launches:.3f} us)" if launches else "")
    torch_graph = num(by_impl.get("torch:cudagraph"), "us_per_kernel")
    if torch_graph:
        figure += f"; torch.cuda.CUDAGraph of the same chain: {torch_graph:.3f} us"
    return [label, figure, "met" if per <= GRAPH_GOAL_US else "missed"]


def busbw_target(run: Run) -> list[str]:
    label = f"all-reduce of 256 MiB: busbw >= {100 * BUSBW_GOAL:.0f}% of torch.distributed (NCCL)"
    records = measured(run, "all_reduce")
    for mine in (r for r in records if is_gpukern(r) and num(r, "busbw_gb_s")):
        peer = next(
            (
                p
                for p in records
                if not is_gpukern(p) and p["shape"] == mine["shape"] and p.get("gpus") == mine.get("gpus")
                and num(p, "busbw_gb_s")
            ),
            None,
        )
        if peer:
            q = mine["busbw_gb_s"] / peer["busbw_gb_s"]
            figure = (
                f"{mine['busbw_gb_s']:.1f} / {peer['busbw_gb_s']:.1f} GB/s = **{100 * q:.1f}%** "
                f"({mib(mine['shape'])} on {mine.get('gpus', '?')} GPUs)"
            )
            return [label, figure, "met" if q >= BUSBW_GOAL else f"missed by {100 * (BUSBW_GOAL - q):.1f} points"]
    return unmeasured(label)


def scaling_target(run: Run) -> list[str]:
    label = f"data-parallel matmul batch: >= {SCALING_GOAL:.1f}x from one GPU to two"
    by_impl = {r["impl"]: r for r in measured(run, "data_parallel_matmul")}
    one, two = num(by_impl.get("gpukern:1gpu"), "median_ms"), num(by_impl.get("gpukern:2gpu"), "median_ms")
    speedup = num(by_impl.get("gpukern:2gpu"), "speedup") or (one / two if one and two else None)
    if speedup is None:
        return unmeasured(label)
    figure = f"**{speedup:.2f}x**" + (f" ({fmt_ms(one)} on one GPU, {fmt_ms(two)} on two)" if one and two else "")
    return [label, figure, "met" if speedup >= SCALING_GOAL else "missed"]


def data_movement_targets(run: Run) -> list[list[str]]:
    """Issue 14's targets, each from this run's records."""
    return [
        pinned_target(run, "upload"),
        pinned_target(run, "download"),
        overlap_target(run),
        graph_target(run),
        busbw_target(run),
        scaling_target(run),
    ]
