#!/usr/bin/env bash
# Builds and runs examples/custom-kernels as a crate OUTSIDE this repository, the way a user's
# crate depends on gpukern: a copy in a temporary folder, its own workspace, `gpukern` and
# `gpukern-build` (and `gpukern-device`) by absolute path. Without a GPU it runs in the simulator.
#
#   bash scripts/outside-crate.sh            build and run it, sharing this repository's target
#                                            directory (dependencies already built are reused)
#   bash scripts/outside-crate.sh --binary DEST
#                                            build the copy in release and copy its binary to
#                                            DEST (to run it on a GPU machine)
#   bash scripts/outside-crate.sh --timing   also time, in a target directory of its own: the
#                                            first `cargo build` from clean, a rebuild after
#                                            editing one kernel, and a rebuild after editing only
#                                            host code (which must not rebuild the PTX)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
timing=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
crate=$work/my-kernels
cp -r "$repo/examples/custom-kernels" "$crate"
rm -rf "$crate/target"
# Paths into the repository become absolute; the copy is a workspace of its own.
sed -i -e "s#path = \"../..\"#path = \"$repo\"#" -e "s#path = \"../../#path = \"$repo/#" "$crate/Cargo.toml"
sed -i "s#path = \"../../../#path = \"$repo/#" "$crate/kernels/Cargo.toml"
printf '\n[workspace]\nmembers = [".", "kernels"]\n' >>"$crate/Cargo.toml"
# The repository's lock file pins the same dependency versions (cargo drops what is unused).
cp "$repo/Cargo.lock" "$crate/Cargo.lock"
grep -n 'path = ' "$crate/Cargo.toml" "$crate/kernels/Cargo.toml"
# The PTX test of the copy assembles with the ptxas that scripts/test.sh installed.
if [ -z "${GPUKERN_PTXAS:-}" ] && [ -x "$repo/.tools/ptxas/bin/ptxas" ]; then
    export GPUKERN_PTXAS=$repo/.tools/ptxas/bin/ptxas
fi

if [ "$timing" = "--binary" ]; then
    CARGO_TARGET_DIR="$repo/target" cargo build --release --manifest-path "$crate/Cargo.toml"
    cp "$repo/target/release/custom-kernels" "${2:?usage: outside-crate.sh --binary DEST}"
    exit 0
fi

if [ "$timing" != "--timing" ]; then
    CARGO_TARGET_DIR="$repo/target" cargo run --manifest-path "$crate/Cargo.toml"
    CARGO_TARGET_DIR="$repo/target" cargo test --manifest-path "$crate/Cargo.toml"
    # A kernel that does not compile fails the user's build with rustc's own message, naming the
    # kernel crate's file.
    sed -i 's/mem::load(x, i) + 1.0)/mem::load(x, i) + 1u32)/' "$crate/kernels/src/lib.rs"
    if CARGO_TARGET_DIR="$repo/target" cargo build --manifest-path "$crate/Cargo.toml" >"$work/broken.log" 2>&1; then
        echo "outside-crate: a kernel with a type error built"; exit 1
    fi
    if ! grep -q 'error\[E0277\]' "$work/broken.log" || ! grep -q 'kernels/src/lib.rs' "$work/broken.log"; then
        echo "outside-crate: the failed build did not show rustc's error in kernels/src/lib.rs:"
        cat "$work/broken.log"; exit 1
    fi
    echo "outside-crate: a kernel with a type error fails the build with rustc's message:"
    grep -E 'error\[E0277\]|kernels/src/lib.rs' "$work/broken.log" | head -n 3
    exit 0
fi

seconds() { local s=$(date +%s.%N); "$@" >/dev/null 2>&1 || { echo "failed: $*"; exit 1; }; echo "$(date +%s.%N) - $s" | bc; }
ptx_files() { ls "$GPUKERN_PTX_CACHE" | grep -c '^kernels-.*\.ptx$'; }
export CARGO_TARGET_DIR=$work/target GPUKERN_PTX_CACHE=$work/ptx-cache
echo "first build from clean (dependencies, host crate, kernels to PTX):"
echo "  $(seconds cargo build --manifest-path "$crate/Cargo.toml") s; the example's PTX files: $(ptx_files)"
sed -i 's/mem::load(x, i) + 1.0)/mem::load(x, i) + 1.0f32)/' "$crate/kernels/src/lib.rs"
echo "rebuild after editing one kernel (its PTX recompiled, the host crate rebuilt):"
echo "  $(seconds cargo build --manifest-path "$crate/Cargo.toml") s; the example's PTX files: $(ptx_files)"
echo '// host-only edit' >>"$crate/src/main.rs"
echo "rebuild after editing only host code (no PTX compiled):"
before=$(ptx_files)
echo "  $(seconds cargo build --manifest-path "$crate/Cargo.toml") s; the example's PTX files: $(ptx_files)"
[ "$before" = "$(ptx_files)" ] || { echo "a host-only edit rebuilt the PTX"; exit 1; }
"$CARGO_TARGET_DIR/debug/custom-kernels" | tail -3
