#!/usr/bin/env bash
# Device call: what limits the masked one-kernel backward with the sliding window (issue 32's
# 1.3x FlexAttention, missed at 1.17x). Binary: `bash bench/build-trees.sh .device/bin12
# bent=1a981c4` (bench-bent).
#   bash window-ncu-call.sh ncu
#     ncu --set full of the window's first backward call at 4x4096x16x128 (`bench --kernels
#     attention_masks`; its check runs before its timing): the preparation, the masked
#     one-kernel entry at head dim 128 and the conversion of dQ, the first launch of each
# Everything under $OUT is packed into $OUT/all.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin12 ] || tar xJf .device/bin12.tar.xz -C .device || exit 1
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_GIT_REV=1a981c4
B=.device/bin12/bench-bent
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader >> "$OUT/gpu.txt"
for part in "$@"; do
  start=$(date +%s)
  case $part in
    ncu) ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
         timeout 300 "$ncu" -k 'regex:attention_bwd_(prep|wgmma_fused_masked_d128|wgmma_dq_convert)' -c 3 \
           --set full "$B" --kernels attention_masks --shapes 4x4096x16x128 \
           --out /tmp/ncu-masks.jsonl > "$OUT/ncu-window.log" 2>&1
         echo "ncu rc=$?" >> "$OUT/parts.log" ;;
    *) echo "unknown part $part" >> "$OUT/parts.log" ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s" >> "$OUT/parts.log"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
