#!/usr/bin/env bash
# The backward's checks and A/B owed by the twentieth round (BENCHMARKS.md, twenty-first round),
# in device calls. Binaries built here (release) and carried in .device/bin.tar.xz (`tar cf - bin
# | xz` of .device/bin), named by the commit (or label) each was built from:
#   kernels-<label>  the `kernels` test binary of a tree (cargo test --release -p gpukern --test kernels --no-run)
#   bench-<label>    target/release/examples/bench of a tree
# e.g. bench-b233429 (before), bench-083ddd8 (main), bench-03af58d (bwd-persistent), bench-39b0297
# (bwd-lpt), bench-11b2121 (bwd-convert-lines): all made by
#   bash bench/build-trees.sh .device/bin b233429 main bwd-persistent bwd-lpt bwd-convert-lines
# (each tree apart: bench/README.md says why).
#   bash 083ddd8-bwd-call.sh PART...   PART: ab1 | ab2 | peers | trials | sanitize | ncu
# run in that order whatever the order given (the A/B first, if the call is cut short); SHAPES
# (comma-separated, default the four of the round) narrows the A/B and the peers; SANITIZE lists
# the trials of `sanitize` as <label>:<trial name after cuda::attention_backward::> (default:
# each kernels binary's d128 and d64 trials, both element types); NCU the label whose kernels ncu
# times (default the first bench binary after b233429). Writes $OUT/<part>.log,
# $OUT/ab<round>/*.jsonl and $OUT/ab/peers.jsonl, all packed into $OUT/all.tgz as each part ends.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin ] || tar xJf .device/bin.tar.xz -C .device || exit 1
B=.device/bin
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_SLOW_TRIALS=1
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
shapes=${SHAPES:-16x1024x16x128,4x4096x16x128,1x16384x16x128,8x2048x32x64}
# The labels of the binaries carried: b233429 (before) first.
labels() { for f in "$B/$1"-*; do [ -x "$f" ] && echo "${f##*/$1-}"; done | sort | awk '$0 == "b233429" {print; next} {r[++n] = $0} END {for (i = 1; i <= n; i++) print r[i]}'; }
mapfile -t benches < <(labels bench)
mapfile -t kernels < <(labels kernels)
ncu_label=${NCU:-$(printf '%s\n' "${benches[@]}" | grep -v '^b233429$' | head -n 1)}
if [ -n "${SANITIZE:-}" ]; then
  read -ra sanitized <<<"$SANITIZE"
else
  sanitized=()
  for k in "${kernels[@]}"; do
    sanitized+=("$k:bf16::1x333x200x2h2kv_d128_causal" "$k:f16::2x129x129x4h2kv_d64_causal"
                "$k:f16::1x200x333x4h1kv_d128_causal" "$k:bf16::1x129x129x4h2kv_d64_full")
  done
fi
mkdir -p "$OUT/ab"
nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
# The parts in the order of what matters most if the call is cut short (device time runs out):
# the A/B and its peers first; every part's output packed into $OUT/all.tgz as it ends.
parts=()
for want in ab1 ab2 peers trials ncu sanitize; do
  for p in "$@"; do [ "$p" = "$want" ] && parts+=("$p"); done
done
for part in "${parts[@]}"; do
  start=$(date +%s)
  case $part in
    trials)
      for t in "${kernels[@]}"; do
        echo "== $t: cuda::attention_backward"
        "$B/kernels-$t" cuda::attention_backward --test-threads 1 2>&1 | grep -E '^test |test result'
      done > "$OUT/trials.log" 2>&1 ;;
    ab*)
      round=${part#ab}
      runs=()
      for t in "${benches[@]}"; do runs+=("$t=$B/bench-$t"); done
      bash bench/ab.sh "$OUT/ab$round" 1 "${runs[@]}" \
        -- --kernels attention_bwd --shapes "$shapes" > "$OUT/ab$round.log" 2>&1 ;;
    sanitize)
      {
        for tool in memcheck racecheck synccheck; do
          for t in "${sanitized[@]}"; do
            tree=${t%%:*} name=cuda::attention_backward::${t#*:}
            echo "== $tool $tree $name"
            timeout 150 "$san" --tool "$tool" --error-exitcode 99 "$B/kernels-$tree" "$name" --exact --test-threads 1 2>&1 |
              grep -E '^=========|test result' | head -n 20
            echo "rc=${PIPESTATUS[0]}"
          done
        done
      } > "$OUT/sanitize.log" 2>&1 ;;
    peers)
      PYTHONUNBUFFERED=1 python3 bench/peers.py --peers torch_attention_bwd --shapes "$shapes" \
        --out "$OUT/ab/peers.jsonl" > "$OUT/peers.log" 2>&1 ;;
    ncu)
      timeout 200 "$ncu" -k regex:attention_bwd -c 6 --section SpeedOfLight "$B/bench-$ncu_label" --out /tmp/ncu.jsonl \
        --kernels attention_bwd --shapes 16x1024x16x128 > "$OUT/ncu-$ncu_label.log" 2>&1 ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
