#!/usr/bin/env bash
# One device call for ALiBi in the one-kernel Hopper backward at head dim 64 (`e4e58d4`), run as
# `bash .device/call.sh 300 'bash bench/experiments/third-wave/alibi-bwd-call.sh sanitize masks flex trials'`:
# binaries `bash bench/build-trees.sh .device/bin6 alibi=e4e58d4` (bench-alibi, kernels-alibi).
#   bash alibi-bwd-call.sh PART...   PART, in the order given:
#     trials     the masked backward's CUDA and simulator trials, the backward's and the masks'
#                CUDA trials
#     sanitize   memcheck, racecheck, synccheck of the two ALiBi trials at head dim 64 (bf16, f16)
#     masks      bench --kernels attention_masks at 4x4096x16x128 (window, documents, forward
#                masks) and 8x2048x32x64 (ALiBi's backward)
#     flex       peers.py flex_attention_masks_bwd (FlexAttention's backward with the same masks)
#     ncu        ncu --set full of the masked backward's main kernel, its first launch at
#                4x4096x16x128 (the sliding window's correctness check), into ncu-full-bwd-window.log
#   (masks and flex again write masks-2.jsonl, flex-bwd-2.jsonl, ...)
# Everything under $OUT is packed into $OUT/all.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin6 ] || tar xJf .device/bin6.tar.xz -C .device || exit 1
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_SLOW_TRIALS=1
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
K=.device/bin6/kernels-alibi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader >> "$OUT/gpu.txt"
for part in "$@"; do
  start=$(date +%s)
  case $part in
    trials) for f in attention_backward::mask cuda::attention_backward cuda::attention::mask; do
              "$K" "$f" --test-threads 1 2>&1 | grep -E '^test |test result|panicked|expected|got'
            done > "$OUT/trials.log" ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        for name in cuda::attention_backward::mask::alibi::4_d64_bf16 cuda::attention_backward::mask::alibi::9_d64_f16; do
          echo "== $tool $name"
          timeout 150 "$san" --tool "$tool" --error-exitcode 99 "$K" "$name" --exact --test-threads 1 2>&1 |
            grep -E '^=========|test result' | head -n 20
          echo "rc=${PIPESTATUS[0]}"
        done
      done > "$OUT/sanitize.log" 2>&1 ;;
    masks) n=$(ls "$OUT"/masks*.jsonl 2>/dev/null | wc -l); sfx=${n/#0/}; sfx=${sfx:+-$((n + 1))}
          .device/bin6/bench-alibi --kernels attention_masks --shapes 4x4096x16x128,8x2048x32x64 \
          --out "$OUT/masks$sfx.jsonl" > "$OUT/masks$sfx.log" 2>&1 ;;
    flex) n=$(ls "$OUT"/flex-bwd*.jsonl 2>/dev/null | wc -l); sfx=${n/#0/}; sfx=${sfx:+-$((n + 1))}
          PYTHONUNBUFFERED=1 python3 bench/peers.py --peers flex_attention_masks_bwd \
          --out "$OUT/flex-bwd$sfx.jsonl" > "$OUT/flex-bwd$sfx.log" 2>&1 ;;
    ncu) ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
         timeout 240 "$ncu" -k regex:attention_bwd_wgmma_fused_masked_d128 -c 1 --set full \
           .device/bin6/bench-alibi --kernels attention_masks --shapes 4x4096x16x128 \
           --out /tmp/ncu-masks.jsonl > "$OUT/ncu-full-bwd-window.log" 2>&1
         echo "ncu rc=$?" >> "$OUT/parts.log" ;;
    *) echo "unknown part $part" >> "$OUT/parts.log" ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s" >> "$OUT/parts.log"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
