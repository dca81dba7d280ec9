#!/usr/bin/env bash
# Compiles gpukern-device/checks to PTX for sm_90 and assembles it with ptxas (no GPU needed).
# Usage: bash scripts/device-checks-ptx.sh [out.ptx]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/device-checks-sm_90.ptx}
RUSTFLAGS="-Zunstable-options -Cpanic=immediate-abort -Ctarget-cpu=sm_90" \
  rustup run nightly-2026-05-20 cargo rustc --release --lib --target nvptx64-nvidia-cuda \
  -Zbuild-std=core --manifest-path gpukern-device/checks/Cargo.toml \
  --target-dir target/device-checks -- --emit=asm
asm=$(ls -t target/device-checks/nvptx64-nvidia-cuda/release/deps/gpukern_device_checks-*.s | head -1)
cp "$asm" "$out"
ptxas=${GPUKERN_PTXAS:-.tools/ptxas/bin/ptxas}
"$ptxas" -arch=sm_90 -v "$out" -o /dev/null 2>&1 | grep -E "error|spill|Compiling|registers" || true
"$ptxas" -arch=sm_90 "$out" -o /dev/null
# The system calls the module makes, which ptxas resolves and the driver implements: vprintf
# (gpukern_device::print!) and __assertfail (gpukern_device::device_assert!).
grep -E '^\.extern \.func' "$out" || true
echo "ptx: $out (assembled by ptxas for sm_90)"
