#!/usr/bin/env bash
# Whether each entry's machine code is the same in several builds: extracts the sm_90a PTX
# module embedded in each bench binary (bench/build-trees.sh), or takes a `.ptx` file as it is
# (a build's `kernels_gpu-sm_90a.ptx`), assembles every entry whose name
# starts with PREFIX with ptxas, and compares the instructions (addresses and control codes
# dropped) of each build with the first's and the second's.
#   PTXAS=... CUOBJDUMP=... bash sass-identity.sh PREFIX LABEL=BIN LABEL=BIN [LABEL=BIN...]
# Prints one line per entry: its name, instruction count in the last build, and for each earlier
# build `same-as-LABEL`, `DIFF-LABEL` or `absent-in-LABEL`.
set -euo pipefail
prefix=${1:?usage: sass-identity.sh PREFIX LABEL=BIN...}
shift
ptxas=${PTXAS:-ptxas} cuobjdump=${CUOBJDUMP:-cuobjdump}
work=$(mktemp -d)
labels=()
for spec in "$@"; do
    label=${spec%%=*} bin=${spec#*=}
    labels+=("$label")
    if [[ "$bin" == *.ptx ]]; then cp "$bin" "$work/$label.ptx"; continue; fi
    python3 - "$bin" "$work/$label.ptx" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
at = data.find(b".target sm_90a")
start = data.rfind(b".version", 0, at)
# The module's text ends at its last closing brace before the next non-PTX bytes.
end = at
while True:
    nxt = data.find(b"\n}\n", end)
    if nxt < 0:
        break
    follow = data[nxt + 3:nxt + 4]
    end = nxt + 3
    if follow not in (b"\n", b".", b"\t", b"/", b"") and not follow.isspace():
        break
    if data.find(b"\0", nxt, nxt + 4) >= 0:
        break
open(sys.argv[2], "wb").write(data[start:end])
PY
done
last=${labels[-1]}
for entry in $(grep -o "^.visible .entry $prefix[A-Za-z0-9_]*" "$work/$last.ptx" | awk '{print $3}'); do
    for label in "${labels[@]}"; do
        if ! grep -q "^.visible .entry $entry(" "$work/$label.ptx"; then
            : > "$work/$label-$entry.absent"
            continue
        fi
        "$ptxas" -arch=sm_90a -e "$entry" "$work/$label.ptx" -o "$work/$label-$entry.cubin"
        "$cuobjdump" -sass "$work/$label-$entry.cubin" | grep -E '^\s+/\*[0-9a-f]{4,}\*/' |
            sed 's#/\*[0-9a-f]*\*/##g; s/ *;.*//' > "$work/$label-$entry.txt"
    done
    line="$entry $(wc -l < "$work/$last-$entry.txt")"
    for label in "${labels[@]::${#labels[@]}-1}"; do
        if [ -e "$work/$label-$entry.absent" ]; then
            line+=" absent-in-$label"
        elif cmp -s "$work/$label-$entry.txt" "$work/$last-$entry.txt"; then
            line+=" same-as-$label"
        else
            line+=" DIFF-$label"
        fi
    done
    echo "$line"
done
rm -rf "$work"
