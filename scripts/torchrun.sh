#!/usr/bin/env bash
# Starts a job of N processes on this machine the way torchrun does (`torchrun --nproc-per-node N`):
# each gets RANK and LOCAL_RANK (0..N-1), WORLD_SIZE=N, MASTER_ADDR=127.0.0.1 and one free
# MASTER_PORT, and runs PROGRAM ARGS...; waits for all, prefixes each line with its rank, and exits
# non-zero if any rank did. gpukern::dist::Communicator::from_env reads these variables.
#
#   bash scripts/torchrun.sh N PROGRAM [ARGS...]
set -uo pipefail
n=${1:?usage: torchrun.sh N PROGRAM [ARGS...]}
shift
[ $# -ge 1 ] || { echo "usage: torchrun.sh N PROGRAM [ARGS...]" >&2; exit 2; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
for ((rank = 0; rank < n; rank++)); do
    RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        "$@" 2>&1 | sed "s/^/[rank $rank] /" &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
    wait "$pid" || status=1
done
exit $status
