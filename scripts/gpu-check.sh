#!/usr/bin/env bash
# The CUDA runner's check: every GPU test and every example on a real GPU. Fails on any test
# failure, on any test reported as ignored (a skipped GPU test counts as a failure here), and on
# any example that exits non-zero.
#
#   bash scripts/gpu-check.sh              build, then run (a GPU machine with Rust)
#   bash scripts/gpu-check.sh build DIR    build release test binaries and examples into DIR
#   bash scripts/gpu-check.sh run DIR      run what `build` put in DIR (a GPU machine, no Rust needed)
set -euo pipefail
cd "$(dirname "$0")/.."

build() {
    local dir=$1
    rm -rf "$dir" && mkdir -p "$dir/tests" "$dir/examples"
    local listing
    listing=$(mktemp)
    cargo test --workspace --release --no-run --message-format=json >"$listing"
    # Proc-macro crates' test binaries link the toolchain's libstd dynamically and would not start
    # on the GPU machine (and test nothing there): leave them out. So is `launch_types`: its
    # trybuild cases run cargo on the sources, and check the compiler, not the GPU. So are the
    # checks of the source tree itself (`docs`, `layout`, `floors`, `layout_docs`): they read the files, not the
    # GPU, and the GPU machine's copy of the tree may hold files deleted here since an earlier
    # call (seen: `host/raw/` and `bench/results/h200-logs/` at d0d5de9); CI runs them.
    # Each binary is copied as `<package>.<target>`, so that two packages' binaries of one name
    # stay apart (the example crate's kernel package `kernels` has a test binary `kernels` too).
    # The package's name from its id: `path+file:///dir#name@version`, or `...dir#version` where
    # the name is the folder's, or the older `name version (source)`.
    jq -r 'select(.reason == "compiler-artifact" and .profile.test == true and .executable != null
            and (.target.kind | index("proc-macro") | not) and (.target.name | IN("launch_types", "docs", "layout", "floors", "layout_docs") | not))
           | (.package_id
              | if test("#[^@]+@") then capture("#(?<n>[^@]+)@").n
                elif test("#") then (split("#")[0] | split("/") | last)
                else split(" ")[0] end) + "." + .target.name + " " + .executable' "$listing" |
        while read -r name exe; do cp "$exe" "$dir/tests/$name"; done
    rm -f "$listing"
    cargo build --release --examples
    local target
    target=$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)
    for src in examples/*.rs; do
        name=$(basename "$src" .rs)
        [ "$name" = bench ] && continue # the benchmark has its own command: bench/run.sh
        cp "$target/release/examples/$name" "$dir/examples/"
    done
    # The user-crate example (its own package): its kernels on the GPU and in the simulator.
    cargo build --release -p custom-kernels
    cp "$target/release/custom-kernels" "$dir/examples/"
    echo "gpu-check: built $(ls "$dir/tests" | wc -l) test binaries and $(ls "$dir/examples" | wc -l) examples into $dir"
}

run() {
    local dir=$1 passed=0 failed=0 gpus
    # The slow simulator trials too: the test command leaves them out, the GPU machine has cores.
    export GPUKERN_REQUIRE_GPU=1 GPUKERN_DEVICE=cuda GPUKERN_SLOW_TRIALS=1
    if [ -z "${GPUKERN_PTXAS:-}" ]; then
        for p in "$(command -v ptxas || true)" /usr/local/cuda/bin/ptxas .tools/ptxas/bin/ptxas; do
            if [ -n "$p" ] && [ -x "$p" ]; then export GPUKERN_PTXAS=$p; break; fi
        done
    fi
    nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader || true
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    for exe in "$dir"/tests/*; do
        local log name
        log=$(mktemp)
        name=$(basename "$exe")
        echo "== test $name"
        if "$exe" 2>&1 | tee "$log"; then
            # A CUDA trial reported as ignored means the GPU was not used: a failure here.
            # (Other ignored tests, such as the simulator suite's subprocess helper, are fine.)
            # The trials that need two GPUs (`cuda-2gpus::`) are skipped, not failed, on a
            # machine of one; on a machine of two or more they must run too.
            if grep -Eq '^test cuda::[^ ]+ +\.\.\. ignored' "$log"; then
                echo "gpu-check: FAIL $name: CUDA tests were skipped on a GPU machine"
                failed=$((failed + 1))
            elif [ "$gpus" -ge 2 ] && grep -Eq '^test cuda-2gpus::[^ ]+ +\.\.\. ignored' "$log"; then
                echo "gpu-check: FAIL $name: two-GPU tests were skipped on a machine of $gpus GPUs"
                failed=$((failed + 1))
            # The kernels binary proves that its CUDA trials launched every entry point of the
            # PTX; a run without that line did not check it.
            elif [ "$name" = gpukern.kernels ] && ! grep -q '^kernel coverage (cuda): all' "$log"; then
                echo "gpu-check: FAIL $name: no CUDA kernel coverage line"
                failed=$((failed + 1))
            # Likewise the device-checks binary for the kernels of gpukern-device/checks.
            elif [ "$name" = gpukern-device-checks-runner.device_checks ] &&
                ! grep -q '^kernel coverage (cuda, device checks): all' "$log"; then
                echo "gpu-check: FAIL $name: no CUDA device-checks coverage line"
                failed=$((failed + 1))
            else
                if grep -Eq '^test cuda-2gpus::[^ ]+ +\.\.\. ignored' "$log"; then
                    echo "gpu-check: $name: $(grep -Ec '^test cuda-2gpus::[^ ]+ +\.\.\. ignored' "$log") trials skipped: they need two GPUs, this machine has $gpus"
                fi
                passed=$((passed + 1))
            fi
        else
            echo "gpu-check: FAIL $name"
            failed=$((failed + 1))
        fi
        rm -f "$log"
    done
    for exe in "$dir"/examples/*; do
        echo "== example $(basename "$exe")"
        if "$exe"; then passed=$((passed + 1)); else
            echo "gpu-check: FAIL example $(basename "$exe")"
            failed=$((failed + 1))
        fi
    done
    echo "gpu-check: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}

case "${1:-all}" in
    build) build "${2:?usage: gpu-check.sh build DIR}" ;;
    run) run "${2:?usage: gpu-check.sh run DIR}" ;;
    all) build target/gpu-check && run target/gpu-check ;;
    *) echo "usage: gpu-check.sh [build DIR | run DIR]" >&2; exit 2 ;;
esac
