#!/usr/bin/env bash
# One device call for `645ea16` (`Mask::head` in the mma.sync dK/dV kernel) against `f0c06fa`:
# binaries `.device/bin7` (bench-flash, f0c06fa) and `.device/bin8` (bench-head, kernels-head;
# `bash bench/build-trees.sh .device/bin8 head=645ea16`). Writes $OUT/ab/<rev>-<round>.jsonl
# (bench --kernels attention_masks, each binary in turn twice) and $OUT/logs.tgz (the A/B's log,
# the masked backward's CUDA trials and memcheck/racecheck/synccheck of two trials whose
# mma.sync rung runs the general head-dim-128 kernels with a score modification and a window).
#   bash bench/experiments/third-wave/head-mask-call.sh
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
for b in bin7 bin8; do [ -d .device/$b ] || tar xJf .device/$b.tar.xz -C .device || exit 1; done
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > /tmp/logs/gpu.txt
bash bench/ab.sh "$OUT/ab" 2 f0c06fa=.device/bin7/bench-flash 645ea16=.device/bin8/bench-head \
  -- --kernels attention_masks --shapes 4x4096x16x128,8x2048x32x64 > /tmp/logs/ab.log 2>&1
.device/bin8/kernels-head cuda::attention_backward::mask --test-threads 1 2>&1 |
  grep -E '^test |test result|panicked|expected|got' > /tmp/logs/trials.log
for tool in memcheck racecheck synccheck; do
  for name in alibi::8_d128_bf16 window300::1_d128_f16 softcap_causal::6_d128_bf16; do
    echo "== $tool $name"
    timeout 120 "$san" --tool "$tool" --error-exitcode 99 .device/bin8/kernels-head \
      "cuda::attention_backward::mask::$name" --exact --test-threads 1 2>&1 |
      grep -E '^=========|test result' | head -n 20
    echo "rc=${PIPESTATUS[0]}"
  done
done > /tmp/logs/sanitize.log 2>&1
tar czf "$OUT/logs.tgz" -C /tmp logs
