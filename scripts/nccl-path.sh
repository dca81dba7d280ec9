#!/usr/bin/env bash
# Prints a folder to put on LD_LIBRARY_PATH so that cudarc finds NCCL: cudarc looks for
# libnccl.so, libnccl.so.12, ... but NCCL ships as libnccl.so.2 (PyTorch's wheel carries it in
# site-packages/nvidia/nccl/lib). Uses a folder that already has libnccl.so, else makes one with
# a link named libnccl.so to the newest libnccl.so.N found. Exits 1 (printing nothing) if none.
#
#   export LD_LIBRARY_PATH="$(bash scripts/nccl-path.sh)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
set -uo pipefail
dirs=(/usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
site="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)" &&
  dirs+=("$site/nvidia/nccl/lib")
for d in "${dirs[@]}"; do
  if [[ -e "$d/libnccl.so" ]]; then echo "$d"; exit 0; fi
done
for d in "${dirs[@]}"; do
  lib="$(compgen -G "$d/libnccl.so.[0-9]*" | sort -V | tail -n 1)"
  if [[ -n "$lib" ]]; then
    shim="${TMPDIR:-/tmp}/gpukern-nccl-lib"
    mkdir -p "$shim" && ln -sf "$lib" "$shim/libnccl.so" && echo "$shim:$d" && exit 0
  fi
done
exit 1
