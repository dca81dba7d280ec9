#!/usr/bin/env bash
# Device calls for `1a981c4`: the soft cap in the one-kernel Hopper backward (entries
# `attention_bwd_wgmma_fused_masked_bent_d{64,128}_{bf16,f16}`, `BentOf<General>`: each
# element's capped score and derivative at once, `P` times the derivative kept for `dS`; its
# bench adds the soft cap's row at head dim 64). Binaries:
# `bash bench/build-trees.sh .device/bin12 bent=1a981c4` (bench-bent, kernels-bent) and main's
# `.device/bin11` (`8001983`: the kernels of main before the change).
#   bash softcap-call.sh PART...   PART, in the order given:
#     trials     the attention CUDA trials of 1a981c4 (forward and backward, every mask)
#     sanitize   memcheck, racecheck, synccheck of the four soft cap trials of the masked
#                backward (the four bent entries, the mma.sync rung's general ones beside them)
#     ab         bench/ab.sh: 8001983 against 1a981c4, twice each, attention_masks at
#                4x4096x16x128 and 8x2048x32x64 (1a981c4's bench adds the soft cap at 64)
#     flex       peers.py flex_attention_masks_bwd (FlexAttention's backward, the same masks)
# Everything under $OUT is packed into $OUT/all.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
for b in bin11 bin12; do
  [ -d .device/$b ] || { [ -f .device/$b.tar.xz ] && tar xJf .device/$b.tar.xz -C .device; }
done
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_SLOW_TRIALS=1 GPUKERN_GIT_REV=1a981c4
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
K=.device/bin12/kernels-bent
B=.device/bin12/bench-bent
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader >> "$OUT/gpu.txt"
for part in "$@"; do
  start=$(date +%s)
  case $part in
    trials) "$K" cuda::attention 2>&1 | grep -E '^test |test result|panicked|expected|got|FAILED' > "$OUT/trials.log" ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        for name in softcap::5_d64_f16 softcap_causal::6_d128_bf16 softcap_causal::12_d64_bf16 softcap::13_d128_f16; do
          echo "== $tool $name"
          timeout 100 "$san" --tool "$tool" --error-exitcode 99 "$K" "cuda::attention_backward::mask::$name" \
            --exact --test-threads 1 2>&1 | grep -E '^=========|test result' | head -n 20
          echo "rc=${PIPESTATUS[0]}"
        done
      done > "$OUT/sanitize.log" 2>&1 ;;
    ab) bash bench/ab.sh "$OUT/ab" 2 8001983=.device/bin11/bench-bias 1a981c4=$B \
          -- --kernels attention_masks --shapes 4x4096x16x128,8x2048x32x64 > "$OUT/ab.log" 2>&1 ;;
    flex) PYTHONUNBUFFERED=1 python3 bench/peers.py --peers flex_attention_masks_bwd \
          --out "$OUT/flex-bwd.jsonl" > "$OUT/flex-bwd.log" 2>&1 ;;
    *) echo "unknown part $part" >> "$OUT/parts.log" ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s" >> "$OUT/parts.log"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
