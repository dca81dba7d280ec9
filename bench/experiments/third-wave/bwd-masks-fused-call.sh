#!/usr/bin/env bash
# One device call for the masked one-kernel backward (branch `bwd-masks-fused` at `d962c70`):
# binaries `bash bench/build-trees.sh .device/bin5 fused=bwd-masks-fused` (bench-fused,
# kernels-fused), and main's bench at `2fbaad5` (.device/bin3, whose library PTX is main's) for
# the A/B of the unmasked backward, whose entries took three parameters more and two fewer.
#   bash bwd-masks-fused-call.sh PART...   PART, in the order given:
#     trials     the `attention_backward` and `attention::mask` CUDA trials of kernels-fused
#     sanitize   memcheck, racecheck, synccheck of three masked backward trials
#     sanitize2  the same of the two masked entries the first three leave out (d128 bf16, d64 f16)
#     ab         bench --kernels attention_bwd at three shapes, main and fused in turn, twice
#     masks      bench --kernels attention_masks (fused): the forward's and the backward's mask rows
#     flex       peers.py flex_attention_masks_bwd (FlexAttention's backward with the masks)
#   (masks and flex again write masks-2.jsonl, flex-bwd-2.jsonl, ...)
# Everything under $OUT is packed into $OUT/all.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
for d in bin3 bin5; do [ -d .device/$d ] || tar xJf .device/$d.tar.xz -C .device || exit 1; done
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_SLOW_TRIALS=1
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
K=.device/bin5/kernels-fused
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader >> "$OUT/gpu.txt"
for part in "$@"; do
  start=$(date +%s)
  case $part in
    trials) for f in attention_backward attention::mask; do
              "$K" "$f" --test-threads 1 2>&1 | grep -E '^test |test result|panicked|expected|got'
            done > "$OUT/trials.log" ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        for name in cuda::attention_backward::mask::varlen cuda::attention_backward::mask::planted cuda::attention_backward::mask::window300::1_d128_f16; do
          echo "== $tool $name"
          timeout 150 "$san" --tool "$tool" --error-exitcode 99 "$K" "$name" --exact --test-threads 1 2>&1 |
            grep -E '^=========|test result' | head -n 20
          echo "rc=${PIPESTATUS[0]}"
        done
      done > "$OUT/sanitize.log" 2>&1 ;;
    sanitize2)
      for tool in memcheck racecheck synccheck; do
        for name in cuda::attention_backward::mask::window300::0_d128_bf16 cuda::attention_backward::mask::document::3_d64_f16; do
          echo "== $tool $name"
          timeout 150 "$san" --tool "$tool" --error-exitcode 99 "$K" "$name" --exact --test-threads 1 2>&1 |
            grep -E '^=========|test result' | head -n 20
          echo "rc=${PIPESTATUS[0]}"
        done
      done > "$OUT/sanitize2.log" 2>&1 ;;
    ab) bash bench/ab.sh "$OUT/ab" 2 main=.device/bin3/bench-main fused=.device/bin5/bench-fused \
          -- --kernels attention_bwd --shapes 4x4096x16x128,1x16384x16x128,8x2048x32x64 > "$OUT/ab.log" 2>&1 ;;
    masks) n=$(ls "$OUT"/masks*.jsonl 2>/dev/null | wc -l); sfx=${n/#0/}; sfx=${sfx:+-$((n + 1))}
          .device/bin5/bench-fused --kernels attention_masks --shapes 4x4096x16x128 \
          --out "$OUT/masks$sfx.jsonl" > "$OUT/masks$sfx.log" 2>&1 ;;
    flex) n=$(ls "$OUT"/flex-bwd*.jsonl 2>/dev/null | wc -l); sfx=${n/#0/}; sfx=${sfx:+-$((n + 1))}
          PYTHONUNBUFFERED=1 python3 bench/peers.py --peers flex_attention_masks_bwd \
          --out "$OUT/flex-bwd$sfx.jsonl" > "$OUT/flex-bwd$sfx.log" 2>&1 ;;
    *) echo "unknown part $part" >> "$OUT/parts.log" ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s" >> "$OUT/parts.log"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
