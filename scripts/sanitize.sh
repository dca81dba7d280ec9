#!/usr/bin/env bash
# compute-sanitizer over every kernel on the GPU: memcheck, racecheck, synccheck and initcheck,
# each on the CUDA trials of the `kernels` test binary (every kernel, ragged and edge shapes).
# Fails if any tool reports an error.
#
#   bash scripts/sanitize.sh DIR      DIR as made by `scripts/gpu-check.sh build DIR`
set -euo pipefail
dir=${1:?usage: sanitize.sh DIR}
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
kernels=$(ls "$dir"/tests/kernels-* | head -n 1)
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_TEST_SANITIZE=1
status=0
for tool in memcheck racecheck synccheck initcheck; do
    echo "== compute-sanitizer --tool $tool"
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    [ "$tool" = racecheck ] && extra=(--racecheck-report all)
    if ! "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 1 "$kernels" cuda:: --test-threads 1 2>&1 |
        grep -Ev '^(test |$)'; then
        status=1
    fi
    # compute-sanitizer's own summary line is the last line it prints for the tool
done
exit $status
