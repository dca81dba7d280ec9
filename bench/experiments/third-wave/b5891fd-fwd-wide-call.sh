#!/usr/bin/env bash
# The forward's wide 176-key tiles (`WgmmaWide`, `attention_wgmma_pingpong_wide_d128_*`) in one
# device call: an A/B of the bench binaries carried in .device/bin.tar.xz (bench/build-trees.sh;
# every forward rung of each binary at head dim 128, `gpukern:wgmma-wide` beside the default),
# torch SDPA in the same call, the CUDA trials and the sanitizer of the wide tiles, and where
# ptxas puts the wide kernel's spills (.device/ptx.xz: the sm_90a module, if carried).
#   bash b5891fd-fwd-wide-call.sh PART...   PART: ab1 | ab2 | peers | trials | sanitize | sass | ncu
# (ncu: `--set full` of the wide kernel at 4x4096x16x128, NCU naming the bench binary's label)
# run in that order; SHAPES (comma-separated) narrows the A/B and the peers. Writes
# $OUT/<part>.log, $OUT/ab<round>/*.jsonl and $OUT/ab/peers.jsonl, packed into $OUT/all.tgz as
# each part ends.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin ] || tar xJf .device/bin.tar.xz -C .device || exit 1
B=.device/bin
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
shapes=${SHAPES:-16x1024x16x128,8x2048x16x128,4x4096x16x128,1x16384x16x128}
labels() { for f in "$B/$1"-*; do [ -x "$f" ] && echo "${f##*/$1-}"; done | sort; }
mapfile -t benches < <(labels bench)
mapfile -t kernels < <(labels kernels)
mkdir -p "$OUT/ab"
nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
parts=()
for want in ab1 ab2 peers trials sanitize sass ncu; do
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
        for tool in memcheck racecheck synccheck; do
          for t in "${kernels[@]}"; do
            name=cuda::attention::wgmma_wide_vs_rows::f16::1x2048x2048x8h2kv_d128_full
            echo "== $tool $t $name"
            timeout 150 "$san" --tool "$tool" --error-exitcode 99 "$B/kernels-$t" "$name" --exact --test-threads 1 2>&1 |
              grep -E '^=========|test result' | head -n 20
            echo "rc=${PIPESTATUS[0]}"
          done
        done
      } > "$OUT/sanitize.log" 2>&1 ;;
    sass)
      {
        [ -f .device/ptx.xz ] || { echo "no .device/ptx.xz"; exit 0; }
        xz -dc .device/ptx.xz > /tmp/module.ptx
        ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
        cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
        for e in attention_wgmma_pingpong_wide_d128_bf16 attention_wgmma_pingpong_d128_bf16; do
          echo "== $e"
          "$ptxas" -v -arch=sm_90a -e "$e" /tmp/module.ptx -o "/tmp/$e.cubin" 2>&1 | grep -v Compiling
          "$cuobjdump" -sass "/tmp/$e.cubin" > "$OUT/sass-$e.txt"
          echo "instructions: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' "$OUT/sass-$e.txt")"
          grep -nE 'STL|LDL|HGMMA|BAR|SYNCS|WARPGROUP' "$OUT/sass-$e.txt" | sed 's/  */ /g' | head -n 200
        done
      } > "$OUT/sass.log" 2>&1 ;;
    ncu)
      ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      timeout 200 "$ncu" -k regex:attention_wgmma_pingpong_wide -c 1 --set full "$B/bench-${NCU:-wide}" \
        --out /tmp/ncu.jsonl --kernels attention --shapes 4x4096x16x128 > "$OUT/ncu-full-wide.log" 2>&1 ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s"
  tar czf "$OUT/all.tgz" -C "$OUT" --exclude all.tgz . 2>/dev/null
done
