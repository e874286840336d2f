#!/usr/bin/env bash
# The ablation's winner on the grid's own chains (issue 45: "confirm the winner on the evaluation seed"):
# simple_equations seed 1, the grid's settings and pinned binary, at b288, chains 0..N-1 in blocks, into
# confirm.jsonl beside this script (not grid.jsonl, which the grid appends to meanwhile). Its pairs with
# the grid's default beacon:b288 cell come from both files read as one (from the repository's root):
#   cat eval/results/recap-1.5b/grid.jsonl "$R"/confirm.jsonl > /tmp/both.jsonl   # R as below
#   .venv/bin/python tools/reasoning_eval.py summary /tmp/both.jsonl
# (a variant is a cell of its own, so the summary's "Pairs at budget 288 in bytes" has variant against
# default on the same chains: exact McNemar). A default changes only on a significant gain there.
# Usage: VARIANT=r4k8u16 eval/results/recap-ablation-1.5b/run-confirm.sh --kv-recent-queries=4 \
#          --kv-beacons=8 --kv-fps-bound=16
# (the variant's name and flags as in run.sh). Resumable; launched like run.sh (setsid nohup, autogroup 19).
set -u
cd "$(dirname "$0")/../../.."
R=eval/results/recap-ablation-1.5b
: "${VARIANT:?name the variant (VARIANT=..., as in run.sh)}"
[ "$#" -gt 0 ] || { echo "run-confirm.sh: give the variant's server flags" >&2; exit 1; }
LOGS=${LOGS:-/tmp/recap-ablation}
mkdir -p "$LOGS"
BIN=${BIN:-build/eval-bin-grid}
[ -x "$BIN/beacon-serve" ] || { echo "run-confirm.sh: $BIN/beacon-serve missing (the grid's pinned binary)" >&2; exit 1; }
BLOCK=${BLOCK:-6}
N=${N:-72}
flags=()
for f in "$@"; do flags+=(--server-flag="$f"); done
for ((start = ${START:-0}; start < N; start += BLOCK)); do
  nice -n 19 .venv/bin/python tools/reasoning_eval.py run --task recap --k 16 --prompt brief \
    --model models/qwen2.5-coder-1.5b.gguf --family simple_equations --seed 1 --start "$start" -n "$BLOCK" \
    --max-tokens 2048 --concurrency "${CONCURRENCY:-14}" --bin "$BIN" --interval 16 \
    --server-flag=--kv-pool-tokens=65536 "${flags[@]}" --variant "$VARIANT" \
    --server-log "$LOGS/serve-confirm-$VARIANT.log" --out "$R/confirm.jsonl" --cells beacon:b288 || exit 1
done
echo "run-confirm.sh: done"
