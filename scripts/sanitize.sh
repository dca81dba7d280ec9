#!/usr/bin/env bash
# compute-sanitizer over every kernel on the GPU: memcheck (with leak check), racecheck, synccheck
# and initcheck, each over the CUDA trials of the `kernels` test binary (every kernel and
# variant, ragged and edge shapes). Fails if any tool reports an error, or if the kernels binary's
# coverage check finds an entry point of the PTX that no trial of the run launched.
#
#   bash scripts/sanitize.sh DIR [TEST ARGS...]   DIR as made by `scripts/gpu-check.sh build DIR`
#
# With no TEST ARGS it runs `cuda::` minus the patterns of SKIPPED below, and prints how many
# trials that is and which patterns it left out (README "Testing" reports the same).
set -uo pipefail

# The one list of what the default run leaves out: the largest shapes, whose trials take many
# minutes under racecheck (which slows shared-memory kernels by orders of magnitude). None of them
# is the only trial of a kernel; if one becomes so, the coverage check fails the run.
SKIPPED=(
    1000x1000x1000          # matmul, matmul_fast_into, matmul_tf32_into, and the required 1000^3
    1048576                 # add, increment_by_one, softmax_vec of 2^20; softmax 1 x 2^20
    1000x4097               # softmax of 4M entries
    1537x129x1409           # matmul filling the GPU with 128 x 128 blocks
    2048x256x1152           # matmul and TF32 of the same size
    3x100000                # softmax rows of 100000
    matmul_plan::           # matmul at the plan boundaries (up to 1536 x 2816 results)
    softmax_plan::255x      # softmax 255 x 32769 (split path at its row boundary)
    softmax_plan::256x      # softmax 256 x 32769 (stream path at its row boundary)
    softmax_long_row::      # softmax of one row of 2^24, every algorithm
    1000x4096x1000          # matmul_half at 4M results (and its f64 reference)
    4097x4093x4095          # matmul_half at the ragged 4097 shape (two f64 references on the CPU)
    len_4194304             # sum, max, argmax of 2^22
    sum_error_2p24          # sum of 2^24, five runs
    transpose::4096x4096    # transpose of 16M elements
    norm::f32::8192x1024    # norms of 8M elements
    norm::bf16::8192x1024
    norm::f32::1000x4096
    norm::bf16::1000x4096
    512x262144              # cross-entropy of 128M logits
    3x1048576               # cross-entropy rows of 2^20
    64x1024x28672           # decode products against 28672 rows at m = 64, every plan (each
                            # kernel is sanitized on the smaller decode trials)
    attention::flash_vs_rows # attention at 1537 to 3001 keys (both rungs are sanitized on the smaller trials)
    multi::all_reduce       # NCCL's own kernels (two GPUs only)
    transfer::pipelined     # 8 products of 2048^3 on three streams
    transfer::errors        # a planted 2^50-byte pinned allocation: the driver's refusal is the
                            # point of the trial, and memcheck counts it as an API error
)

dir=${1:?usage: sanitize.sh DIR [TEST ARGS...]}
shift
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
    args=(cuda::)
    for pattern in "${SKIPPED[@]}"; do
        args+=(--skip "$pattern")
    done
    echo "sanitize: cuda:: without ${#SKIPPED[@]} patterns: ${SKIPPED[*]}"
fi
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
kernels="$dir/tests/gpukern.kernels"
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda
trials=$("$kernels" "${args[@]}" --list 2>/dev/null | grep -c ': test$')
echo "sanitize: $trials trials under each tool"
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
    coverage=$(grep -E '^kernel coverage' "$log" | tail -n 1)
    echo "$tool: ${summary:-no summary} | tests: ${passed:-?} | ${coverage:-kernel coverage: not checked} | exit $rc | $(( $(date +%s) - start )) s"
    if [ $rc -ne 0 ]; then
        status=1
        grep -E '^=========|^    (sim|cuda) \(' "$log" | head -n 40
    fi
    rm -f "$log"
done

# The device helpers' checks (tests/device_checks.rs, every entry point of gpukern-device/checks)
# and the user-crate example (examples/custom-kernels): memcheck and racecheck over all of them.
# The trial whose child trips a device assertion on purpose is skipped here.
checks="$dir/tests/gpukern-device-checks-runner.device_checks"
example=$(find "$dir/examples" -name 'custom-kernels' -type f | head -n 1)
for tool in memcheck racecheck; do
    for exe in $checks $example; do
        log=$(mktemp)
        start=$(date +%s)
        exe_args=()
        # The assert trial's child trips a device assertion on purpose: the sanitizer would count
        # that planted fault as its error, so it runs without the sanitizer (gpu-check runs it).
        [ "$exe" = "$checks" ] && exe_args=(cuda:: --skip cuda::assert::a_negative_element_is_sticky --test-threads 1)
        timeout "${SANITIZE_TOOL_TIMEOUT:-300}" \
            "$sanitizer" --tool "$tool" --error-exitcode 99 "$exe" "${exe_args[@]}" >"$log" 2>&1
        rc=$?
        summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)
        passed=$(grep -Eo '[0-9]+ passed; [0-9]+ failed' "$log" | tail -n 1)
        echo "$tool $(basename "$exe"): ${summary:-no summary} | ${passed:-example} | exit $rc | $(( $(date +%s) - start )) s"
        if [ $rc -ne 0 ]; then
            status=1
            grep -E '^=========' "$log" | head -n 30
        fi
        rm -f "$log"
    done
done
exit $status
