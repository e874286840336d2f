#!/usr/bin/env bash
# BeaconKV's shipped defaults in the long-chain grid (issue 45). Since 2026-12-06 (cfaef0c) the defaults
# are R 4, K 8, U 16 (docs/fidelity.md "BeaconKV's defaults"), but the grid's pinned binary (0948606)
# runs R 16 K 16 U 64, so its BeaconKV cells measure the superseded defaults. This script gives the
# shipped defaults the grid's BeaconKV cells, on the same binary, chains, settings and blocks, with the
# three flags (the variant "r4k8u16", as the ablation and the confirmation named it):
#   1. b288 (bytes of 288 slots: 228 KV slots after its 60 slots' worth of state) to 200 chains: the
#      confirmation's own script and file (../recap-ablation-1.5b/run-confirm.sh, confirm.jsonl), which
#      holds this cell's first chains already; it waits for a confirmation run still going, then resumes;
#   2. 288 slots (the paper's framing: its state on top), then 128 slots and b128 (68 KV slots; the old
#      defaults' state exceeded the bytes of 128, the new one's does not), into defaults.jsonl beside
#      this script: 288 to 102 chains (blocks of 6, as the grid's cells of 100), 128 and b128 to 48, as
#      the grid's phase 10 (from 2026-12-06 11:30; README.md beside this script says why).
# Tables of everything at once (from the repository's root):
#   .venv/bin/python tools/reasoning_eval.py summary eval/results/recap-1.5b/grid.jsonl \
#     eval/results/recap-ablation-1.5b/confirm.jsonl eval/results/recap-1.5b/defaults.jsonl
# Resumable (each step skips what its file has). Launched in the background like run-grid.sh:
#   setsid nohup eval/results/recap-1.5b/run-defaults.sh > /tmp/recap-1.5b/defaults.log 2>&1 < /dev/null &
# then: for p in $(pgrep -f "run-defaults|run-confirm|reasoning_eval|eval-bin"); do echo 19 > /proc/$p/autogroup; done
set -u
cd "$(dirname "$0")/../../.."
R=eval/results/recap-1.5b
LOGS=${LOGS:-/tmp/recap-1.5b}
mkdir -p "$LOGS"
BIN=${BIN:-build/eval-bin-grid}
[ -x "$BIN/beacon-serve" ] || { echo "run-defaults.sh: $BIN/beacon-serve missing (the grid's pinned binary)" >&2; exit 1; }
VARIANT=r4k8u16
FLAGS=(--kv-recent-queries=4 --kv-beacons=8 --kv-fps-bound=16)
while pgrep -f "recap-ablation-1.5b/run-confirm.sh" > /dev/null; do sleep 60; done
N=200 VARIANT=$VARIANT eval/results/recap-ablation-1.5b/run-confirm.sh "${FLAGS[@]}" || exit 1
server_flags=()
for f in "${FLAGS[@]}"; do server_flags+=(--server-flag="$f"); done
BLOCK=${BLOCK:-6}
for step in "beacon:288/100" "beacon:128 beacon:b128/48"; do
  cells=${step%/*} n=${step##*/}
  for ((start = 0; start < n; start += BLOCK)); do
    # shellcheck disable=SC2086  # $cells: one or two cell specs
    nice -n 19 .venv/bin/python tools/reasoning_eval.py run --task recap --k 16 --prompt brief \
      --model models/qwen2.5-coder-1.5b.gguf --family simple_equations --seed 1 --start "$start" -n "$BLOCK" \
      --max-tokens 2048 --concurrency "${CONCURRENCY:-14}" --bin "$BIN" --interval 16 \
      --server-flag=--kv-pool-tokens=65536 "${server_flags[@]}" --variant "$VARIANT" \
      --server-log "$LOGS/serve-defaults.log" --out "$R/defaults.jsonl" --cells $cells || exit 1
  done
done
echo "run-defaults.sh: done"
