#!/usr/bin/env bash
# The recap task's pilot (issue 45): the full cache only, to choose k (README.md beside this file).
# Resumable: rerun after an interruption and it skips what pilot.jsonl has.
# Launched in the background as
#   setsid nohup eval/results/recap-1.5b/run-pilot.sh > /tmp/recap-1.5b/pilot.log 2>&1 < /dev/null &
set -u
cd "$(dirname "$0")/../../.."
R=eval/results/recap-1.5b
LOGS=${LOGS:-/tmp/recap-1.5b}  # beacon-serve's log (not committed)
mkdir -p "$LOGS"
# The binary is pinned (a copy of build/bin/beacon-serve and its commit), so later builds of the tree
# do not change it under the run; each record names its sha256 and the records file refuses another.
# A tree with uncommitted changes to tracked files makes COMMIT "<sha>+dirty", the diff kept beside it.
BIN=${BIN:-build/eval-bin-recap}
if [ ! -x "$BIN/beacon-serve" ]; then
  mkdir -p "$BIN" && cp build/bin/beacon-serve "$BIN/"
  if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "$(git rev-parse HEAD)+dirty" > "$BIN/COMMIT" && git diff HEAD > "$BIN/DIRTY.diff"
  else
    git rev-parse HEAD > "$BIN/COMMIT"
  fi
fi
# Chains 0..N-1 of FAMILY at seed 1 (chain c holds problems c*k .. c*k+k-1): the evaluation seed, so
# the chosen setting's full-cache chains pair with the grid's cells.
# PROMPT names the instruction (tools/chain_task.py PROMPTS). The pilots, in order (README.md):
#   run-pilot.sh                                   gsm_symbolic, brief, k 4 and 6
#   PROMPT=steps KS="4 5" run-pilot.sh             gsm_symbolic, steps, k 4 (k 5 stopped: no better)
#   FAMILY=simple_equations KS=8 run-pilot.sh      simple_equations, brief, k 8
#   FAMILY=simple_equations KS=16 run-pilot.sh     simple_equations, brief, k 16 (chosen)
#   FAMILY=simple_equations KS=16 N=6 CELLS="beacon:128 streaming:128" CONCURRENCY=12 run-pilot.sh
#                                                  a first look at compression at 10% of the mean chain:
#                                                  started 21:34, stopped 22:03 with no chain done (the
#                                                  server had ~9% of a core beside a CI build); not run
N=${N:-12}
PROMPT=${PROMPT:-brief}
FAMILY=${FAMILY:-gsm_symbolic}
CELLS=${CELLS:-full}
CONCURRENCY=${CONCURRENCY:-8}
for k in ${KS:-4 6}; do
  nice -n 19 .venv/bin/python tools/reasoning_eval.py run --task recap --k "$k" --prompt "$PROMPT" --model models/qwen2.5-coder-1.5b.gguf \
    --family "$FAMILY" --seed 1 -n "$N" --max-tokens 3000 --concurrency "$CONCURRENCY" --bin "$BIN" --interval 16 \
    --server-log "$LOGS/serve-pilot.log" --out "$R/pilot.jsonl" --cells $CELLS
  .venv/bin/python tools/reasoning_eval.py summary "$R/pilot.jsonl" --markdown "$R/pilot-summary.md" > /dev/null
done
echo "run-pilot.sh: done"
