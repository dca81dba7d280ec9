#!/usr/bin/env bash
# One device call for the branch `fwd-fold` (`6726e11`) against main: the attention forward's
# epilogue through `wgmma::store_row_pieces` (the backward's helper) where it wrote the same
# 16-byte pieces out itself; ptxas changed its set-up and epilogue, not its loop.
# Binaries: main's bench from .device/bin.tar.xz (`bash bench/build-trees.sh .device/bin
# main=main ...`, main at b7f2724, whose attention kernels are eb19d08's) and
# `bash bench/build-trees.sh .device/bin2 fold=6726e11` (bench-fold, kernels-fold), both carried
# packed.
#   bash 6726e11-fwd-fold-call.sh PART...   PART, run in the order given:
#     ab1 | ab2   bench --kernels attention (the forward) at SHAPES, both binaries in turn
#     trials      the fold binary's cuda::attention:: trials
#     sanitize    memcheck, racecheck, synccheck of two forward trials (fold binary)
# Everything under $OUT is packed into $OUT/all.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin ] || { tar xJf .device/bin.tar.xz -C .device && rm -f .device/bin/kernels-*; } || exit 1
[ -d .device/bin2 ] || tar xJf .device/bin2.tar.xz -C .device || exit 1
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
shapes=${SHAPES:-32x512x32x64,16x1024x16x128,8x2048x32x64,4x4096x16x128,8x2048x8x256}
mkdir -p "$OUT"
for part in "$@"; do
  start=$(date +%s)
  nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/gpu.txt"
  case $part in
    ab1 | ab2)
      bash bench/ab.sh "$OUT/fwd-$part" 1 main=.device/bin/bench-main fold=.device/bin2/bench-fold \
        -- --kernels attention --shapes "$shapes" > "$OUT/fwd-$part.log" 2>&1 ;;
    trials)
      .device/bin2/kernels-fold cuda::attention:: --test-threads 1 2>&1 |
        grep -E '^test |test result|panicked' > "$OUT/fwd-trials.log" ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        for name in cuda::attention::bf16::1x333x200x4h4kv_d128_causal cuda::attention::f16::2x129x129x4h2kv_d64_causal; do
          echo "== $tool $name"
          timeout 120 "$san" --tool "$tool" --error-exitcode 99 .device/bin2/kernels-fold "$name" --exact --test-threads 1 2>&1 |
            grep -E '^=========|test result' | head -n 20
          echo "rc=${PIPESTATUS[0]}"
        done
      done > "$OUT/fwd-sanitize.log" 2>&1 ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s" | tee -a "$OUT/parts.log"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
