#!/usr/bin/env bash
# Compiles gpukern-device/checks to PTX for sm_90 and assembles it with ptxas (no GPU needed);
# then tries the same for sm_80 (Ampere), reported but not fatal: some helpers need sm_90.
# Set GPUKERN_PTX_SM80=0 to skip the sm_80 try.
# Usage: bash scripts/device-checks-ptx.sh [out.ptx]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/device-checks-sm_90.ptx}
ptxas=${GPUKERN_PTXAS:-.tools/ptxas/bin/ptxas}

# Builds the checks crate for target CPU $1 into its own target directory (so that switching
# between sm_90 and sm_80 does not rebuild core each time); prints the path of the PTX.
build() {
  local dir=target/device-checks
  [ "$1" = sm_90 ] || dir=target/device-checks-$1
  RUSTFLAGS="-Zunstable-options -Cpanic=immediate-abort -Ctarget-cpu=$1" \
    rustup run nightly-2026-05-20 cargo rustc --release --lib --target nvptx64-nvidia-cuda \
    -Zbuild-std=core --manifest-path gpukern-device/checks/Cargo.toml \
    --target-dir "$dir" -- --emit=asm >&2
  ls -t "$dir"/nvptx64-nvidia-cuda/release/deps/gpukern_device_checks-*.s | head -1
}

asm=$(build sm_90)
cp "$asm" "$out"
"$ptxas" -arch=sm_90 -v "$out" -o /dev/null 2>&1 | grep -E "error|spill|Compiling|registers" || true
"$ptxas" -arch=sm_90 "$out" -o /dev/null
# The system calls the module makes, which ptxas resolves and the driver implements: vprintf
# (gpukern_device::print!) and __assertfail (gpukern_device::device_assert!).
grep -E '^\.extern \.func' "$out" || true
echo "ptx: $out (assembled by ptxas for sm_90)"

if [ "${GPUKERN_PTX_SM80:-1}" != 0 ]; then
  out80=${out%sm_90.ptx}sm_80.ptx
  [ "$out80" != "$out" ] || out80=$out.sm_80.ptx
  if asm80=$(build sm_80) && cp "$asm80" "$out80" && "$ptxas" -arch=sm_80 "$out80" -o /dev/null 2>"$out80.log"; then
    echo "ptx: $out80 (assembled by ptxas for sm_80)"
  else
    echo "sm_80: NOT assembled (not fatal); ptxas said:"
    head -20 "$out80.log" 2>/dev/null || true
  fi
fi
