#!/usr/bin/env bash
# One device call for the branch `gemm-tail` (`bda834e`) against main: the last, partial round of
# a persistent GEMM's tiles split into column halves (`wgmma_ws::tail_halves`), in the grouped
# product (`c3ad9c4`) and in the dense warp-specialised kernel's 16-bit 128-row tiles (`bda834e`).
# Binaries: `bash bench/build-trees.sh .device/bin main=main tail=bda834e` (bench-main,
# kernels-main, bench-tail, kernels-tail), carried packed; the call unpacks them and drops
# kernels-main (main's trials ran in earlier calls).
#   bash bda834e-gemm-tail-call.sh PART...   PART, run in the order given:
#     ab1 | ab2     bench --kernels matmul_grouped --plans of both binaries in turn (bench/ab.sh):
#                   the grouped product (the uniform split's 3,072 wide tiles split their last 36)
#                   and its dense twin (`gpukern:dense`, the dense kernel, split alike)
#     dense-ab1 | dense-ab2   bench --kernels matmul_half at 4096^3 and 8192^3 (no split there:
#                   the changed code's cost where the tail is not split), both binaries in turn
#     peers         torch._grouped_mm and torch's dense product of the same flops (peers.py)
#     trials        the tail binary's cuda::matmul_grouped and cuda::matmul_wgmma_ws trials
#     sanitize      memcheck, racecheck, synccheck of two grouped trials (tail binary): one whose
#                   lists split their tails on the GPU (both plans), one whose lists do not; and
#                   of the dense 2180 x 264 x 2040 (split on 132 SMs)
#     ncu           one launch each of the grouped kernel (128 x 256) and of the dense product at
#                   the uniform shape, both binaries' grouped kernel: speed of light, memory,
#                   the clock, under ncu without clock control
# Everything under $OUT is packed into $OUT/all.tgz after each part.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
[ -d .device/bin ] || { tar xJf .device/bin.tar.xz -C .device && rm -f .device/bin/kernels-main; } || exit 1
B=.device/bin
export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_SLOW_TRIALS=1
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
mkdir -p "$OUT/ab"
for part in "$@"; do
  start=$(date +%s)
  nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/gpu.txt"
  case $part in
    ab1 | ab2)
      bash bench/ab.sh "$OUT/$part" 1 main=$B/bench-main tail=$B/bench-tail \
        -- --kernels matmul_grouped --plans > "$OUT/$part.log" 2>&1 ;;
    dense-ab1 | dense-ab2)
      bash bench/ab.sh "$OUT/$part" 1 main=$B/bench-main tail=$B/bench-tail \
        -- --kernels matmul_half --shapes 4096x4096x4096,8192x8192x8192 > "$OUT/$part.log" 2>&1 ;;
    peers)
      PYTHONUNBUFFERED=1 python3 bench/peers.py --peers torch_grouped \
        --out "$OUT/ab/peers.jsonl" > "$OUT/peers.log" 2>&1 ;;
    trials)
      for f in cuda::matmul_grouped cuda::matmul_wgmma_ws; do
        "$B/kernels-tail" "$f" --test-threads 1 2>&1 | grep -E '^test |test result|panicked'
      done > "$OUT/trials.log" ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        for name in cuda::matmul_grouped::4_experts_empty_ends cuda::matmul_grouped::3_experts_ragged \
          cuda::matmul_wgmma_ws::bf16::2180x264x2040; do
          echo "== $tool $name"
          timeout 120 "$san" --tool "$tool" --error-exitcode 99 "$B/kernels-tail" "$name" --exact --test-threads 1 2>&1 |
            grep -E '^=========|test result' | head -n 20
          echo "rc=${PIPESTATUS[0]}"
        done
      done > "$OUT/sanitize.log" 2>&1 ;;
    ncu)
      {
        for bin in tail main; do
          for k in matmul_grouped_bf16_128x256 matmul_ws_; do
            [ "$bin" = main ] && [ "$k" = matmul_ws_ ] && continue
            echo "== $bin $k"
            timeout 150 "$ncu" --clock-control none -k "regex:$k" -c 1 \
              --section SpeedOfLight --section MemoryWorkloadAnalysis \
              --metrics sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
              "$B/bench-$bin" --out /tmp/ncu.jsonl --kernels matmul_grouped --shapes e128x65536x1536x2048 2>&1 |
              grep -vE '^\{' | tail -n 60
          done
        done
      } > "$OUT/ncu.log" 2>&1 ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s" | tee -a "$OUT/parts.log"
  tar czf /tmp/all.tgz -C "$OUT" --exclude all.tgz . && mv /tmp/all.tgz "$OUT/all.tgz"
done
