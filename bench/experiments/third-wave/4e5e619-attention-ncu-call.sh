#!/usr/bin/env bash
# ncu --set full of attention's main kernels and of cuDNN's forward beside them, for the evidence
# issue 32 asks of each missed target (BENCHMARKS.md, twenty-second round: the head-dim-64
# backward ran; the forward's filter matched no launch and the next call was refused).
# Carries .device/bin.tar.xz with bench-<label> (bench/build-trees.sh); LABEL picks the binary
# (default: the first bench binary). Writes $OUT/ncu-full-<what>.log, one report each:
#   fwd-<shape>       the forward's default at 4x4096x16x128 and 16x1024x16x128 (its first launch)
#   fwd-cudnn-<shape> torch SDPA's cuDNN forward kernel at 4x4096x16x128 (its `fprop` kernel)
#   bwd-d128          the one-kernel backward at 4x4096x16x128
#   bash 4e5e619-attention-ncu-call.sh
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin ] || tar xJf .device/bin.tar.xz -C .device || exit 1
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
label=${LABEL:-$(for f in .device/bin/bench-*; do echo "${f##*/bench-}"; done | head -n 1)}
B=.device/bin/bench-$label
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
full() { # name, kernel regex, command...
  local name=$1 regex=$2
  shift 2
  timeout 150 "$ncu" -k "regex:$regex" -c 1 --set full "$@" > "$OUT/ncu-full-$name.log" 2>&1
  echo "$name: rc=$? $(grep -m1 -E '^  [a-z_]+.*\(' "$OUT/ncu-full-$name.log")"
}
for s in 4x4096x16x128 16x1024x16x128; do
  # Every forward entry starts `attention_wgmma` (the unmasked default is not a `pingpong` one).
  full "fwd-$s" attention_wgmma "$B" --kernels attention --shapes "$s" --out /tmp/ncu-fwd.jsonl
done
full fwd-cudnn-4x4096x16x128 fprop python3 bench/peers.py --peers torch_attention \
  --shapes 4x4096x16x128 --out /tmp/ncu-peers.jsonl
full bwd-d128 attention_bwd_wgmma_fused_d128 "$B" --kernels attention_bwd --shapes 4x4096x16x128 \
  --out /tmp/ncu-bwd.jsonl
