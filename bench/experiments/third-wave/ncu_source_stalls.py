"""Stall reasons per SASS opcode from ncu's source page (`ncu -i REPORT --page source --csv
--print-source sass`, gzipped or not): each reason's samples summed over the instructions of one
opcode (the mnemonic before its first dot, a predicate dropped), as a share of all the kernel's
samples, the ten opcodes with the most samples, as a Markdown table.

    python3 ncu_source_stalls.py CSV[.gz]...
"""

import collections
import csv
import gzip
import io
import re
import sys

REASONS = ["stall_wait", "stall_barrier", "stall_selected", "stall_long_sb", "stall_dispatch",
           "stall_short_sb", "stall_not_selected"]


def table(path: str) -> str:
    raw = gzip.open(path) if path.endswith(".gz") else open(path, "rb")
    rows = list(csv.reader(io.TextIOWrapper(raw)))
    header, data = rows[1], rows[2:]
    col = {h: i for i, h in enumerate(header)}
    total = sum(int(r[col["Warp Stall Sampling (All Samples)"]] or 0) for r in data)
    stalls: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    executed: collections.Counter = collections.Counter()
    for r in data:
        op = re.sub(r"^@!?U?P\w+\s+", "", r[1].strip())
        opcode = (op.split()[0] if op else "").split(".")[0]
        for reason in REASONS:
            stalls[opcode][reason] += int(r[col[reason]] or 0)
        executed[opcode] += int(r[col["Instructions Executed"]] or 0)
    out = [f"### {path.split('/')[-1]}: {total} samples, {sum(executed.values())} warp instructions executed", "",
           "| opcode | executed | " + " | ".join(x[6:] for x in REASONS) + " |",
           "| --- | --- | " + " | ".join("---" for _ in REASONS) + " |"]
    for opcode, c in sorted(stalls.items(), key=lambda x: -sum(x[1].values()))[:10]:
        out.append(f"| `{opcode}` | {executed[opcode]} | " + " | ".join(f"{c[x] / total:.3f}" for x in REASONS) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(table(p))
