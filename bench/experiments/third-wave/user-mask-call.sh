#!/usr/bin/env bash
# One device call for the prefix-LM mask of examples/user-kernels (`AttentionMask::Custom`): the
# example's main program on the GPU (every kernel of the crate, the mask's twelve attention
# entries among them, each against its CPU reference), then on small shapes
# (USER_KERNELS_SMALL=1) under memcheck, racecheck and synccheck; then the attention row of the
# crate's bench (the mask against the library's causal instance, `bench --attention`) and
# FlexAttention with the same mask (`peers_user.py --attention`). The binaries:
# `cargo build --release -p user-kernels`, target/release/{user-kernels,bench} copied to
# .device/uk/ and carried packed (.device/uk.tar.xz).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/uk ] || tar xJf .device/uk.tar.xz -C .device || exit 1
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
export GPUKERN_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/uk-gpu.txt"
start=$(date +%s)
.device/uk/user-kernels > "$OUT/uk-run.log" 2>&1
echo "run: rc=$? $(( $(date +%s) - start )) s" >> "$OUT/uk-parts.log"
start=$(date +%s)
GPUKERN_DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1) \
  .device/uk/bench "$OUT/uk-bench.jsonl" --attention > "$OUT/uk-bench.log" 2>&1
echo "bench: rc=$? $(( $(date +%s) - start )) s" >> "$OUT/uk-parts.log"
start=$(date +%s)
PYTHONUNBUFFERED=1 python3 bench/peers_user.py "$OUT/uk-peers.jsonl" --attention > "$OUT/uk-peers.log" 2>&1
echo "peers: rc=$? $(( $(date +%s) - start )) s" >> "$OUT/uk-parts.log"
# Each tool's exit status (99 on an error), its summary, and how many prefix-LM checks passed under
# it (6 in the simulator, 12 on the GPU). (The first run of this call kept the first 60 lines of
# each tool's output, which cut the summaries off: `6a4bc7f-h100-v54-uk-sanitize.log`; this form
# ran next on the same machine: `-uk-sanitize-2.log`.)
for tool in memcheck racecheck synccheck; do
  echo "== $tool"
  USER_KERNELS_SMALL=1 timeout 130 "$san" --tool "$tool" --error-exitcode 99 .device/uk/user-kernels > /tmp/s.log 2>&1
  echo "rc=$?"
  grep -E '^=========' /tmp/s.log | tail -n 5
  grep -c 'prefix-LM' /tmp/s.log
done > "$OUT/uk-sanitize.log" 2>&1
tar czf /tmp/uk.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/uk.tgz "$OUT/all.tgz"
