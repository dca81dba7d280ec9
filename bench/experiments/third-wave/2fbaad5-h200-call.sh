#!/usr/bin/env bash
# One device call for main at `2fbaad5` on an H200 (the figures the thirty-first round owed
# there): the forward and the backward against SDPA's cuDNN, the grouped product against
# `torch._grouped_mm`, and the merged 128 x 128 grouped entry's CUDA trials and sanitizer runs.
# Binaries: `bash bench/build-trees.sh .device/bin3 main=2fbaad5` (bench-main, kernels-main),
# carried packed.
#   bash 2fbaad5-h200-call.sh PART...   PART, run in the order given:
#     fwd | fwd-peers     bench --kernels attention at SHAPES; torch_attention (SDPA's backends)
#     bwd | bwd-peers     bench --kernels attention_bwd at BWD_SHAPES; torch_attention_bwd
#     grouped | grouped-peers   bench --kernels matmul_grouped --plans; torch_grouped
#     trials              cuda::matmul_grouped (both plans' entries)
#     sanitize            memcheck, racecheck, synccheck of three grouped trials
# Everything under $OUT is packed into $OUT/all.tgz after each part.
# Ran (2026-12-07) on an H100 (asked for an H200), three calls on one warm machine: `fwd fwd-peers
# bwd bwd-peers` (after user-mask-call.sh), `grouped grouped-peers trials sanitize` then `fwd bwd`,
# then `grouped fwd-peers bwd-peers`: records `2fbaad5-h100-*`, logs `h200-logs/2fbaad5-h100-v54-*`.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin3 ] || tar xJf .device/bin3.tar.xz -C .device || exit 1
B=.device/bin3
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_SLOW_TRIALS=1
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
shapes=${SHAPES:-32x512x32x64,8x2048x32x64,16x1024x16x128,4x4096x16x128,1x16384x16x128,8x2048x8x256}
bwd_shapes=${BWD_SHAPES:-16x1024x16x128,4x4096x16x128,1x16384x16x128,8x2048x32x64}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader >> "$OUT/gpu.txt"
for part in "$@"; do
  start=$(date +%s)
  case $part in
    fwd) bash bench/ab.sh "$OUT/fwd" 1 main=$B/bench-main \
           -- --kernels attention --shapes "$shapes" > "$OUT/fwd.log" 2>&1 ;;
    fwd-peers) PYTHONUNBUFFERED=1 python3 bench/peers.py --peers torch_attention --shapes "$shapes" \
           --out "$OUT/fwd-peers.jsonl" > "$OUT/fwd-peers.log" 2>&1 ;;
    bwd) bash bench/ab.sh "$OUT/bwd" 1 main=$B/bench-main \
           -- --kernels attention_bwd --shapes "$bwd_shapes" > "$OUT/bwd.log" 2>&1 ;;
    bwd-peers) PYTHONUNBUFFERED=1 python3 bench/peers.py --peers torch_attention_bwd --shapes "$bwd_shapes" \
           --out "$OUT/bwd-peers.jsonl" > "$OUT/bwd-peers.log" 2>&1 ;;
    grouped) bash bench/ab.sh "$OUT/grouped" 1 main=$B/bench-main \
           -- --kernels matmul_grouped --plans > "$OUT/grouped.log" 2>&1 ;;
    grouped-peers) PYTHONUNBUFFERED=1 python3 bench/peers.py --peers torch_grouped \
           --out "$OUT/grouped-peers.jsonl" > "$OUT/grouped-peers.log" 2>&1 ;;
    trials) "$B/kernels-main" cuda::matmul_grouped --test-threads 1 2>&1 |
           grep -E '^test |test result|panicked' > "$OUT/trials.log" ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        for name in cuda::matmul_grouped::4_experts_empty_ends cuda::matmul_grouped::3_experts_ragged cuda::matmul_grouped::tail_split; do
          echo "== $tool $name"
          timeout 120 "$san" --tool "$tool" --error-exitcode 99 "$B/kernels-main" "$name" --exact --test-threads 1 2>&1 |
            grep -E '^=========|test result' | head -n 20
          echo "rc=${PIPESTATUS[0]}"
        done
      done > "$OUT/sanitize.log" 2>&1 ;;
    *) echo "unknown part $part" >> "$OUT/parts.log" ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s" >> "$OUT/parts.log"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
