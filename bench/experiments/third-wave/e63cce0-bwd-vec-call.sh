#!/usr/bin/env bash
# One device call for the branch `bwd-vec-stores` (`e63cce0`) against main: the backward's `dQ`
# staged and its `dK`/`dV` stored in 16-byte pieces, and the GLU rows kernel on a 1-D grid.
# Binaries: `bash bench/build-trees.sh .device/bin main=main vec=e63cce0` (bench-main,
# kernels-main, bench-vec, kernels-vec), carried packed; the call unpacks them and drops
# kernels-main (main's trials ran in earlier calls).
#   bash e63cce0-bwd-vec-call.sh PART...   PART, run in the order given:
#     bwd-ab1 | bwd-ab2 | bwd-peers | bwd-trials | bwd-sanitize   (083ddd8-bwd-call.sh's parts)
#     glu-ab1 | glu-ab2   bench --kernels glu of both binaries in turn (bench/ab.sh)
#     glu-peers           torch.compile of the LLM families (peers.py compile_llm)
#     glu-trials          the vec binary's cuda::glu trials
#     glu-sanitize        memcheck, racecheck, synccheck of cuda::glu::bf16::77x1000 (vec binary)
# Everything under $OUT is packed into $OUT/all.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin ] || { tar xJf .device/bin.tar.xz -C .device && rm -f .device/bin/kernels-main; } || exit 1
B=.device/bin
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_SLOW_TRIALS=1
export SANITIZE=${SANITIZE:-"vec:bf16::1x333x200x2h2kv_d128_causal vec:f16::2x129x129x4h2kv_d64_causal vec:f16::1x200x333x4h1kv_d128_causal vec:bf16::1x129x129x4h2kv_d64_full"}
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
mkdir -p "$OUT/ab"
for part in "$@"; do
  start=$(date +%s)
  case $part in
    bwd-*) bash bench/experiments/third-wave/083ddd8-bwd-call.sh "${part#bwd-}" ;;
    glu-ab*)
      bash bench/ab.sh "$OUT/glu-ab${part#glu-ab}" 1 main=$B/bench-main vec=$B/bench-vec \
        -- --kernels glu > "$OUT/glu-ab${part#glu-ab}.log" 2>&1 ;;
    glu-peers)
      PYTHONUNBUFFERED=1 python3 bench/peers.py --peers compile_llm \
        --out "$OUT/ab/llm-peers.jsonl" > "$OUT/glu-peers.log" 2>&1 ;;
    glu-trials)
      "$B/kernels-vec" cuda::glu --test-threads 1 2>&1 | grep -E '^test |test result' > "$OUT/glu-trials.log" ;;
    glu-sanitize)
      for tool in memcheck racecheck synccheck; do
        name=cuda::glu::bf16::77x1000
        echo "== $tool $name"
        timeout 120 "$san" --tool "$tool" --error-exitcode 99 "$B/kernels-vec" "$name" --exact --test-threads 1 2>&1 |
          grep -E '^=========|test result' | head -n 20
        echo "rc=${PIPESTATUS[0]}"
      done > "$OUT/glu-sanitize.log" 2>&1 ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s" | tee -a "$OUT/parts.log"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
