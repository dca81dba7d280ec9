#!/usr/bin/env bash
# Device calls for `bc34902`: ALiBi in the one-kernel Hopper backward at head dim 128 (its line
# computed where P^T is, that step's delta loaded after P^T, every ring at the start of the
# 1024-byte-aligned shared window). Binaries: `bash bench/build-trees.sh .device/bin10
# alibi=bc34902` (bench-alibi, kernels-alibi) and main's `.device/bin9` (`0589db3`'s kernels).
#   bash alibi128-call.sh PART...   PART, in the order given:
#     trials     every CUDA trial of bc34902 (the ring's change touches every ring kernel)
#     sanitize   memcheck, racecheck, synccheck of the four masked backward trials with ALiBi at
#                head dims 64 and 128 in bf16 and f16: the one-kernel rung's four masked entries
#                and the mma.sync rung's eight general ones
#     masks      bench --kernels attention_masks of bc34902 (4x4096x16x128, 8x2048x32x64)
#     flex       peers.py flex_attention_masks_bwd (FlexAttention's backward, the same masks)
#     ab         bench/ab.sh: main (0589db3) against bc34902, twice each, attention_bwd at
#                4x4096x16x128 and 8x2048x32x64 (the unmasked one-kernel rung, whose ring moved)
#     final      8001983 (`bash bench/build-trees.sh .device/bin11 bias=8001983`: ALiBi at 128 on
#                entries of its own): its attention CUDA trials, the sanitizer on its two new
#                entries, and bench/ab.sh main (0589db3) against it, twice each, attention_masks
#     skip       bench/ab.sh: f0c06fa (.device/bin7) against main (.device/bin9), twice each,
#                attention_masks (the mma.sync rung's skip of whole tiles, owed since the
#                thirty-fifth round)
# Everything under $OUT is packed into $OUT/all.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
for b in bin7 bin9 bin10 bin11; do
  [ -d .device/$b ] || { [ -f .device/$b.tar.xz ] && tar xJf .device/$b.tar.xz -C .device; }
done
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_SLOW_TRIALS=1 GPUKERN_GIT_REV=bc34902
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
K=.device/bin10/kernels-alibi
B=.device/bin10/bench-alibi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader >> "$OUT/gpu.txt"
for part in "$@"; do
  start=$(date +%s)
  case $part in
    trials) "$K" cuda:: 2>&1 | grep -E '^test |test result|panicked|expected|got|FAILED' > "$OUT/trials.log" ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        for name in alibi::4_d64_bf16 alibi::9_d64_f16 alibi::10_d128_bf16 alibi::11_d128_f16; do
          echo "== $tool $name"
          timeout 100 "$san" --tool "$tool" --error-exitcode 99 "$K" "cuda::attention_backward::mask::$name" \
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
    ab) bash bench/ab.sh "$OUT/ab" 2 0589db3=.device/bin9/bench-main bc34902=$B \
          -- --kernels attention_bwd --shapes 4x4096x16x128,8x2048x32x64 > "$OUT/ab.log" 2>&1 ;;
    skip) bash bench/ab.sh "$OUT/skip" 2 f0c06fa=.device/bin7/bench-flash 0589db3=.device/bin9/bench-main \
          -- --kernels attention_masks --shapes 4x4096x16x128,8x2048x32x64 > "$OUT/skip.log" 2>&1 ;;
    final) # 8001983 (.device/bin11: ALiBi at 128 on entries of its own, main's code elsewhere)
           K=.device/bin11/kernels-bias B=.device/bin11/bench-bias
           "$K" cuda::attention 2>&1 | grep -E '^test |test result|panicked|expected|got|FAILED' > "$OUT/final-trials.log"
           for tool in memcheck racecheck synccheck; do
             for name in alibi::10_d128_bf16 alibi::11_d128_f16; do
               echo "== $tool $name"
               timeout 100 "$san" --tool "$tool" --error-exitcode 99 "$K" "cuda::attention_backward::mask::$name" \
                 --exact --test-threads 1 2>&1 | grep -E '^=========|test result' | head -n 20
               echo "rc=${PIPESTATUS[0]}"
             done
           done > "$OUT/final-sanitize.log" 2>&1
           GPUKERN_GIT_REV=8001983 bash bench/ab.sh "$OUT/final" 2 0589db3=.device/bin9/bench-main 8001983=$B \
             -- --kernels attention_masks --shapes 4x4096x16x128,8x2048x32x64 > "$OUT/final-ab.log" 2>&1 ;;
    *) echo "unknown part $part" >> "$OUT/parts.log" ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s" >> "$OUT/parts.log"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
