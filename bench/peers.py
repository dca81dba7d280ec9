#!/usr/bin/env python3
"""The peers of gpukern's benchmark: PyTorch, Triton and Numba CUDA.

Same shapes, same method and same JSON Lines schema as examples/bench.rs (see
bench/README.md): random inputs fresh for every check, a check against a float64 reference
(computed on the device) before anything is timed, CUDA events around the launches after
warm-up, a large device-to-device copy before every sample (it evicts L2 and keeps the GPU
busy while the host queues the launches), rotation among several input buffers when the
data fits in L2, the median over the samples.

    PYTHONUNBUFFERED=1 python3 bench/peers.py --out bench/results/peers.jsonl [--quick]
        [--peers torch,triton,numba] [--budget-s 330]

Each peer, and each measurement inside it, is wrapped: a failure is recorded (median_ms
null, "error") and the run goes on. Measurements left when the time budget is spent are
recorded as skipped.

This file is the driver: PEERS (each entry a peer library's or a compiler's rows, across the
families) and the command line. The method, records, timing and the suite (bench/suite.json,
the shapes and byte and flop models the Rust bench reads too) are in peers_common.py; the peers
are filed by family beside it, one file per file of examples/bench/ (peers_memory.py,
peers_matmul.py, peers_softmax.py, peers_overhead.py, peers_reduce.py, peers_transpose.py,
peers_norm.py, peers_cross_entropy.py, peers_sample.py, peers_matmul_half.py, peers_matmul_decode.py, peers_matmul_grouped.py, peers_attention.py, peers_decode_attention.py, peers_graph.py,
peers_norm.py, peers_cross_entropy.py, peers_sample.py, peers_matmul_half.py, peers_matmul_decode.py, peers_matmul_fp8.py, peers_attention.py, peers_decode_attention.py, peers_graph.py,
peers_transfer.py, peers_multi.py). Imports go one way: peers_common <- family files <- this
file (`--list` prints PEERS; `--selftest` checks the pure parts).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone

import peers_attention
import peers_common as C
import peers_cross_entropy
import peers_decode_attention
import peers_graph
import peers_llm_blocks
import peers_matmul
import peers_matmul_decode
import peers_matmul_grouped
import peers_matmul_fp8
import peers_matmul_half
import peers_memory
import peers_multi
import peers_norm
import peers_overhead
import peers_reduce
import peers_sample
import peers_softmax
import peers_transfer
import peers_transpose

# Each entry: the family functions it runs, in order (a library's rows across the families, as
# `--peers` and bench/run-parts.sh name them).
PEERS: dict[str, list[Callable[[C.Ctx], None]]] = {
    "torch": [
        peers_memory.torch_memory,
        peers_matmul.torch_matmul,
        peers_softmax.torch_softmax,
        peers_overhead.torch_overhead,
        peers_overhead.torch_copies,
    ],
    "triton": [peers_softmax.triton_softmax, peers_matmul.triton_matmul],
    "numba": [
        peers_memory.numba_memory,
        peers_matmul.numba_matmul,
        peers_softmax.numba_softmax,
        peers_overhead.numba_overhead,
    ],
    "multi": [peers_multi.peer_multi],
    "torch_graph": [peers_graph.peer_torch_graph],
    "torch_transfer": [peers_transfer.torch_transfer],
    "torch_reduce": [peers_reduce.peer_torch_reduce, peers_transpose.torch_transpose],
    "compile_reduce": [peers_reduce.peer_compile_reduce, peers_transpose.compile_transpose],
    "torch_norm": [peers_norm.peer_torch_norm, peers_cross_entropy.torch_cross_entropy],
    "compile_norm": [peers_norm.peer_compile_norm, peers_cross_entropy.compile_cross_entropy],
    "triton_norm": [peers_norm.peer_triton_norm],
    "torch_half": [peers_matmul_half.peer_torch_half],
    "triton_half": [peers_matmul_half.peer_triton_half],
    "compile_softmax": [peers_softmax.peer_compile_softmax],
    "torch_llm": [peers_llm_blocks.peer_torch_llm],
    "compile_llm": [peers_llm_blocks.peer_compile_llm],
    "torch_sample": [peers_sample.torch_sample],
    "compile_sample": [peers_sample.compile_sample],
    "torch_decode": [peers_matmul_decode.peer_torch_decode],
    "compile_decode": [peers_matmul_decode.peer_compile_decode],
    "torch_grouped": [peers_matmul_grouped.torch_grouped],
    "torch_fp8": [peers_matmul_fp8.peer_torch_fp8],
    "torch_attention": [peers_attention.torch_attention],
    "flex_attention": [peers_attention.flex_attention],
    "flex_attention_masks": [peers_attention.flex_attention_masks],
    "flex_attention_masks_bwd": [peers_attention.flex_attention_masks_bwd],
    "torch_varlen": [peers_attention.torch_varlen],
    "flex_varlen": [peers_attention.flex_varlen],
    "triton_attention": [peers_attention.triton_attention],
    "torch_attention_bwd": [peers_attention.torch_attention_bwd],
    "triton_attention_bwd": [peers_attention.triton_attention_bwd],
    "torch_decode_attention": [peers_decode_attention.torch_decode],
    "compile_decode_attention": [peers_decode_attention.compile_decode],
}


def selftest_suite() -> list[str]:
    """The suite file: every family has shapes of its rank, every kernel a byte model that
    evaluates, and the models agree with the counts written out here."""
    failures: list[str] = []
    suite = C.suite()
    for name, family in suite["families"].items():
        for quick in (False, True):
            shapes = C.shapes(name, quick)
            if not shapes or any(len(s) != len(family["dims"]) for s in shapes):
                failures.append(f"suite: family {name} has no shapes or one of the wrong rank")
        for kernel in family["kernels"]:
            if "bytes" not in suite["models"].get(kernel, {}):
                failures.append(f"suite: kernel {kernel} has no byte model")
    if C.mm_counts((2, 3, 5)) != (4.0 * (10 + 15 + 6), 60.0) or C.bytes_of("add", n=10) != 120.0:
        failures.append("suite: the matmul or add model gives the wrong count")
    try:
        C.evaluate("__import__('os')")
        failures.append("suite: a model may call a function")
    except ValueError:
        pass
    return failures


def selftest() -> int:
    """Checks what can be checked without torch or a GPU: the split-row softmax's arithmetic
    (as the Triton kernels do it), which rows are split, buffer rotation, the statistics."""
    failures = peers_softmax.selftest_triton()
    if not C.one_long_row(1, 1 << 24) or C.one_long_row(8192, 32768) or C.one_long_row(1, 32768):
        failures.append("one_long_row: 1 x 2^24 must be split, 8192 x 32768 and 1 x 32768 not")
    if C.sets_for(12 << 20) != 10 or C.sets_for(1 << 30) != 1:
        failures.append("sets_for: rotation does not match examples/bench/data.rs")
    st = C.Stats.of([3.0, 1.0, 2.0], 1, 0, "cuda_events")
    if st.median_ms != 2.0:
        failures.append(f"Stats.of: median of [3, 1, 2] is {st.median_ms}, not 2")
    failures += selftest_suite()
    failures += peers_norm.selftest_norm()
    failures += peers_matmul_half.selftest()
    failures += peers_matmul_decode.selftest()
    failures += peers_matmul_grouped.selftest()
    failures += peers_matmul_fp8.selftest()
    failures += peers_attention.selftest_attention()
    for f in failures:
        print(f"peers selftest: FAIL {f}", file=sys.stderr)
    print(f"peers selftest: {'FAILED' if failures else 'passed'} ({len(failures)} failure(s))")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/results/peers.jsonl", help="JSON Lines file to write")
    parser.add_argument("--quick", action="store_true", help="only the smallest shapes, short timing")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of: " + ",".join(PEERS))
    parser.add_argument(
        "--budget-s",
        type=float,
        default=330.0,
        help="measurements left after this many seconds are recorded as skipped",
    )
    parser.add_argument(
        "--shapes",
        help="comma-separated: only these softmax, matmul and attention shapes (`1x16777216`, "
        "`4096x4096x4096`, `4x4096x16x128`); the other families run in full",
    )
    parser.add_argument(
        "--selftest", action="store_true", help="check the pure-Python helpers (no torch, no GPU needed) and exit"
    )
    parser.add_argument(
        "--list", action="store_true", help="print each peer and the family functions it runs (no torch needed) and exit"
    )
    args = parser.parse_args()
    if args.selftest:
        return selftest()
    if args.list:
        for name, parts in PEERS.items():
            print(f"{name}: " + ", ".join(f"{p.__module__}.{p.__name__}" for p in parts))
        return 0
    if args.shapes:
        C.ONLY_SHAPES = {x.strip() for x in args.shapes.split(",") if x.strip()}
    chosen = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PEERS]
    if unknown:
        parser.error(f"unknown peer(s) {unknown}; choose from {list(PEERS)}")

    try:
        import torch
    except ImportError as e:
        print(f"peers: cannot import torch ({e}); every peer needs it for data, references and timing", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("peers: no CUDA device: torch.cuda.is_available() is False; nothing was measured", file=sys.stderr)
        return 2

    meta = {
        "gpu": torch.cuda.get_device_name(0),
        "driver": C.driver_version(),
        "git_rev": C.git_rev(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    sink = C.Sink(args.out, meta, time.monotonic() + args.budget_s)
    print(
        f"peers: {meta['gpu']} | driver {meta['driver']} | rev {meta['git_rev']} | {','.join(chosen)}"
        f"{' (quick)' if args.quick else ''} -> {args.out}",
        file=sys.stderr,
    )
    # Every peer launches on this one stream, where the timing events are recorded too.
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        C.set_tf32(torch, False)
        ctx = C.Ctx(torch, sink, args.quick)
        for name in chosen:
            try:
                for part in PEERS[name]:
                    part(ctx)
            except Exception as e:  # noqa: BLE001 - one peer failing must not stop the others
                detail = "".join(traceback.format_exception_only(type(e), e)).strip()
                sink.emit(C.record("setup", name, "-", error=detail[:500]))
                traceback.print_exc()
            torch.cuda.synchronize()
    sink.close()
    print(C.summary(sink.records))
    not_timed = sum(1 for r in sink.records if r.get("median_ms") is None)
    print(f"{len(sink.records)} records written to {args.out} ({not_timed} not timed: failed check, error or skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
