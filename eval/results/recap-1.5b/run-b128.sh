#!/usr/bin/env bash
# The grid's budget-128 cells (issue 45; phase 10 of run-grid.sh) on a binary of their own, from chain 0
# (README.md beside this file, "Budget 128 on a portable binary", says why): rkv, h2o and snapkv at the
# bytes of 128 slots, streaming at 128, and BeaconKV with the shipped defaults (R 4 K 8 U 16, this
# binary's own) at 128 slots and at the bytes of 128. 30 chains a cell (48 were planned; README.md,
# "Budget 128 stops at 30 chains") in blocks of 6, every cell on a
# block before the next, into b128.jsonl beside this script, which holds nothing from another binary.
#
# The binary: beacon-serve of c8c7b2b built with -DBEACON_CPU_ARCH=x86-64-v3 (AVX2, FMA, F16C), which
# chooses its kernels when compiled, not at run time, so any x86-64 machine with AVX2 runs the same
# instructions and writes the same text:
#   git worktree add /work/eval-b128 c8c7b2b && cd /work/eval-b128 && ln -s /work/main/.deps .deps
#   cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBEACON_CPU_ARCH=x86-64-v3 \
#     -DPython3_EXECUTABLE=/work/main/.venv/bin/python && cmake --build build --target beacon-serve
#   mkdir -p /work/main/build/eval-bin-b128 && cp build/bin/beacon-serve /work/main/build/eval-bin-b128/ \
#     && echo c8c7b2b7d0edd9974e7c858ef5bed09f354483c5 > /work/main/build/eval-bin-b128/COMMIT
# and its sha256 checked against the records' (b128.jsonl refuses another binary).
# Resumable; launched in the background like run-grid.sh:
#   setsid nohup eval/results/recap-1.5b/run-b128.sh > /tmp/recap-1.5b/b128.log 2>&1 < /dev/null &
#   sleep 20; for p in $(pgrep -f "run-b128|reasoning_eval|eval-bin"); do echo 19 > /proc/$p/autogroup; done
# --step-timeout-s=0: at nice 19 beside a build a step once ran past the 300 s watchdog, which ends the
# server and every chain in flight; the watchdog guards a serving replica, not a batch evaluation.
# Tables: .venv/bin/python tools/reasoning_eval.py summary eval/results/recap-1.5b/b128.jsonl
set -u
cd "$(dirname "$0")/../../.."
R=eval/results/recap-1.5b
LOGS=${LOGS:-/tmp/recap-1.5b}
mkdir -p "$LOGS"
BIN=${BIN:-build/eval-bin-b128}
[ -x "$BIN/beacon-serve" ] || { echo "run-b128.sh: $BIN/beacon-serve missing (build it as this script's header says)" >&2; exit 1; }
BLOCK=${BLOCK:-6}
N=${N:-30}
for ((start = ${START:-0}; start < N; start += BLOCK)); do
  nice -n 19 .venv/bin/python tools/reasoning_eval.py run --task recap --k 16 --prompt brief \
    --model models/qwen2.5-coder-1.5b.gguf --family simple_equations --seed 1 --start "$start" -n "$BLOCK" \
    --max-tokens 2048 --concurrency "${CONCURRENCY:-14}" --bin "$BIN" --interval 16 \
    --server-flag=--kv-pool-tokens=65536 --server-flag=--step-timeout-s=0 --server-log "$LOGS/serve-b128.log" --out "$R/b128.jsonl" \
    --cells rkv:b128 h2o:b128 snapkv:b128 streaming:128 beacon:128 beacon:b128 || exit 1
  .venv/bin/python tools/reasoning_eval.py summary "$R/b128.jsonl" --markdown "$R/b128-summary.md" > /dev/null
done
echo "run-b128.sh: done"
