#!/usr/bin/env bash
# The user kernels on a GPU in one call: what bench/build-user.sh built into DIR, then the Python
# peers, into $OUT (the device call's output folder; ./out where there is none):
#   1. DIR/user-kernels: every user kernel against its CPU reference, on the simulator and the GPU;
#   2. compute-sanitizer memcheck and racecheck of the user kernels on small shapes (where the
#      tool is installed; SANITIZE=0 skips them);
#   3. DIR/device_checks: the CUDA trials of the math functions' bounds, the vector hints and the
#      collectives (their worst errors in device-checks.log);
#   4. DIR/bench and bench/peers_user.py: the records, merged into $OUT/user.jsonl.
#
#   bash bench/run-user.sh DIR
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: bench/run-user.sh DIR}
out=${OUT:-out}
mkdir -p "$out"
export GPUKERN_REQUIRE_GPU=1
GPUKERN_DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || echo unknown)
export GPUKERN_DRIVER
export GPUKERN_GIT_REV=${GPUKERN_GIT_REV:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
status=0
step() { echo "== $*"; }

step "user kernels against their references"
"$dir/user-kernels" 2>&1 | tee "$out/user-kernels.log" || status=1

if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
        step "compute-sanitizer $tool (small shapes)"
        USER_KERNELS_SMALL=1 timeout 90 compute-sanitizer --tool "$tool" --error-exitcode 3 "$dir/user-kernels" \
            >"$out/sanitize-$tool.log" 2>&1 || status=1
        tail -n 3 "$out/sanitize-$tool.log"
    done
fi

step "device checks: math, vectors, collectives"
for family in cuda::math cuda::vectors cuda::collectives; do
    "$dir/device_checks" "$family" --nocapture 2>&1 | tee -a "$out/device-checks.log" || status=1
done

step "timed records"
"$dir/bench" "$out/user-rust.jsonl" 2>&1 | tee "$out/bench.log" || status=1
python3 bench/peers_user.py "$out/user-peers.jsonl" 2>&1 | tee "$out/peers.log" || status=1
cat "$out/user-rust.jsonl" "$out/user-peers.jsonl" >"$out/user.jsonl" 2>/dev/null
python3 - "$out/user.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
copy = max((r["gbps"] for r in rows if r["kernel"] == "copy" and r.get("passed")), default=None)
print(f"{'kernel':16} {'impl':14} {'shape':10} {'ms':>9} {'GB/s':>8} {'of copy':>8} {'TFLOP/s':>8}")
for r in rows:
    if r.get("passed") and r["kernel"] != "copy":
        share = f"{r['gbps'] / copy:8.0%}" if copy else ""
        tflops = f"{r['tflops']:8.1f}" if r.get("tflops") is not None else ""
        share = "" if tflops else share
        print(f"{r['kernel']:16} {r['impl']:14} {r['shape']:10} {r['median_ms']:9.4f} {r['gbps']:8.0f} {share:8} {tflops}")
    elif not r.get("passed"):
        print(f"{r['kernel']:16} {r['impl']:14} FAILED {r.get('error', r.get('rel_err'))}")
print(f"copy ceiling: {copy} GB/s")
PY
exit $status
