#!/usr/bin/env bash
# Builds and runs examples/custom-kernels as a crate OUTSIDE this repository, the way a user's
# crate depends on gpukern: a copy in a temporary folder, its own workspace, `gpukern` and
# `gpukern-build` (and `gpukern-device`) by absolute path. Without a GPU it runs in the simulator.
#
#   bash scripts/outside-crate.sh            build and run it, sharing this repository's target
#                                            directory (dependencies already built are reused),
#                                            or OUTSIDE_TARGET_DIR if set (the test command's:
#                                            a directory of its own, so that it runs beside
#                                            other cargo commands on this repository)
#   bash scripts/outside-crate.sh --binary DEST
#                                            build the copy in release and copy its binary to
#                                            DEST (to run it on a GPU machine)
#   bash scripts/outside-crate.sh --timing   also time, in a target directory of its own: the
#                                            first `cargo build` from clean, a rebuild after
#                                            editing one kernel, and a rebuild after editing only
#                                            host code (which must not rebuild the PTX)
#   bash scripts/outside-crate.sh --release [--library]
#                                            time the first `cargo build --release` from clean
#                                            (its own target directory and PTX cache) and print
#                                            the stripped binary's size and the PTX embedded in
#                                            it; with --library, with gpukern's own kernel
#                                            library too (its default feature, which the example
#                                            turns off)
#
# The kernel crate is not a member of the copy's workspace (the usual layout of a user's crate):
# the PTX build must not write a Cargo.lock into it.
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
printf '\n[workspace]\nmembers = ["."]\nexclude = ["kernels"]\n' >>"$crate/Cargo.toml"
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

if [ "$timing" = "--release" ]; then
    if [ "${2:-}" = "--library" ]; then
        sed -i 's#, default-features = false }# }#' "$crate/Cargo.toml"
    fi
    grep -n '^gpukern = ' "$crate/Cargo.toml"
    export CARGO_TARGET_DIR=$work/target GPUKERN_PTX_CACHE=$work/ptx-cache
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
    start=$(date +%s.%N)
    cargo build --release --manifest-path "$crate/Cargo.toml" >"$work/release.log" 2>&1 || { cat "$work/release.log"; exit 1; }
    end=$(date +%s.%N)
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "first release build from clean: $(echo "$end - $start" | bc) s"
    strip -o "$work/stripped" "$CARGO_TARGET_DIR/release/custom-kernels"
    echo "stripped binary: $(stat -c %s "$work/stripped") bytes"
    echo "PTX embedded (the files include_ptx! took in): $(cat $(find "$CARGO_TARGET_DIR/release/build" -name '*.ptx' -path '*gpukern_ptx*') /dev/null | wc -c) bytes"
    find "$CARGO_TARGET_DIR/release/build" -name '*.ptx' -path '*gpukern_ptx*' -printf '  %f %s\n' | sort
    exit 0
fi

if [ "$timing" != "--timing" ]; then
    target=${OUTSIDE_TARGET_DIR:-$repo/target}
    CARGO_TARGET_DIR="$target" cargo run --manifest-path "$crate/Cargo.toml"
    CARGO_TARGET_DIR="$target" cargo test --manifest-path "$crate/Cargo.toml"
    # The PTX build wrote nothing into the user's source tree.
    if [ -e "$crate/kernels/Cargo.lock" ]; then
        echo "outside-crate: the PTX build wrote kernels/Cargo.lock into the crate's sources"; exit 1
    fi
    # Prebuilt PTX: with GPUKERN_PTX_DIR the build takes the PTX from there and never runs the
    # nightly (a `rustup` that fails stands in for a machine without it).
    mkdir -p "$work/no-nightly" "$work/prebuilt"
    printf '#!/bin/sh\necho "rustup must not run with GPUKERN_PTX_DIR" >&2; exit 1\n' >"$work/no-nightly/rustup"
    chmod +x "$work/no-nightly/rustup"
    cp "${GPUKERN_PTX_CACHE:-$repo/target/gpukern-ptx}"/kernels-*.ptx "$work/prebuilt/"
    if ! PATH="$work/no-nightly:$PATH" GPUKERN_PTX_DIR="$work/prebuilt" CARGO_TARGET_DIR="$target" \
        cargo build --manifest-path "$crate/Cargo.toml" >"$work/prebuilt.log" 2>&1; then
        echo "outside-crate: the build with GPUKERN_PTX_DIR failed:"; cat "$work/prebuilt.log"; exit 1
    fi
    echo "outside-crate: built from prebuilt PTX (GPUKERN_PTX_DIR), no nightly run"
    # ... and a folder without this source's PTX is an error naming the file it expected.
    mkdir -p "$work/prebuilt-empty"
    if PATH="$work/no-nightly:$PATH" GPUKERN_PTX_DIR="$work/prebuilt-empty" CARGO_TARGET_DIR="$target" \
        cargo build --manifest-path "$crate/Cargo.toml" >"$work/prebuilt.log" 2>&1 \
        || ! grep -q 'GPUKERN_PTX_DIR=.*no PTX of `kernels`' "$work/prebuilt.log"; then
        echo "outside-crate: an empty GPUKERN_PTX_DIR did not fail with its message:"; cat "$work/prebuilt.log"; exit 1
    fi
    # A kernel that does not compile fails the user's build with rustc's own message, naming the
    # kernel crate's file.
    sed -i 's/mem::load(x, i) + 1.0)/mem::load(x, i) + 1u32)/' "$crate/kernels/src/lib.rs"
    if CARGO_TARGET_DIR="$target" cargo build --manifest-path "$crate/Cargo.toml" >"$work/broken.log" 2>&1; then
        echo "outside-crate: a kernel with a type error built"; exit 1
    fi
    if ! grep -q 'error\[E0277\]' "$work/broken.log" || ! grep -q 'kernels/src/lib.rs' "$work/broken.log"; then
        echo "outside-crate: the failed build did not show rustc's error in kernels/src/lib.rs:"
        cat "$work/broken.log"; exit 1
    fi
    # Once in gpukern's report (for every architecture), without cargo's lock waits or warnings
    # from gpukern's crates, and with nothing written into the kernel crate. (cargo's own compile
    # of the kernel crate for the host may report it too, when cargo runs it beside the build
    # script: at most twice in all.)
    in_build_script=$(sed -n '/gpukern build:/,$p' "$work/broken.log" | grep -c 'error\[E0277\]' || true)
    if [ "$in_build_script" != 1 ] || [ "$(grep -c 'error\[E0277\]' "$work/broken.log")" -gt 2 ] \
        || grep -q 'Blocking waiting' "$work/broken.log" \
        || grep -q '^ *warning: .*\(declared but not used\|gpukern-device\)' "$work/broken.log" \
        || [ -e "$crate/kernels/Cargo.lock" ]; then
        echo "outside-crate: the error was not shown once and clean:"; cat "$work/broken.log"; exit 1
    fi
    echo "outside-crate: a kernel with a type error fails the build with rustc's message, once in gpukern's report:"
    cat "$work/broken.log"
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
