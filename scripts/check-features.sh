#!/usr/bin/env bash
# gpukern with each kernel-family feature alone, and with none: `cargo check` of the host code and
# of kernels-gpu (for the simulator), failing on any warning. The PTX is not built
# (GPUKERN_PTX_SKIP=1): build.rs passes the same feature list to the nested PTX build
# (gpukern_build::Builder::features), whose kernel code the host check has already compiled.
# Run by scripts/test.sh; about 10-20 s per feature set on 2 cores once the dependencies are built.
set -euo pipefail
cd "$(dirname "$0")/.."

export GPUKERN_PTX_SKIP=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The families: gpukern's `library` feature less dependencies' features (Cargo.toml, the one list).
families=$(cargo metadata --no-deps --format-version 1 |
    jq -r '.packages[] | select(.name == "gpukern") | .features.library[] | select(contains("/") | not)')
[ -n "$families" ] || { echo "no families in gpukern's library feature" >&2; exit 1; }
for features in "" $families; do
    printf 'gpukern --no-default-features --features "%s"\n' "$features"
    cargo check --quiet -p gpukern --no-default-features --features "$features" \
        --message-format short >"$log" 2>&1 || { cat "$log"; exit 1; }
    if grep -q 'warning' "$log"; then
        cat "$log"
        echo "warnings with --no-default-features --features \"$features\"" >&2
        exit 1
    fi
done
# A kernel crate's view of the attention family: the generic kernels alone (no library entries),
# what `kernels_gpu::attention_mask_kernels!` instantiates in a crate of its own.
printf 'kernels-gpu --no-default-features --features attention-generic\n'
cargo check --quiet -p kernels-gpu --no-default-features --features attention-generic \
    --message-format short >"$log" 2>&1 || { cat "$log"; exit 1; }
if grep -q 'warning' "$log"; then
    cat "$log"
    echo "warnings with kernels-gpu's attention-generic alone" >&2
    exit 1
fi
