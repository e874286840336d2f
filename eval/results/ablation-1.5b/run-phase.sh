#!/usr/bin/env bash
# Issue 34's eviction phase (--kv-eviction-phase spread, beacon-serve's
# default since 2026-12-03) against the published schedule (aligned), on the
# ablation set (gsm_symbolic seed 2, problems 0-99), budget 64, interval 16.
# Both cells run one binary built from the tree that added the phase
# (build/eval-bin-phase), so the pair differs only in the phase; the
# "phase-aligned" cell against the ablation table's default (binary 2ad2ded)
# shows what the kernel changes between the two binaries did to the results.
# Resumable like run.sh.
#   setsid nohup eval/results/ablation-1.5b/run-phase.sh > /tmp/ablation-phase.log 2>&1 < /dev/null &
set -u
cd "$(dirname "$0")/../../.."
R=eval/results/ablation-1.5b
LOGS=${LOGS:-/tmp/ablation-1.5b}
mkdir -p "$LOGS"
BIN=${BIN:-build/eval-bin-phase}
if [ ! -x "$BIN/beacon-serve" ]; then
  mkdir -p "$BIN" && cp build/bin/beacon-serve "$BIN/" && git rev-parse HEAD > "$BIN/COMMIT"
fi
common=(--model models/qwen2.5-coder-1.5b.gguf --family gsm_symbolic --seed 2 -n 100 --max-tokens 1024
  --concurrency 16 --bin "$BIN" --out "$R/records.jsonl" --interval 16)
for phase in aligned spread; do
  nice -n 19 .venv/bin/python tools/reasoning_eval.py run "${common[@]}" --variant "phase-$phase" \
    --server-flag=--kv-eviction-phase="$phase" --server-log "$LOGS/serve-phase-$phase.log" --cells beacon:64
done
SUMMARY_ONLY=1 "$R/run.sh"
echo "phase: done"
