#!/usr/bin/env python3
"""Run-to-run spread: the same measurements in two benchmark runs, side by side.

    python3 bench/compare.py bench/results/previous.jsonl bench/results/latest.jsonl

Rows are matched on (kernel, impl, shape, t, mode, math); only rows timed in both runs count.
Prints a markdown table of |rate_b / rate_a - 1| per kernel family (median and maximum), which
is the spread to read the ratios in BENCHMARKS.md against.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def load(path: str) -> dict[tuple, dict]:
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("median_ms") is None:
                continue
            key = tuple(str(r.get(k)) for k in ("kernel", "impl", "shape", "t", "mode", "math"))
            rows[key] = r
    return rows


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = load(sys.argv[1]), load(sys.argv[2])
    spread: dict[str, list[float]] = defaultdict(list)
    for key in a.keys() & b.keys():
        ma, mb = a[key]["median_ms"], b[key]["median_ms"]
        if ma and mb:
            spread[key[0]].append(abs(ma / mb - 1.0))
    if not spread:
        print("no measurement is timed in both runs", file=sys.stderr)
        return 1
    revs = (next(iter(a.values())).get("git_rev"), next(iter(b.values())).get("git_rev"))
    print(f"| kernel | rows in both runs ({revs[0]} and {revs[1]}) | median change | largest change |")
    print("| --- | ---: | ---: | ---: |")
    for kernel in sorted(spread):
        d = spread[kernel]
        print(f"| {kernel} | {len(d)} | {100 * statistics.median(d):.1f}% | {100 * max(d):.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
