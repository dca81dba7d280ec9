#!/usr/bin/env bash
# The one command on the GPU machine: gpukern's bench binary, then the Python peers
# (bench/peers.py), merged into one JSON Lines file. Needs no Rust toolchain: the binary is
# built elsewhere and carried along.
#
#   bash bench/run.sh            # full run  -> bench/results/latest.jsonl (or $OUT/latest.jsonl)
#   bash bench/run.sh --twice    # two full runs back to back, same binary and commit:
#                                #   latest.jsonl, then repeat.jsonl (the run-to-run spread)
#   bash bench/run.sh --repeat   # one full run -> repeat.jsonl (the second half of --twice, for
#                                #   a second device call when one call cannot hold both runs)
#   bash bench/run.sh --quick    # smoke test -> bench/results/quick.jsonl  (or $OUT/quick.jsonl)
#
# --twice lowers the default budgets (bench 120 s, peers 130 s; timeouts 140 s and 150 s) so
# that both runs fit in one 10-minute device call; measurements past a budget are recorded as
# skipped, so check both files' "skipped" records before committing them.
#
# Environment:
#   GPUKERN_BENCH_BIN  the bench binary (default target/release/examples/bench)
#   OUT                if set, every result file goes to this folder instead of bench/results
#   GPUKERN_GIT_REV    the commit measured (default: git rev-parse --short HEAD, else "unknown")
#   BENCH_BUDGET_S     bench: measurements not started by then are skipped (default 250; the
#                      full suite took about 215 s on the H200 at ab06b47)
#   PEERS_BUDGET_S     peers.py: the same (default 280; about 195 s at ab06b47)
#   BENCH_TIMEOUT_S, PEERS_TIMEOUT_S  hard limits per part (default 280 and 300,
#                      580 s in all: one 10-minute device call); what a
#                      killed part wrote so far is kept (records are flushed one by one)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

quick=()
names=(latest)
case "${1:-}" in
  --quick) quick=(--quick); names=(quick) ;;
  --twice)
    names=(latest repeat)
    : "${BENCH_BUDGET_S:=120}" "${PEERS_BUDGET_S:=130}" "${BENCH_TIMEOUT_S:=140}" "${PEERS_TIMEOUT_S:=150}"
    ;;
  --repeat) names=(repeat) ;;
  "") ;;
  *) echo "usage: bash bench/run.sh [--quick | --twice | --repeat]" >&2; exit 2 ;;
esac

dest="${OUT:-bench/results}"
mkdir -p "$dest" || exit 1
bin="${GPUKERN_BENCH_BIN:-target/release/examples/bench}"
if [[ -z "${GPUKERN_GIT_REV:-}" ]]; then
  GPUKERN_GIT_REV="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
fi
export GPUKERN_GIT_REV

# cudarc loads cuBLAS by the names libcublas.so / libcublas.so.12 / ...; a CUDA 13 machine may
# only have libcublas.so.13. Put a folder with libcublas.so on the library path: the toolkit's
# own, or a link to the newest versioned library found (the toolkit's, else the pip wheel's).
find_cublas() {
  local dirs=(/usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64 /usr/local/cuda-*/targets/x86_64-linux/lib)
  local site
  site="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)" &&
    dirs+=("$site"/nvidia/*/lib "$site"/nvidia/cublas/lib)
  local d lib
  for d in "${dirs[@]}"; do
    if [[ -e "$d/libcublas.so" ]]; then
      echo "$d"
      return 0
    fi
  done
  for d in "${dirs[@]}"; do
    lib="$(compgen -G "$d/libcublas.so.[0-9]*" | sort -V | tail -n 1)"
    if [[ -n "$lib" ]]; then
      local shim="${TMPDIR:-/tmp}/gpukern-bench-lib"
      mkdir -p "$shim" && ln -sf "$lib" "$shim/libcublas.so" && echo "$shim:$d"
      return 0
    fi
  done
  return 1
}
# cudarc loads NCCL (the multi_gpu all-reduce) as libnccl.so; PyTorch's wheel has libnccl.so.2.
if nccl_libs="$(bash scripts/nccl-path.sh)"; then
  export LD_LIBRARY_PATH="$nccl_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "run.sh: NCCL from $nccl_libs"
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so '; then
  if libs="$(find_cublas)"; then
    export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "run.sh: cuBLAS from $libs"
  else
    echo "run.sh: no libcublas found; the cuBLAS ceilings will be recorded as errors" >&2
  fi
fi

# One full pass: the bench binary, then the peers, merged into $dest/$1.jsonl.
run_once() {
  local name=$1
  start=$(date +%s)
  rm -f "$dest/gpukern.jsonl" "$dest/peers.jsonl"

  echo "run.sh: [1/2] gpukern bench ($bin) -> $dest/gpukern.jsonl"
  if [[ -x "$bin" ]]; then
    timeout "${BENCH_TIMEOUT_S:-280}" "$bin" --out "$dest/gpukern.jsonl" --budget-s "${BENCH_BUDGET_S:-250}" ${quick[@]+"${quick[@]}"}
    rc_bench=$?
  else
    echo "run.sh: no bench binary at $bin: build it with 'cargo build --release --example bench'" \
         "and set GPUKERN_BENCH_BIN" >&2
    rc_bench=127
  fi

  echo "run.sh: [2/2] peers (PyTorch, Triton, Numba) -> $dest/peers.jsonl"
  PYTHONUNBUFFERED=1 timeout "${PEERS_TIMEOUT_S:-300}" python3 bench/peers.py \
    --out "$dest/peers.jsonl" --budget-s "${PEERS_BUDGET_S:-280}" ${quick[@]+"${quick[@]}"}
  rc_peers=$?

  merged="$dest/$name.jsonl"
  parts=()
  for f in "$dest/gpukern.jsonl" "$dest/peers.jsonl"; do
    [[ -s "$f" ]] && parts+=("$f")
  done
  if (( ${#parts[@]} > 0 )); then
    cat "${parts[@]}" > "$merged"
    echo "run.sh: $(wc -l < "$merged") records in $merged after $(( $(date +%s) - start )) s" \
         "(bench exit $rc_bench, peers exit $rc_peers)"
    echo "run.sh: render with: python3 bench/report.py $merged"
  else
    echo "run.sh: nothing was measured (bench exit $rc_bench, peers exit $rc_peers); $merged left as it was" >&2
  fi
  if (( rc_bench != 0 )); then return "$rc_bench"; fi
  return "$rc_peers"
}

rc=0
for name in "${names[@]}"; do
  run_once "$name" || rc=$?
done
if (( ${#names[@]} == 2 )); then
  echo "run.sh: the spread: python3 bench/compare.py $dest/latest.jsonl $dest/repeat.jsonl"
fi
exit "$rc"
