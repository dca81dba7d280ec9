#!/usr/bin/env bash
# gpukern's test command (README "Testing"; CI runs it through .ci/run).
#
# Installs what the tests need on a fresh machine, then runs formatting, lints and every test:
#   1. the pinned nightly with rust-src, which build.rs uses to compile the kernels to PTX;
#   2. ptxas, from PyPI's nvidia-cuda-nvcc wheel, which the PTX tests assemble the kernels with;
#   3. cargo fmt --check, cargo clippy -D warnings, cargo doc (no warnings), cargo test (all but
#      the examples, which clippy checks), over the
#      one workspace (gpukern, gpukern-build, gpukern-device and its checks, kernels-gpu,
#      examples/custom-kernels), sharing one target directory;
#      and gpukern checked with each kernel-family feature alone and with none
#      (scripts/check-features.sh);
#   4. examples/custom-kernels copied outside the repository and built as a user's crate
#      (scripts/outside-crate.sh), run in the simulator with its tests (beside the docs and
#      features steps, in a target directory of its own; reported at the end).
# At the end it prints how long each step took.
# Without a GPU the CUDA tests are reported as ignored and everything else runs: the kernels'
# real code in the CPU simulator, the CPU references, the launch math and the PTX checks.
set -euo pipefail
cd "$(dirname "$0")/.."

NIGHTLY=nightly-2026-05-20
NVCC_WHEEL=nvidia-cuda-nvcc==13.5.37

# Each step's name and seconds, printed as a table at the end (also when a step fails).
timings=()
current=""
started=0
finish_step() {
    if [ -n "$current" ]; then
        timings+=("$(printf '%6d s  %s' $(( $(date +%s) - started )) "$current")")
    fi
}
step() {
    finish_step
    current="$*"
    started=$(date +%s)
    printf '\n== %s\n' "$*"
}
report() {
    local rc=$?
    # A step that failed before the background job's own step: stop it.
    if [ -n "${outside_pid:-}" ]; then kill "$outside_pid" 2>/dev/null || true; fi
    finish_step
    current=""
    printf '\n== time per step\n'
    printf '%s\n' "${timings[@]}"
    printf '%6d s  total\n' $(( $(date +%s) - script_start ))
    exit $rc
}
script_start=$(date +%s)
trap report EXIT

step "toolchains"
for component in rustfmt clippy; do
    rustup component list --installed | grep -q "^$component" || rustup component add "$component"
done
sysroot=$(rustup run "$NIGHTLY" rustc --print sysroot 2>/dev/null || true)
if [ -z "$sysroot" ] || [ ! -d "$sysroot/lib/rustlib/src/rust/library/core" ]; then
    rustup toolchain install "$NIGHTLY" --profile minimal --component rust-src
fi
rustup run "$NIGHTLY" rustc --version

step "ptxas"
if [ -z "${GPUKERN_PTXAS:-}" ]; then
    ptxas=.tools/ptxas/bin/ptxas
    if [ ! -x "$ptxas" ]; then
        tmp=$(mktemp -d)
        python3 -m pip download --quiet --disable-pip-version-check --no-deps --dest "$tmp" "$NVCC_WHEEL"
        python3 - "$tmp" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/nvidia_cuda_nvcc-*.whl")[0]
zipfile.ZipFile(wheel).extract("nvidia/cu13/bin/ptxas", sys.argv[1])
PY
        mkdir -p .tools/ptxas/bin
        cp "$tmp/nvidia/cu13/bin/ptxas" "$ptxas"
        chmod +x "$ptxas"
        rm -rf "$tmp"
    fi
    export GPUKERN_PTXAS="$PWD/$ptxas"
fi
"$GPUKERN_PTXAS" --version | tail -n 1

step "format"
cargo fmt --all --check

step "lints"
cargo clippy --workspace --all-targets -- -D warnings

# The example as a crate outside the repository (scripts/outside-crate.sh) runs beside the docs
# and features steps, which keep about one of the two cores busy: in a target directory of its
# own (so that no cargo lock makes either wait; its dependencies built there anew, as they were
# in the shared one, whose features differ), the PTX cache the lints step filled shared. Its
# output is shown, and its status checked, in its own step at the end.
outside_log=$(mktemp)
outside_target=$(mktemp -d)
(GPUKERN_PTX_CACHE="${GPUKERN_PTX_CACHE:-$PWD/target/gpukern-ptx}" OUTSIDE_TARGET_DIR="$outside_target" \
    CARGO_BUILD_JOBS=1 bash scripts/outside-crate.sh) >"$outside_log" 2>&1 &
outside_pid=$!

# The API docs build without warnings: no broken or private intra-doc links.
step "docs"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

# gpukern with each kernel-family feature alone and with none: no errors, no warnings (cargo
# check, no PTX built; a few seconds per feature set).
step "features"
bash scripts/check-features.sh

# The tests' targets (libraries, binaries, integration tests) and the doc tests, not the examples:
# `cargo test`'s default also builds every example, which the lints step has already checked
# (`--all-targets`) and no test runs; their build was about 30 s of one core on the 2-core machine.
# `--tests` selects the targets whose `test` flag is on; `--lib` would also select the libraries
# that turn it off (`kernels-gpu`, the device checks' crates: no unit tests), and built
# `kernels-gpu` again, optimised, for an empty harness (13.7 s of a core,
# bench/experiments/build-times/build-times-9caa5bd.md).
step "build the tests"
cargo test --workspace --tests --no-run

step "tests"
# The typed launchers' compile-fail test (gpukern-launch-types: trybuild type-checks its cases
# with cargo in a target directory of its own, about 1.4 of the 2 cores for 45 s) runs beside the
# other test binaries, as its own binary: a second `cargo test` on this target directory would
# wait for the first's lock, which cargo holds while its tests run.
# The binary the step before built (the workspace's features; `-p` alone would build another).
launch_types=$(cargo test --workspace --tests --no-run --message-format=json |
    jq -r 'select(.reason == "compiler-artifact" and .target.name == "launch_types" and .executable != null) | .executable')
[ -x "$launch_types" ] || { echo "no launch_types test binary" >&2; exit 1; }
launch_types_log=$(mktemp)
(cd launch-types && CARGO_MANIFEST_DIR=$PWD CARGO=$(command -v cargo) "$launch_types") >"$launch_types_log" 2>&1 &
launch_types_pid=$!
cargo test --workspace --exclude gpukern-launch-types --tests || {
    rc=$?
    kill "$launch_types_pid" 2>/dev/null || true
    exit $rc
}
launch_types_rc=0
wait "$launch_types_pid" || launch_types_rc=$?
printf '\n     Running the launch_types test (gpukern-launch-types), beside the others\n'
cat "$launch_types_log"
rm -f "$launch_types_log"
[ "$launch_types_rc" = 0 ] || { echo "the launch_types test failed (exit $launch_types_rc)" >&2; exit 1; }
cargo test --workspace --doc

step "the example as a crate outside the repository (started before the docs)"
outside_rc=0
wait "$outside_pid" || outside_rc=$?
cat "$outside_log"
rm -rf "$outside_log" "$outside_target"
[ "$outside_rc" = 0 ] || { echo "the example outside the repository failed (exit $outside_rc)" >&2; exit 1; }
