"""Multi-GPU peers: torch.distributed's NCCL all-reduce (sum) of 256 MiB of f32 per GPU.

What users run: one process per GPU (torch.multiprocessing spawn, the launcher torchrun uses
the same model), NCCL backend, `dist.all_reduce` on a CUDA tensor. Each rank fills its tensor
with rank + 1, checks the sum once, then times `reps` all-reduces (each between a barrier and a
`torch.cuda.synchronize`, wall clock); rank 0 reports the median. Bandwidths as NCCL's tests
define them: algbw = bytes / time, busbw = algbw * 2 (n - 1) / n (the same as the
`all_reduce` records of examples/bench/graph.rs). With fewer than two GPUs the record is skipped.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from typing import Any

import peers_common as C

REDUCE_N = 64 << 20  # floats per GPU: 256 MiB


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, reps: int, results: Any) -> None:
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    try:
        x = torch.full((REDUCE_N,), float(rank + 1), device="cuda", dtype=torch.float32)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        want = world * (world + 1) / 2
        ok = bool(torch.all(x == want).item())
        times = []
        for _ in range(reps + 1):
            dist.barrier()
            torch.cuda.synchronize()
            start = time.perf_counter()
            dist.all_reduce(x)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        if rank == 0:
            results.put((ok, statistics.median(times[1:])))
    finally:
        dist.destroy_process_group()


def peer_multi(ctx: Any) -> None:
    torch = ctx.torch
    world = torch.cuda.device_count()
    base = C.record("all_reduce", "torch.distributed:nccl", str(REDUCE_N), op="sum", gpus=world)
    if world < 2:
        ctx.sink.emit({**base, "skipped": f"{world} GPU(s): needs 2"})
        return

    def measure() -> dict[str, Any]:
        import torch.multiprocessing as mp

        mp_ctx = mp.get_context("spawn")
        results = mp_ctx.SimpleQueue()
        reps = 3 if ctx.quick else 20
        mp.start_processes(
            _rank, args=(world, _free_port(), reps, results), nprocs=world, join=True, start_method="spawn"
        )
        ok, ms = results.get()
        algbw = REDUCE_N * 4 / (ms * 1e-3) / 1e9
        rec = {**base, "check": "pass" if ok else "fail", "ref": "exact_sum", "rel_err": 0.0 if ok else None}
        if not ok:
            return rec
        return {
            **rec,
            "median_ms": ms,
            "algbw_gb_s": algbw,
            "busbw_gb_s": algbw * 2 * (world - 1) / world,
            "stat": "median",
            "timer": "wall_clock",
        }

    ctx.sink.item(base, measure)
