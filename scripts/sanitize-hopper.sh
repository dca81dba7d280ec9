#!/usr/bin/env bash
# Every planted Hopper bug of gpukern-device/checks/hopper on the GPU, each in its own process:
# once bare and once under each compute-sanitizer tool (memcheck, racecheck, synccheck,
# initcheck), each run under a timeout (a hang is a result). Writes one line per (plant, run):
#
#   <rule> <TAB> <plant> <TAB> <run> <TAB> <outcome> <TAB> <detail>
#
# run: bare | memcheck | racecheck | synccheck | initcheck
# outcome: reported (the tool found errors; detail: its count and first message) | hang (killed
#   at the timeout) | silent-ok (nothing reported, the twin's results) | silent-wrong (nothing
#   reported, other results) | cuda-error (the launch or kernel failed, nothing reported) |
#   map-refused (the driver refused the tensor map; nothing ran)
#
#   bash scripts/sanitize-hopper.sh DIR [LOG]
#
# DIR holds the hopper_plant binary (built here by
#   cargo build --release -p gpukern-device-checks-runner --features hopper-plants --bin hopper_plant
# with GPUKERN_PTX_ARCHS unset); LOG defaults to DIR/sanitize-hopper.log. With HOPPER_TWINS=1 the
# correct twins run too (they must come out silent-ok). SANITIZE_HOPPER_TIMEOUT (seconds, default
# 10) bounds each run; SANITIZE_HOPPER_JOBS (default 6) runs that many at once;
# SANITIZE_HOPPER_ONLY (an extended regular expression) keeps the plants whose names match it.
# scripts/sanitize_hopper_table.py turns the log into the README's table.
set -uo pipefail

dir=${1:?usage: sanitize-hopper.sh DIR [LOG]}
log=${2:-$dir/sanitize-hopper.log}
plant_bin=$dir/hopper_plant
limit=${SANITIZE_HOPPER_TIMEOUT:-10}
jobs=${SANITIZE_HOPPER_JOBS:-6}
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$plant_bin" ] || { echo "sanitize-hopper: no $plant_bin" >&2; exit 2; }

mapfile -t plants < <("$plant_bin" --list | { if [ "${HOPPER_TWINS:-0}" = 1 ]; then cat; else grep -v '_twin '; fi; } | { if [ -n "${SANITIZE_HOPPER_ONLY:-}" ]; then grep -E "^(${SANITIZE_HOPPER_ONLY}) "; else cat; fi; })
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One run: its outcome line into $work/<plant>.<run>.
one() {
    local name=$1 rule=$2 run=$3 out=$work/$1.$3
    local cmd=("$plant_bin" "$name")
    if [ "$run" != bare ]; then
        cmd=("$sanitizer" --tool "$run" --error-exitcode 99 "${cmd[@]}")
    fi
    local text rc outcome detail
    text=$(timeout --kill-after=5 "$limit" "${cmd[@]}" 2>&1)
    rc=$?
    local own
    own=$(grep -m1 '^outcome: ' <<<"$text" | sed 's/^outcome: //')
    local summary
    summary=$(grep -Eo '(ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?, [0-9]+ warnings?\))' <<<"$text" | tail -n 1)
    local count
    count=$(grep -Eo '[0-9]+ errors?' <<<"$summary" | grep -Eo '^[0-9]+' | tail -n 1)
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        outcome=hang
        detail="killed after ${limit} s${own:+; $own}"
    elif [ -n "${count:-}" ] && [ "$count" -gt 0 ]; then
        outcome=reported
        detail="$summary; $(grep -m1 -E '^========= (Invalid|Race|Barrier|Uninitialized|Program hit|Error|Warning|[A-Z][a-z]+ (access|hazard|error))' <<<"$text" | sed 's/^========= //' | cut -c1-160)"
    else
        case "$own" in
            ok*) outcome=silent-ok ;;
            wrong-result*) outcome=silent-wrong ;;
            map-refused*) outcome=map-refused ;;
            cuda-error*) outcome=cuda-error ;;
            *) outcome=cuda-error; own="exit $rc, no outcome line: $(tail -n 1 <<<"$text" | cut -c1-160)" ;;
        esac
        detail="$own${summary:+; $summary}"
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$rule" "$name" "$run" "$outcome" "$detail" >"$out"
}

start=$(date +%s)
running=0
for line in "${plants[@]}"; do
    read -r name rule _ <<<"$line"
    for run in bare memcheck racecheck synccheck initcheck; do
        one "$name" "$rule" "$run" &
        running=$((running + 1))
        if [ "$running" -ge "$jobs" ]; then
            wait -n
            running=$((running - 1))
        fi
    done
done
wait

{
    printf '# sanitize-hopper: %s, %s\n' "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)" "$("$sanitizer" --version 2>/dev/null | grep -Eo 'Version [^ ]+' | head -n 1)"
    printf '# timeout %s s per run; %s runs at once; %s s in all\n' "$limit" "$jobs" "$(($(date +%s) - start))"
    for line in "${plants[@]}"; do
        read -r name _ <<<"$line"
        for run in bare memcheck racecheck synccheck initcheck; do
            cat "$work/$name.$run"
        done
    done
} >"$log"
cat "$log"
echo "sanitize-hopper: wrote $log"
