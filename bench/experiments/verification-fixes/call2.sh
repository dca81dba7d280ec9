#!/usr/bin/env bash
# A/B of the bench binary before (764da37, bench-old) and after (bench-new) the verification fixes,
# which changed the PTX of every norm kernel (the overflow test and its rare path) and of the
# argmax axis kernels (the all--inf rule): the copy ceiling, the axis reductions and every norm
# variant, old then new twice, in one device call. Writes $OUT/ab-{old,new}-{1,2}.jsonl.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/run1 ] || { mkdir -p .device && tar xJf .device/run1.tar.xz -C .device; } || exit 1
cublas="$(bash -c 'source <(sed -n "/^find_cublas()/,/^}/p" bench/run.sh); find_cublas')" &&
    export LD_LIBRARY_PATH="$cublas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GPUKERN_GIT_REV=ab
for round in 1 2; do
  for which in old new; do
    GPUKERN_GIT_REV=$which timeout 120 .device/run1/bench-$which --kernels copy,axis,norm --budget-s 100 \
        --out "$OUT/ab-$which-$round.jsonl" > "$OUT/ab-$which-$round.log" 2>&1
    echo "$which round $round: exit $?, $(wc -l < "$OUT/ab-$which-$round.jsonl") records"
  done
done
python3 - "$OUT" <<'PY'
import json, sys, glob, collections
out = sys.argv[1]
rate = collections.defaultdict(list)
for f in sorted(glob.glob(out + "/ab-*.jsonl")):
    which = f.split("ab-")[1].split("-")[0]
    for line in open(f):
        r = json.loads(line)
        if r.get("gbps"):
            rate[(r["kernel"], r["impl"], r["shape"], r.get("dtype"), which)].append(r["gbps"])
keys = sorted({k[:4] for k in rate})
print(f"{'kernel':12} {'impl':26} {'shape':14} {'dtype':5} {'old GB/s':>17} {'new GB/s':>17} {'new/old':>7}")
for k in keys:
    o, n = rate.get(k + ("old",), []), rate.get(k + ("new",), [])
    if o and n:
        print(f"{k[0]:12} {k[1]:26} {k[2]:14} {str(k[3]):5} {min(o):8.0f}-{max(o):<8.0f} {min(n):8.0f}-{max(n):<8.0f} {sum(n)/len(n)/(sum(o)/len(o)):7.3f}")
PY
