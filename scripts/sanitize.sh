#!/usr/bin/env bash
# compute-sanitizer over every kernel on the GPU: memcheck (with leak check), racecheck, synccheck
# and initcheck, each over the CUDA trials of the `kernels` test binary (every kernel and
# variant, ragged and edge shapes; the few largest shapes are skipped because racecheck slows
# shared-memory kernels by orders of magnitude). Fails if any tool reports an error.
#
#   bash scripts/sanitize.sh DIR [TEST ARGS...]   DIR as made by `scripts/gpu-check.sh build DIR`
set -uo pipefail
dir=${1:?usage: sanitize.sh DIR [TEST ARGS...]}
shift
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
    args=(cuda:: --skip 1000x1000x1000 --skip 1048576 --skip 1000x4097 --skip 1537x129x1409
        --skip 2048x256x1152 --skip 3x100000)
fi
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
kernels=$(find "$dir/tests" -name 'kernels-*' -type f | head -n 1)
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda
status=0
for tool in memcheck racecheck synccheck initcheck; do
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    log=$(mktemp)
    start=$(date +%s)
    timeout "${SANITIZE_TOOL_TIMEOUT:-300}" \
        "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 "$kernels" "${args[@]}" --test-threads 1 >"$log" 2>&1
    rc=$?
    passed=$(grep -Eo '[0-9]+ passed; [0-9]+ failed' "$log" | tail -n 1)
    summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)
    echo "$tool: ${summary:-no summary} | tests: ${passed:-?} | exit $rc | $(( $(date +%s) - start )) s"
    if [ $rc -ne 0 ]; then
        status=1
        grep -E '^=========' "$log" | head -n 40
    fi
    rm -f "$log"
done
exit $status
