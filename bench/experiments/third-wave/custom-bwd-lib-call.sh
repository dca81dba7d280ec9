#!/usr/bin/env bash
# Device call for `77794b1` (custom masks in the backward): the library's attention CUDA trials
# (forward and backward, every shipped mask, every rung) at the stop's last kernel commit, whose
# library PTX is byte-identical to `7a8fa9a`'s but whose host picks the backward's launchers and
# module anew (a custom mask's or the library's). Binaries: `bash bench/build-trees.sh
# .device/bin13 head=77794b1` (kernels-head).
#   bash custom-bwd-lib-call.sh
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin13 ] || tar xJf .device/bin13.tar.xz -C .device
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_GIT_REV=77794b1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader >> "$OUT/gpu.txt"
start=$(date +%s)
.device/bin13/kernels-head cuda::attention 2>&1 |
  grep -E '^test |test result|panicked|expected|got|FAILED' > "$OUT/trials.log"
echo "trials: $(( $(date +%s) - start )) s" >> "$OUT/parts.log"
