#!/usr/bin/env bash
# The verification fixes on the H200 (one device call): every test binary and example through
# scripts/gpu-check.sh run, then compute-sanitizer on the half-precision and TF32 trials (no failed
# cuTensorMapEncodeTiled may remain) and on the norm-overflow and axis trials. Binaries built here
# with `bash scripts/gpu-check.sh build .device/run1` at the measured commit, carried as
# .device/run1.tar.xz. Writes $OUT/gpu-check.log and $OUT/sanitize.log.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
mkdir -p .device && tar xJf .device/run1.tar.xz -C .device || exit 1
dir=.device/run1
nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,power.limit --format=csv,noheader
start=$(date +%s)
bash scripts/gpu-check.sh run "$dir" > "$OUT/gpu-check.log" 2>&1
echo "gpu-check: exit $? after $(( $(date +%s) - start )) s"
grep -E "^gpu-check|^kernel coverage|test result|trials skipped" "$OUT/gpu-check.log" | tail -n 60
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda
k="$dir/tests/gpukern.kernels"
{
  echo "== memcheck: half-precision and TF32 tensor-core trials (largest shapes skipped)"
  timeout 240 "$san" --tool memcheck --error-exitcode 99 "$k" cuda::matmul_half cuda::matmul_empty cuda::matmul_wgmma \
      cuda::matmul_tf32_wgmma cuda::matmul_tf32_into --skip 4096 --skip 4097 --skip 1000x4096 --skip 1024x1024 --test-threads 1
  echo "exit $?"
  for tool in memcheck racecheck synccheck; do
    echo "== $tool: norm overflow and axis reductions"
    timeout 150 "$san" --tool "$tool" --error-exitcode 99 "$k" cuda::norm::overflow cuda::reduce::axis_7x1025 \
        cuda::reduce::axis_1025x7 cuda::reduce::axis_4097x33 cuda::reduce::axis_1x1 --test-threads 1
    echo "exit $?"
  done
} > "$OUT/sanitize.log" 2>&1
echo "sanitize after $(( $(date +%s) - start )) s:"
grep -E "^==|ERROR SUMMARY|RACECHECK SUMMARY|test result|^exit|cuTensorMapEncodeTiled" "$OUT/sanitize.log" | sort | uniq -c | sort -rn | head -40
