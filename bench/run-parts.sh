#!/usr/bin/env bash
# The whole suite in three parts, each the gpukern suites of a group with the peers of the same
# kernels, for machines where one call cannot hold everything (the committed run at 6088228 was
# made this way, one device call per part, same binary). Each part appends to one file.
#
#   bash bench/run-parts.sh PART [OUT_FILE]     PART: movement | first | new | attention | attention_bwd
#     movement: graph replay, transfers, the pipelined batch, several GPUs (+ torch peers)
#     first:    copy, add, increment_by_one, matmul, launch overhead, copies, softmax (--plans)
#               (+ torch, Triton, Numba, torch.compile softmax)
#     new:      copy, sum, argmax, transpose, norms, cross-entropy, bf16/fp16 matmul
#               (+ torch, torch.compile, Triton norms, torch and Triton half matmul)
#     attention: attention forward, bf16 (+ SDPA with cuDNN and FLASH forced, FlexAttention)
#     attention_bwd: attention backward, bf16 (+ SDPA's backward with cuDNN and FLASH forced)
#
# Environment as bench/run.sh: GPUKERN_BENCH_BIN, GPUKERN_GIT_REV.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
part=${1:?usage: bash bench/run-parts.sh movement|first|new|attention|attention_bwd [OUT_FILE]}
out=${2:-bench/results/latest.jsonl}
bin="${GPUKERN_BENCH_BIN:-target/release/examples/bench}"
: "${GPUKERN_GIT_REV:=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
export GPUKERN_GIT_REV
if libs="$(bash scripts/nccl-path.sh)"; then export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
cublas="$(bash -c 'source <(sed -n "/^find_cublas()/,/^}/p" bench/run.sh); find_cublas')" &&
    export LD_LIBRARY_PATH="$cublas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tmp=$(mktemp -d)
bench() { timeout $(( $1 + 10 )) "$bin" --budget-s "$1" --out "$tmp/b$2.jsonl" "${@:3}"; }
peers() { timeout $(( $1 + 20 )) python3 bench/peers.py --budget-s "$1" --out "$tmp/p$2.jsonl" --peers "$3"; }
case "$part" in
  movement)
    bench 110 1 --kernels graph_replay,transfer,pipelined,multi_gpu
    peers 110 1 torch_graph,torch_transfer,multi ;;
  first)
    bench 150 1 --kernels copy,add,increment_by_one,matmul,launch_overhead,matmul_with_copies
    bench 100 2 --kernels softmax --plans
    peers 270 1 torch,triton,numba,compile_softmax ;;
  new)
    bench 250 1 --kernels copy,sum,argmax,transpose,norm,cross-entropy,matmul_half
    peers 270 1 torch_reduce,compile_reduce,torch_norm,compile_norm,triton_norm,torch_half,triton_half ;;
  attention)
    bench 250 1 --kernels attention
    peers 270 1 torch_attention,flex_attention,triton_attention ;;
  attention_bwd)
    bench 250 1 --kernels attention_bwd
    peers 270 1 torch_attention_bwd,triton_attention_bwd ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
cat "$tmp"/*.jsonl >> "$out" && rm -rf "$tmp"
echo "run-parts: $part appended to $out"
