#!/usr/bin/env bash
# The long-chain grid (issue 45): recap of 16 simple_equations, prompt brief, seed 1, on the 1.5B model,
# through one beacon-serve (README.md beside this file). Resumable: rerun after an interruption and it
# skips what grid.jsonl has. Launched in the background as
#   setsid nohup eval/results/recap-1.5b/run-grid.sh > /tmp/recap-1.5b/grid.log 2>&1 < /dev/null &
# then its CPU group lowered (nice alone does not, with autogroup scheduling):
#   for p in $(pgrep -f "run-grid|reasoning_eval|eval-bin-grid"); do echo 19 > /proc/$p/autogroup; done
#
# Chains go in blocks of BLOCK, every cell of a phase on a block before the next block, so that the
# cells stay paired and even wherever the run is stopped (two cores give about 20 tokens a second: one
# block of 6 chains in 7 cells is about 45 minutes). A cell stops at its own N.
#   phase 25 (first): budget 288 generated slots, 25% of the full cache's mean chain (1,166 tokens):
#     full; beacon, rkv, h2o and snapkv with the bytes of 288 slots (policy:b288: each keeps the slots
#     its own state leaves); beacon at 288 slots (slots-matched; the paper's framing); streaming at 288
#     (it holds no state, so its slot and byte cells are one). N: 200 for full and beacon, rkv; 100 others.
#   phase 10: budget 128 (11%): rkv, h2o and snapkv at b128, streaming at 128. N 48 (768 recap answers a
#     cell; from 2026-12-06 11:30, was 100: README.md beside this file says why).
# BeaconKV's cells here run the pinned binary's defaults, R 16 K 16 U 64. Since 2026-12-06 the defaults are
# R 4 K 8 U 16, so from then the old defaults' cells stop where they stand (beacon:b288 at 126 chains,
# beacon:288 at 102) and phase 10 has none: the shipped defaults' cells (b288 to 200; 288, 128 and b128)
# run beside this grid in run-defaults.sh, on the same binary with those three flags.
# max_tokens 2048: the full cache's longest pilot chain is 1,466 tokens; a chain that loops to the limit
# scores nothing either way, and 2048 stops it a third sooner than the pilot's 3000.
set -u
cd "$(dirname "$0")/../../.."
R=eval/results/recap-1.5b
LOGS=${LOGS:-/tmp/recap-1.5b}  # beacon-serve's log (not committed)
mkdir -p "$LOGS"
# The binary is pinned (a copy of build/bin/beacon-serve and its commit, which must be clean), so later
# builds of the tree do not change it under the run; each record names its sha256 and grid.jsonl refuses
# another binary.
BIN=${BIN:-build/eval-bin-grid}
# ALLOW_MIXED=1: append although grid.jsonl's earlier rows name another binary (the pinned commit rebuilt on
# another machine; README.md beside this file says when and how it was checked to give the same text).
if [ ! -x "$BIN/beacon-serve" ]; then
  if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "run-grid.sh: the tree has uncommitted changes; commit, build, then pin" >&2
    exit 1
  fi
  mkdir -p "$BIN" && cp build/bin/beacon-serve "$BIN/" && git rev-parse HEAD > "$BIN/COMMIT"
fi
BLOCK=${BLOCK:-6}
CONCURRENCY=${CONCURRENCY:-14}
PHASES=${PHASES:-25 10}
cells_of() {  # phase, first chain of the block
  case "$1" in
    25) if [ "$2" -lt 100 ]; then echo "full beacon:b288 beacon:288 rkv:b288 h2o:b288 snapkv:b288 streaming:288"
        elif [ "$2" -lt 126 ]; then echo "full beacon:b288 rkv:b288"
        elif [ "$2" -lt 200 ]; then echo "full rkv:b288"; fi ;;
    10) if [ "$2" -lt 48 ]; then echo "rkv:b128 h2o:b128 snapkv:b128 streaming:128"; fi ;;
  esac
}
for phase in $PHASES; do
  for ((start = ${START:-0}; start < 200; start += BLOCK)); do
    cells=$(cells_of "$phase" "$start")
    [ -z "$cells" ] && break
    nice -n 19 .venv/bin/python tools/reasoning_eval.py run --task recap --k 16 --prompt brief \
      --model models/qwen2.5-coder-1.5b.gguf --family simple_equations --seed 1 --start "$start" -n "$BLOCK" \
      --max-tokens 2048 --concurrency "$CONCURRENCY" --bin "$BIN" --interval 16 \
      --server-flag=--kv-pool-tokens=65536 --server-log "$LOGS/serve-grid.log" --out "$R/grid.jsonl" \
      ${ALLOW_MIXED:+--allow-mixed-binaries} --cells $cells || exit 1
    .venv/bin/python tools/reasoning_eval.py summary "$R/grid.jsonl" --markdown "$R/grid-summary.md" > /dev/null
  done
done
echo "run-grid.sh: done"
