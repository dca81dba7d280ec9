#!/usr/bin/env bash
# Builds the bench binary and the `kernels` test binary of several commits for one device call's
# A/B (bench/ab.sh), each from a worktree of its own, into DIR as bench-<label> and
# kernels-<label> (label: the commit's short hash, or LABEL=REV to name it), then packs DIR's
# folder into DIR.tar.xz (what a device call carries; the call unpacks it).
#
#   bash bench/build-trees.sh DIR REV|LABEL=REV...
#   e.g. bash bench/build-trees.sh .device/bin b233429 main bwd-lpt
#
# The trees share this checkout's target directory, and before each tree every workspace member's
# release outputs are cleaned: cargo names a member's outputs by its path inside the workspace, so
# two checkouts' members share them, and without the clean a tree may link a crate compiled from
# the other checkout (bench/README.md). Dependencies stay built, so each tree costs only the
# workspace's own crates (the PTX is cached by a hash of the kernel sources).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: bash bench/build-trees.sh DIR REV|LABEL=REV...}
shift
[ $# -gt 0 ] || { echo "bench/build-trees.sh: no revision given" >&2; exit 2; }
target=$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)
mapfile -t members < <(cargo metadata --format-version 1 --no-deps | jq -r '.packages[].name')
clean_args=()
for m in "${members[@]}"; do clean_args+=(-p "$m"); done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
for spec in "$@"; do
    rev=${spec#*=}
    label=$(git rev-parse --short "$rev")
    [ "$spec" != "$rev" ] && label=${spec%%=*}
    tree=$(mktemp -d "${TMPDIR:-/tmp}/gpukern-tree-XXXX")
    git worktree add -q --detach "$tree" "$rev"
    echo "== $label ($rev) in $tree"
    (
        cd "$tree"
        export CARGO_TARGET_DIR=$target
        cargo clean --release "${clean_args[@]}" 2>/dev/null
        cargo build --release --example bench
        cp "$target/release/examples/bench" "$dir/bench-$label"
        exe=$(cargo test --release -p gpukern --test kernels --no-run --message-format=json |
            jq -r 'select(.reason == "compiler-artifact" and .profile.test == true and .target.name == "kernels" and .executable != null) | .executable' | tail -n 1)
        cp "$exe" "$dir/kernels-$label"
    )
    git worktree remove --force "$tree"
done
# This checkout's own next release build starts clean too (its members' outputs are the last
# tree's now).
cargo clean --release "${clean_args[@]}" 2>/dev/null
# One xz stream with a dictionary larger than the folder: the binaries embed mostly the same PTX,
# which xz's default dictionary, smaller than one binary, cannot see from one binary to the next
# (the working tree and the carry share a device call's size limit; unpacking needs 512 MiB of
# memory).
tar cf - -C "$(dirname "$dir")" "$(basename "$dir")" | xz -T1 --lzma2=preset=6,dict=512MiB > "$dir.tar.xz"
echo "build-trees: $(ls "$dir" | wc -l) binaries in $dir, packed into $dir.tar.xz ($(du -h "$dir.tar.xz" | cut -f1))"
