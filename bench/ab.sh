#!/usr/bin/env bash
# An A/B of bench binaries in one device call: each binary in turn, ROUNDS times, with the same
# arguments, so that every binary sees the same clocks and power state (BENCHMARKING.md: ratios
# hold within one call). Each run writes OUT_DIR/<LABEL>-<ROUND>.jsonl, its records' `git_rev`
# set to LABEL (name the commit or branch: the records must say which code they timed).
#
#   bash bench/ab.sh OUT_DIR ROUNDS LABEL=BIN [LABEL=BIN ...] -- BENCH_ARGS...
#   e.g. bash bench/ab.sh "$OUT" 2 b233429=bin/bench-b233429 043227d=bin/bench-main \
#            -- --kernels attention_bwd --budget-s 120
#
# The binaries are `target/release/examples/bench` of each tree (built elsewhere, carried in).
set -uo pipefail
out=${1:?usage: bash bench/ab.sh OUT_DIR ROUNDS LABEL=BIN... -- BENCH_ARGS...}
rounds=${2:?usage: bash bench/ab.sh OUT_DIR ROUNDS LABEL=BIN... -- BENCH_ARGS...}
shift 2
runs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
        *=*) runs+=("$1") ;;
        *) echo "bench/ab.sh: '$1' is not LABEL=BIN" >&2; exit 2 ;;
    esac
    shift
done
[ "${1:-}" = "--" ] && shift
if [ ${#runs[@]} -eq 0 ]; then
    echo "bench/ab.sh: no LABEL=BIN given" >&2
    exit 2
fi
mkdir -p "$out"
status=0
for round in $(seq 1 "$rounds"); do
    for run in "${runs[@]}"; do
        label=${run%%=*} bin=${run#*=}
        if [ ! -x "$bin" ]; then
            echo "bench/ab.sh: $bin is not an executable" >&2
            exit 2
        fi
        echo "== $label, round $round"
        GPUKERN_GIT_REV=$label "$bin" --out "$out/$label-$round.jsonl" "$@" || status=$?
    done
done
exit $status
