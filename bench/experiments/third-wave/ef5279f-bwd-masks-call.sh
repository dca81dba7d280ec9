#!/usr/bin/env bash
# One device call part: the masked backward's CUDA trials (every `attention_backward` trial of the
# `kernels` binary built at `ef5279f`, `bash bench/build-trees.sh .device/bin4 masks=ef5279f`) and
# memcheck, racecheck, synccheck on two of its masked trials.
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin4 ] || tar xJf .device/bin4.tar.xz -C .device
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_SLOW_TRIALS=1
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
K=.device/bin4/kernels-masks
s=$(date +%s)
"$K" attention_backward --test-threads 1 2>&1 | grep -E '^test |test result|panicked|expected|got' > "$OUT/bwd-trials.log"
echo "trials $(( $(date +%s) - s )) s" >> "$OUT/parts.log"
s=$(date +%s)
for tool in memcheck racecheck synccheck; do
  for name in cuda::attention_backward::mask::window37::d96_f16 cuda::attention_backward::mask::varlen; do
    echo "== $tool $name"
    timeout 150 "$san" --tool $tool --error-exitcode 99 "$K" "$name" --exact --test-threads 1 2>&1 | grep -E '^=========|test result' | head -20
    echo "rc=${PIPESTATUS[0]}"
  done
done > "$OUT/sanitize.log" 2>&1
echo "sanitize $(( $(date +%s) - s )) s" >> "$OUT/parts.log"
tar czf /tmp/a.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/a.tgz "$OUT/all.tgz"
