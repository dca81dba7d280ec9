#!/usr/bin/env bash
# Device calls for `c117ccc`: custom masks in the attention backward (the prefix-LM mask of
# examples/user-kernels through its own backward entries: the rows rung, the mma.sync rung at
# head dims 64 and 128, the one-kernel Hopper rung's `KeysOf` instances). Binaries:
# `bash bench/build-user.sh .device/user1` (user-kernels, bench, device_checks).
#   bash bwd-call.sh PART...   PART, in the order given:
#     checks     DIR/user-kernels: every user kernel against its reference, simulator and GPU
#                (the prefix-LM backward on five rungs and both types: its 16 backward entries)
#     sanitize   memcheck, racecheck, synccheck of DIR/user-kernels at small shapes
#     bench      DIR/bench --attention twice (attention_fwd, attention_bwd with the mask)
#     flex       bench/peers_user.py --attention (FlexAttention forward and backward, same mask)
# Everything under $OUT is packed into $OUT/all.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
D=.device/user1
[ -d $D ] || { [ -f $D.tar.xz ] && tar xJf $D.tar.xz -C .device; }
export GPUKERN_REQUIRE_GPU=1 GPUKERN_GIT_REV=c117ccc
GPUKERN_DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || echo unknown)
export GPUKERN_DRIVER
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader >> "$OUT/gpu.txt"
for part in "$@"; do
  start=$(date +%s)
  case $part in
    checks) "$D/user-kernels" > "$OUT/user-kernels.log" 2>&1; echo "rc=$?" >> "$OUT/user-kernels.log" ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        echo "== $tool"
        USER_KERNELS_SMALL=1 timeout 150 "$san" --tool "$tool" --error-exitcode 99 "$D/user-kernels" 2>&1 |
          grep -E '^=========|prefix-LM|FAIL' | head -n 80
        echo "rc=${PIPESTATUS[0]}"
      done > "$OUT/sanitize.log" 2>&1 ;;
    bench)
      for i in 1 2; do
        "$D/bench" "$OUT/user-bwd-rust-$i.jsonl" --attention > "$OUT/bench-$i.log" 2>&1
      done ;;
    flex) PYTHONUNBUFFERED=1 python3 bench/peers_user.py "$OUT/user-bwd-peers.jsonl" --attention \
          > "$OUT/peers.log" 2>&1 ;;
    *) echo "unknown part $part" >> "$OUT/parts.log" ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s" >> "$OUT/parts.log"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
