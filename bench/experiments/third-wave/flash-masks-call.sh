#!/usr/bin/env bash
# Device calls for the masked backward at `f0c06fa`: every shipped mask on the `mma.sync` rung
# (`attention_bwd_flash_{dq,dkdv}_general_*`) and ALiBi in the one-kernel Hopper backward at head
# dim 64 (built at `e4e58d4`, on main since, untimed until now). Binaries:
# `bash bench/build-trees.sh .device/bin7 flash=f0c06fa` (bench-flash, kernels-flash); run as
# `bash .device/call.sh 570 'bash bench/experiments/third-wave/flash-masks-call.sh trials sanitize'`
# then `... masks flex masks flex`.
#   bash flash-masks-call.sh PART...   PART, in the order given:
#     trials     the masked backward's CUDA and simulator trials, the backward's and the forward
#                masks' CUDA trials
#     sanitize   memcheck, racecheck, synccheck of four masked backward trials: ALiBi at head dim
#                64 in bf16 and f16 (the one-kernel rung's masked d64 entries, the mma.sync
#                rung's general d64 ones) and the window at 128 in bf16 and f16 (the general d128
#                ones)
#     masks      bench --kernels attention_masks at 4x4096x16x128 (the forward's masks; the
#                backward's window, documents, ALiBi and soft cap) and 8x2048x32x64 (ALiBi's
#                backward)
#     flex       peers.py flex_attention_masks_bwd (FlexAttention's backward with the same masks)
#     ncu        ncu --set full of the general dK/dV kernel at head dim 128, its first launch at
#                4x4096x16x128 (the window's check)
#   (masks and flex again write masks-2.jsonl, flex-bwd-2.jsonl, ...)
# Everything under $OUT is packed into $OUT/all.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin7 ] || tar xJf .device/bin7.tar.xz -C .device || exit 1
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_SLOW_TRIALS=1
# The records' commit: the binaries' (`git rev-parse` in the device's copy of the checkout
# answers with the session's first commit).
export GPUKERN_GIT_REV=f0c06fa
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
K=.device/bin7/kernels-flash
B=.device/bin7/bench-flash
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader >> "$OUT/gpu.txt"
for part in "$@"; do
  start=$(date +%s)
  case $part in
    trials) for f in attention_backward::mask cuda::attention_backward cuda::attention::mask; do
              "$K" "$f" --test-threads 1 2>&1 | grep -E '^test |test result|panicked|expected|got'
            done > "$OUT/trials.log" ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        for name in alibi::4_d64_bf16 alibi::9_d64_f16 window300::0_d128_bf16 window300::1_d128_f16; do
          echo "== $tool $name"
          timeout 120 "$san" --tool "$tool" --error-exitcode 99 "$K" "cuda::attention_backward::mask::$name" \
            --exact --test-threads 1 2>&1 | grep -E '^=========|test result' | head -n 20
          echo "rc=${PIPESTATUS[0]}"
        done
      done > "$OUT/sanitize.log" 2>&1 ;;
    masks) n=$(ls "$OUT"/masks*.jsonl 2>/dev/null | wc -l); sfx=${n/#0/}; sfx=${sfx:+-$((n + 1))}
          "$B" --kernels attention_masks --shapes 4x4096x16x128,8x2048x32x64 \
          --out "$OUT/masks$sfx.jsonl" > "$OUT/masks$sfx.log" 2>&1 ;;
    flex) n=$(ls "$OUT"/flex-bwd*.jsonl 2>/dev/null | wc -l); sfx=${n/#0/}; sfx=${sfx:+-$((n + 1))}
          PYTHONUNBUFFERED=1 python3 bench/peers.py --peers flex_attention_masks_bwd \
          --out "$OUT/flex-bwd$sfx.jsonl" > "$OUT/flex-bwd$sfx.log" 2>&1 ;;
    ncu) ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
         timeout 240 "$ncu" -k regex:attention_bwd_flash_dkdv_general_d128 -c 1 --set full \
           "$B" --kernels attention_masks --shapes 4x4096x16x128 \
           --out /tmp/ncu-masks.jsonl > "$OUT/ncu-full-flash-dkdv.log" 2>&1
         echo "ncu rc=$?" >> "$OUT/parts.log" ;;
    *) echo "unknown part $part" >> "$OUT/parts.log" ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s" >> "$OUT/parts.log"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
