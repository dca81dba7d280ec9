#!/usr/bin/env bash
# Builds what bench/run-user.sh runs on a GPU machine (which has no Rust), in release, into DIR:
#   DIR/user-kernels    examples/user-kernels' main: every user kernel against its CPU reference
#   DIR/bench           examples/user-kernels' bench binary: the timed records
#   DIR/device_checks   gpukern-device-checks' runner: the math, vector and collective trials
#
#   bash bench/build-user.sh DIR      (DIR inside the repository and listed in .git/info/exclude,
#                                      so that the device call carries it: carry ["DIR"])
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: bench/build-user.sh DIR}
mkdir -p "$dir"
cargo build --release -p user-kernels --bins
cargo test --release -p gpukern-device-checks-runner --test device_checks --no-run
cp target/release/user-kernels target/release/bench "$dir/"
checks=$(ls -t target/release/deps/device_checks-* | grep -v '\.d$' | head -n 1)
cp "$checks" "$dir/device_checks"
du -sh "$dir"/*
