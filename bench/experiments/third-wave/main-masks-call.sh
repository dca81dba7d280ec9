#!/usr/bin/env bash
# One short device call for main's masked backward after the thirty-fifth round (`0589db3`:
# each query row's mask asked only on the tiles the mma.sync dK/dV kernel tests or whose scores
# it modifies): binaries `bash bench/build-trees.sh .device/bin9 main=0589db3`. Writes
# $OUT/masks.jsonl (bench --kernels attention_masks at 4x4096x16x128 and 8x2048x32x64) and
# $OUT/logs.tgz (the masked backward's CUDA trials, the bench's log).
#   bash bench/experiments/third-wave/main-masks-call.sh
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin9 ] || tar xJf .device/bin9.tar.xz -C .device || exit 1
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_GIT_REV=0589db3
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > /tmp/logs/gpu.txt
.device/bin9/bench-main --kernels attention_masks --shapes 4x4096x16x128,8x2048x32x64 \
  --out "$OUT/masks.jsonl" > /tmp/logs/masks.log 2>&1
.device/bin9/kernels-main cuda::attention_backward::mask --test-threads 1 2>&1 |
  grep -E '^test |test result|panicked|expected|got' > /tmp/logs/trials.log
tar czf "$OUT/logs.tgz" -C /tmp logs
