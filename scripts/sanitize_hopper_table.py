#!/usr/bin/env python3
"""The README's table of the simulator against compute-sanitizer on the planted Hopper bugs, from
the log scripts/sanitize-hopper.sh writes: one row per planted kernel, its rule, what the
simulator reports (every plant is reported with its rule: gpukern-device/tests/sim_hopper.rs
asserts it), and what the bare run and each compute-sanitizer tool did.

    python3 scripts/sanitize_hopper_table.py LOG

Prints the Markdown table (twins, if the log has them, in a second table).
"""

import re
import sys

RUNS = ["bare", "memcheck", "racecheck", "synccheck", "initcheck"]

# How each outcome reads in a cell.
CELL = {
    "reported": "**reports**",
    "hang": "hang (killed)",
    "silent-ok": "silent",
    "silent-wrong": "silent, wrong result",
    "cuda-error": "CUDA error",
    "map-refused": "map refused",
}


def read(path):
    """The log's header lines and its rows, by plant, in order."""
    header, rows = [], {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                header.append(line.lstrip("# "))
                continue
            if not line.strip():
                continue
            rule, plant, run, outcome, *detail = line.split("\t")
            rows.setdefault(plant, {"rule": rule, "runs": {}})["runs"][run] = (outcome, detail[0] if detail else "")
    return header, rows


# What the simulator reports for a plant whose report names another rule than the one it breaks.
SIMULATOR = {
    "mbarrier_tx_under_planted": "**reports** (as `mbarrier-deadlock`: the phase still expects 256 bytes)",
}


def cell(run):
    """One table cell: the outcome, and for a CUDA error the error."""
    if run is None:
        return "-"
    outcome, detail = run
    text = CELL.get(outcome, outcome)
    if outcome == "cuda-error" and detail:
        error = detail.split(";")[0].strip()
        if error.startswith("cuda-error (") and error.endswith(")"):
            error = error[len("cuda-error (") : -1]
        # The driver's error code where the detail names one (`DriverError(CUDA_ERROR_..., "...")`).
        code = re.search(r"CUDA_ERROR_[A-Z_]+", error)
        text += f" ({code.group(0) if code else error[:60]})"
    return text


def table(rows, simulator):
    """The Markdown table of `rows`."""
    lines = [
        "| rule | planted kernel | simulator | GPU, bare | memcheck | racecheck | synccheck | initcheck |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for plant, row in rows.items():
        cells = [cell(row["runs"].get(r)) for r in RUNS]
        sim = SIMULATOR.get(plant, simulator)
        lines.append(f"| `{row['rule']}` | `{plant}` | {sim} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    header, rows = read(sys.argv[1])
    plants = {p: r for p, r in rows.items() if not p.endswith("_twin")}
    twins = {p: r for p, r in rows.items() if p.endswith("_twin")}
    for h in header:
        print(f"<!-- {h} -->")
    print(table(plants, "**reports** (its rule)"))
    if twins:
        print()
        print(table(twins, "passes"))


if __name__ == "__main__":
    main()
