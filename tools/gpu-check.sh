#!/usr/bin/env bash
# The CUDA engine's checks on a GPU machine, in one run (issue #9): builds
# what it needs, runs the CUDA tests (each kernel against its CPU reference,
# the CUDA backend against the CPU backend), then the benchmarks, and prints
# a short table last. Budget: 8 minutes on an H200 with 16 cores.
#
# The GPU machine has CUDA, CMake, Ninja and a compiler, but no Debian -dev
# packages and no network, so:
#   1. here:  tools/gpu-deps.sh     (abseil, GoogleTest, nlohmann-json into .gpu-deps/)
#   2. there: tools/gpu-check.sh    with .gpu-deps carried (device tool: carry [".gpu-deps"])
# The default model (models/default.gguf, ~94 MiB) is over the device tool's
# 64 MiB transfer limit; its logits test skips when the file is absent.
#
# Environment: OUT (results folder; default build-gpu/out), JOBS (default
# nproc), BENCH_ARGS (extra beacon-bench cuda arguments), SKIP_BENCH=1.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
deps="$root/.gpu-deps/root/usr"
out="${OUT:-$root/build-gpu/out}"
jobs="${JOBS:-$(nproc)}"
mkdir -p "$out"
t0=$(date +%s)
stamp() { echo "[gpu-check +$(( $(date +%s) - t0 ))s] $*"; }

if [ ! -d "$deps" ]; then
  echo "gpu-check: $deps is missing: run tools/gpu-deps.sh on the Debian machine and carry .gpu-deps" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

stamp "configure (no serving: no gRPC, protobuf or prometheus-cpp)"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBEACON_WITH_SERVING=OFF \
  -DCMAKE_PREFIX_PATH="$deps" -DBEACON_CPU_ARCH=native > "$out/configure.log" 2>&1 \
  || { tail -40 "$out/configure.log"; exit 1; }
stamp "build cuda_tests beacon-bench (-j$jobs)"
cmake --build build-gpu --target cuda_tests beacon-bench -j "$jobs" > "$out/build.log" 2>&1 \
  || { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }

stamp "CUDA tests"
build-gpu/bin/cuda_tests --gtest_output="json:$out/cuda_tests.json" 2>&1 | tee "$out/cuda_tests.log" | \
  grep -E "^\[ *(RUN|OK|FAILED|SKIPPED|PASSED) *\]|worst|beacon on device|Failure|error" | grep -v "^\[ RUN" 
tests_rc=${PIPESTATUS[0]}

bench_rc=0
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  stamp "benchmarks (Qwen3-4B-shaped dummy model)"
  # shellcheck disable=SC2086
  build-gpu/bin/beacon-bench cuda --model "dummy:$root/configs/qwen3-4b.json" --batches 1,16,64 --context 1024 \
    --steps 64 --kv-budget 2048 --pool-seqs 16 --prompt-len 256 --output-len 8192 --throughput-steps 512 \
    --json "$out/bench.json" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log"
  bench_rc=${PIPESTATUS[0]}
fi

stamp "done"
echo
echo "==================== gpu-check summary ===================="
echo "GPU: $(cat "$out/gpu.txt")"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
try:
    t = json.load(open(os.path.join(out, "cuda_tests.json")))
    n = t.get("tests", 0); f = t.get("failures", 0); d = t.get("disabled", 0)
    skipped = sum(1 for s in t.get("testsuites", []) for c in s.get("testsuite", [])
                  if c.get("result") == "SKIPPED" or c.get("status") == "NOTRUN")
    print(f"cuda_tests: {n} tests, {f} failed, {skipped} skipped")
    for s in t.get("testsuites", []):
        for c in s.get("testsuite", []):
            if c.get("failures"):
                print(f"  FAILED {s['name']}.{c['name']}")
except Exception as e:
    print(f"cuda_tests: no results ({e})")
try:
    b = json.load(open(os.path.join(out, "bench.json")))
    print(f"device {b['device']}, copy bandwidth {b['copy_bandwidth_tbps']:.2f} TB/s")
    print(f"{'batch':>6} {'step ms':>9} {'of roofline':>12}   target >= 70% at batch 1")
    for r in b["decode"]:
        print(f"{r['batch']:>6} {r['step_ms']:>9.3f} {100*r['roofline_fraction']:>11.1f}%")
    o = b["beacon_overhead"]
    print(f"BeaconKV overhead: {100*o['overhead']:.2f}% of the decode step   target <= 5%")
    for r in b["throughput"]:
        print(f"{r['policy']:>14}: {r['concurrency']} concurrent, {r['tokens_per_second']:.0f} tok/s")
    print(f"throughput ratio beacon/full: {b['throughput_ratio']:.2f}x   target >= 4.3x")
except Exception as e:
    print(f"benchmarks: no results ({e})")
PY
[ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]
