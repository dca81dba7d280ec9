#!/usr/bin/env python3
"""Run-to-run spread: the same measurements in two benchmark runs of the same commit.

    python3 bench/compare.py bench/results/latest.jsonl bench/results/repeat.jsonl
    python3 bench/compare.py --change OLD.jsonl NEW.jsonl     # two different commits

The spread is two full runs of the *same* commit, back to back (`bash bench/run.sh --twice`
writes them): it says how far a figure moves with nothing changed. Two runs of different
commits measure gpukern's own changes as well, so compare.py refuses them (exit 3) unless
`--change` is given, and then titles the table "change, not spread".

Rows are matched on (kernel, impl, shape, t, mode, math, op); only rows timed in both runs count.
Prints a markdown table of |median_ms_b / median_ms_a - 1| per kernel family, median and
maximum, in percent (the unit is in the column header, so the numbers are rendered from the
two records, not prose figures).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict

# `op` tells apart the launch-overhead rows of different kernels at the same shape.
KEY = ("kernel", "impl", "shape", "t", "mode", "math", "op")


def load(path: str) -> tuple[dict[tuple, dict], set[str]]:
    """The timed records of a run by KEY, and the commits its records name."""
    rows = {}
    revs = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("git_rev"):
                revs.add(str(r["git_rev"]))
            if r.get("median_ms") is None:
                continue
            rows[tuple(str(r.get(k)) for k in KEY)] = r
    return rows, revs


def changes(a: dict[tuple, dict], b: dict[tuple, dict]) -> dict[str, list[float]]:
    """|b / a - 1| of median_ms per kernel family, over the rows timed in both runs."""
    out: dict[str, list[float]] = defaultdict(list)
    for key in sorted(a.keys() & b.keys()):
        ma, mb = a[key]["median_ms"], b[key]["median_ms"]
        if ma and mb:
            out[key[0]].append(abs(mb / ma - 1.0))
    return out


def render(spread: dict[str, list[float]], revs_a: set[str], revs_b: set[str], change: bool) -> str:
    ra, rb = ", ".join(sorted(revs_a)) or "unknown", ", ".join(sorted(revs_b)) or "unknown"
    what = "change, not spread" if change else "spread"
    both = f"{ra} and {rb}" if change else f"both at {ra}"
    lines = [
        f"| kernel | rows in both runs ({both}) | median {what} (%) | largest {what} (%) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for kernel in sorted(spread):
        d = spread[kernel]
        lines.append(f"| {kernel} | {len(d)} | {100 * statistics.median(d):.1f} | {100 * max(d):.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="first run (JSON Lines)")
    parser.add_argument("b", help="second run (JSON Lines)")
    parser.add_argument(
        "--change", action="store_true", help="allow runs of different commits; the table says change, not spread"
    )
    args = parser.parse_args(argv)
    (a, revs_a), (b, revs_b) = load(args.a), load(args.b)
    same = len(revs_a) == 1 and revs_a == revs_b and "unknown" not in revs_a
    if not same and not args.change:
        print(
            f"compare: the runs are of different (or unknown) commits ({sorted(revs_a)} and {sorted(revs_b)}): "
            "their difference is gpukern's own changes as well as noise, not a spread. Run the suite twice "
            "at one commit (bash bench/run.sh --twice), or pass --change to compare commits.",
            file=sys.stderr,
        )
        return 3
    spread = changes(a, b)
    if not spread:
        print("compare: no measurement is timed in both runs", file=sys.stderr)
        return 1
    print(render(spread, revs_a, revs_b, change=not same))
    return 0


if __name__ == "__main__":
    sys.exit(main())
