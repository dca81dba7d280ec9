#!/usr/bin/env bash
# The forward's deferred epilogue (`b6147bd`: the ping-pong stores a block tile's rows after the
# next block tile's first scores are issued) beside main (`a1fe3bf`) in one device call: an A/B
# of the bench binaries carried in .device/bin.tar.xz (bench/build-trees.sh), torch SDPA
# (cuDNN) in the same call, every CUDA attention trial of each kernels binary, and
# compute-sanitizer over forward trials of each head dim (memcheck of every binary; racecheck
# and synccheck of the binaries named by SAN, default all).
#   bash b6147bd-fwd-defer-call.sh PART...   PART: ab1 | ab2 | peers | trials | sanitize
# run in that order; SHAPES (comma-separated) narrows the A/B and the peers, SAN_TRIALS
# (comma-separated trial names) replaces the sanitizer's trials. Writes
# $OUT/<part>.log, $OUT/ab<round>/*.jsonl and $OUT/ab/peers.jsonl, packed into $OUT/all.tgz as
# each part ends.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin ] || tar xJf .device/bin.tar.xz -C .device || exit 1
B=.device/bin
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
shapes=${SHAPES:-16x1024x16x128,4x4096x16x128,1x16384x16x128,8x2048x32x64,8x2048x8x256}
labels() { for f in "$B/$1"-*; do [ -x "$f" ] && echo "${f##*/$1-}"; done | sort; }
mapfile -t benches < <(labels bench)
mapfile -t kernels < <(labels kernels)
mkdir -p "$OUT/ab"
nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
parts=()
for want in trials sanitize ab1 ab2 peers; do
  for p in "$@"; do [ "$p" = "$want" ] && parts+=("$p"); done
done
for part in "${parts[@]}"; do
  start=$(date +%s)
  case $part in
    ab*)
      round=${part#ab}
      runs=()
      for t in "${benches[@]}"; do runs+=("$t=$B/bench-$t"); done
      bash bench/ab.sh "$OUT/ab$round" 1 "${runs[@]}" \
        -- --kernels attention --shapes "$shapes" > "$OUT/ab$round.log" 2>&1 ;;
    peers)
      PYTHONUNBUFFERED=1 python3 bench/peers.py --peers torch_attention --shapes "$shapes" \
        --out "$OUT/ab/peers.jsonl" > "$OUT/peers.log" 2>&1 ;;
    trials)
      for t in "${kernels[@]}"; do
        echo "== $t: cuda::attention::"
        "$B/kernels-$t" cuda::attention:: --test-threads 1 2>&1 | grep -E '^test |test result'
      done > "$OUT/trials.log" 2>&1 ;;
    sanitize)
      {
        names=(
          cuda::attention::bf16::1x1031x1031x4h2kv_d128_causal
          cuda::attention::f16::1x2049x1000x2h2kv_d128_full
          cuda::attention::bf16::2x129x129x4h2kv_d64_full
          cuda::attention::bf16::1x257x257x2h2kv_d256_full
          cuda::attention::wgmma_persistent_walk::bf16::2x1100x1100x8h2kv_d128_causal
        )
        [ -n "${SAN_TRIALS:-}" ] && IFS=, read -r -a names <<< "$SAN_TRIALS"
        for tool in memcheck racecheck synccheck; do
          for t in "${kernels[@]}"; do
            if [ "$tool" != memcheck ] && [ -n "${SAN:-}" ] && [[ " $SAN " != *" $t "* ]]; then continue; fi
            for name in "${names[@]}"; do
              echo "== $tool $t $name"
              timeout 150 "$san" --tool "$tool" --error-exitcode 99 "$B/kernels-$t" "$name" --exact --test-threads 1 2>&1 |
                grep -E '^=========|test result' | head -n 20
              echo "rc=${PIPESTATUS[0]}"
            done
          done
        done
      } > "$OUT/sanitize.log" 2>&1 ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s"
  tar czf "$OUT/all.tgz" -C "$OUT" --exclude all.tgz . 2>/dev/null
done
