#!/usr/bin/env python3
"""Compares the PTX entry points of two builds, entry by entry, modulo names.

    python3 scripts/ptx_diff.py OLD.ptx NEW.ptx [--rename OLD_NAME=NEW_NAME ...] [--map FILE]

Each `.entry` body is normalised before the comparison: the entry's own name (in its parameter
names, `name_param_0`), label numbering (`$L__BB12_3`), and the names of called functions and
global symbols (numbered in order of first use) are replaced by placeholders, so that a renamed
or re-declared kernel whose instructions are the same compares equal. `--rename` (or `--map`, a
file of `old new` lines) pairs an old entry with its new name. Prints one line per entry that
differs, is missing or is new, and a summary; exits 1 if any entry differs or is missing.
"""

import argparse
import re
import sys


def entries(text):
    """Entry name -> the lines of its body (from `.entry` to its closing brace)."""
    out = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"\s*\.visible\s+\.entry\s+(\w+)\s*\(", lines[i])
        if not m:
            i += 1
            continue
        name, depth, body = m.group(1), 0, []
        opened = False
        while i < len(lines):
            line = lines[i]
            body.append(line)
            depth += line.count("{") - line.count("}")
            opened = opened or "{" in line
            i += 1
            if opened and depth == 0:
                break
        out[name] = body
    return out


def normalise(name, body):
    """The body with names that do not change its meaning replaced by placeholders."""
    text = "\n".join(body)
    text = text.replace(name + "_param_", "ENTRY_param_")
    text = re.sub(r"\.entry\s+\w+", ".entry ENTRY", text)
    labels = {}
    text = re.sub(r"\$L__\w+", lambda m: labels.setdefault(m.group(0), f"$L{len(labels)}"), text)
    symbols = {}

    def symbol(m):
        return m.group(1) + symbols.setdefault(m.group(2), f"SYM{len(symbols)}")

    # Called functions and referenced globals, by mangled name.
    text = re.sub(r"(call(?:\.uni)?\s*(?:\([^)]*\),\s*)?)(\w+)", symbol, text)
    text = re.sub(r"(\b(?:mov|cvta)\.[\w.]+\s+%\w+,\s*)(_Z\w+|_R\w+|__\w+)", symbol, text)
    # Whitespace and comments.
    text = re.sub(r"//[^\n]*", "", text)
    return [l.strip() for l in text.splitlines() if l.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rename", action="append", default=[], help="OLD_NAME=NEW_NAME")
    ap.add_argument("--map", help="a file of `old new` entry-name pairs")
    args = ap.parse_args()
    rename = dict(r.split("=", 1) for r in args.rename)
    if args.map:
        for line in open(args.map):
            parts = line.split()
            if len(parts) == 2:
                rename[parts[0]] = parts[1]
    old, new = entries(open(args.old).read()), entries(open(args.new).read())
    same = differ = missing = 0
    seen = set()
    for name, body in sorted(old.items()):
        target = rename.get(name, name)
        seen.add(target)
        if target not in new:
            print(f"missing: {name}" + (f" (as {target})" if target != name else ""))
            missing += 1
        elif normalise(name, body) != normalise(target, new[target]):
            print(f"differs: {name}" + (f" -> {target}" if target != name else ""))
            differ += 1
        else:
            same += 1
    added = sorted(set(new) - seen)
    for name in added:
        print(f"new: {name}")
    print(f"ptx_diff: {same} the same, {differ} differ, {missing} missing, {len(added)} new")
    sys.exit(1 if differ or missing else 0)


if __name__ == "__main__":
    main()
