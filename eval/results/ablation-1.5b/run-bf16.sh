#!/usr/bin/env bash
# Issue 34's bf16 eviction scoring (a bf16 cache scored by vdpbf16ps with the
# queries rounded to bf16, beacon-serve's behaviour since 2026-12-03 on
# machines with AVX-512 BF16) on the ablation set (gsm_symbolic seed 2,
# problems 0-99), budget 64, interval 16, the default eviction phase
# (spread). The binary (build/eval-bin-bf16) is built from the tree that
# added it; its pair is the phase-spread cell (binary b2c402b), which
# differs from it only in the scoring's precision (the kernel commit between
# them, 9766eda, computes the same integers). Resumable like run.sh.
#   setsid nohup eval/results/ablation-1.5b/run-bf16.sh > /tmp/ablation-bf16.log 2>&1 < /dev/null &
set -u
cd "$(dirname "$0")/../../.."
R=eval/results/ablation-1.5b
LOGS=${LOGS:-/tmp/ablation-1.5b}
mkdir -p "$LOGS"
BIN=${BIN:-build/eval-bin-bf16}
if [ ! -x "$BIN/beacon-serve" ]; then
  mkdir -p "$BIN" && cp build/bin/beacon-serve "$BIN/" && git rev-parse HEAD > "$BIN/COMMIT"
fi
common=(--model models/qwen2.5-coder-1.5b.gguf --family gsm_symbolic --seed 2 -n 100 --max-tokens 1024
  --concurrency 16 --bin "$BIN" --out "$R/records.jsonl" --interval 16)
.venv/bin/python tools/reasoning_eval.py run "${common[@]}" --variant "bf16-scoring" \
  --server-log "$LOGS/serve-bf16-scoring.log" --cells beacon:64
SUMMARY_ONLY=1 "$R/run.sh"
echo "bf16: done"
