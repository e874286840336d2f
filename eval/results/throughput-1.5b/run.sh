#!/usr/bin/env bash
# Issue 32's throughput table: the CPU counterpart of the paper's 4.3x. One
# beacon-serve per policy on the 1.5B model, a KV pool sized for N = 4
# full-length sequences, and a closed loop of 16 GSM-Symbolic chat requests
# that each decode exactly MAX_TOKENS tokens (--ignore-eos: every policy does
# the same work, as a reasoning model's long chain would). Admission reserves
# each request's peak footprint (prompt + max_tokens under full, prompt +
# budget + interval under a compressing policy), so the freed memory turns
# into concurrency; the table reports the concurrency reached (the server's
# running gauge, polled) and the output tok/s.
#   eval/results/throughput-1.5b/run.sh            # all policies, ~15 min on 2 cores
#   POLICIES="full beacon" eval/results/throughput-1.5b/run.sh
# Writes results.jsonl (one line per policy, appended) beside this file.
set -eu
cd "$(dirname "$0")/../../.."
R=eval/results/throughput-1.5b
OUT=${OUT:-$R/results.jsonl}
BIN=${BIN:-build/eval-bin}
MODEL=${MODEL:-models/qwen2.5-coder-1.5b.gguf}
MAX_TOKENS=${MAX_TOKENS:-384}
REQUESTS=${REQUESTS:-16}
BUDGET=${BUDGET:-64}
INTERVAL=${INTERVAL:-16}
POLICIES=${POLICIES:-full beacon rkv snapkv h2o streaming random}
TMP=${TMP_DIR:-/tmp/throughput-1.5b}
mkdir -p "$TMP"
# Prompts: the first 16 problems of the accuracy run (gsm_symbolic, seed 1),
# as reasoning_eval.py words them.
.venv/bin/python - "$TMP/prompts.jsonl" "$REQUESTS" <<'PY'
import json, sys
sys.path.insert(0, "tools")
import reasoning_eval as r
_, entries = r.make_problems("gsm_symbolic", 1, int(sys.argv[2]))
with open(sys.argv[1], "w") as f:
    for e in entries:
        f.write(json.dumps({"messages": [{"role": "user", "content": e["question"] + "\n\n" + r.INSTRUCTION}]}) + "\n")
PY
# The longest of these prompts is 189 tokens in the chat template (the full
# cells' prompt_tokens in ../reasoning-1.5b/records.jsonl, indices 0-15): a
# full-length sequence holds at most 192 + MAX_TOKENS slots, and the pool
# holds N = 4 of them.
POOL=$(( 4 * (192 + MAX_TOKENS) ))
for p in $POLICIES; do
  log="$TMP/serve-$p.log"
  "$BIN/beacon-serve" --model "$MODEL" --host 127.0.0.1 --grpc-port 0 --http-port 0 --threads 2 \
    --kv-pool-tokens "$POOL" --max-running 16 --kv-interval "$INTERVAL" > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "ready grpc=" "$log" && break; sleep 0.5; done
  grpc=$(grep -o "ready grpc=[^ ]*" "$log" | sed 's/.*://')
  http=$(grep -o "http=[^ ]*" "$log" | head -1 | sed 's/.*://')
  # The running gauge, every 0.5 s, while the load runs.
  ( while kill -0 $pid 2>/dev/null; do
      curl -s "http://127.0.0.1:$http/metrics" | awk '/^beacon_num_requests_running/ {print $2}'
      sleep 0.5
    done ) > "$TMP/running-$p.txt" &
  poller=$!
  budget_flag=()
  [ "$p" != full ] && budget_flag=(--kv-budget "$BUDGET")
  build/bin/beacon-loadtest --server "127.0.0.1:$grpc" --concurrency 16 --requests "$REQUESTS" \
    --prompts "$TMP/prompts.jsonl" --output-len "fixed:$MAX_TOKENS" --ignore-eos --kv-policy "$p" \
    "${budget_flag[@]}" --json "$TMP/load-$p.json" > "$TMP/load-$p.txt" 2>&1 || true
  kill $poller 2>/dev/null || true
  kill -TERM $pid; wait $pid 2>/dev/null || true
  .venv/bin/python - "$p" "$BUDGET" "$INTERVAL" "$POOL" "$MAX_TOKENS" "$TMP/load-$p.json" "$TMP/running-$p.txt" \
    >> "$OUT" <<'PY'
import json, sys
p, budget, interval, pool, max_tokens, load, running = sys.argv[1:8]
j = json.load(open(load))
runs = [float(x) for x in open(running).read().split() if x.strip()]
print(json.dumps({"policy": p, "budget": 0 if p == "full" else int(budget), "interval": int(interval),
                  "pool_slots": int(pool), "max_tokens": int(max_tokens), "running_max": max(runs, default=0),
                  "running_mean_busy": sum(x for x in runs if x > 0) / max(1, sum(1 for x in runs if x > 0)),
                  "summary": {k: v for k, v in j["summary"].items() if k in
                              ("duration_s", "output_throughput", "output_tokens", "prompt_tokens", "succeeded",
                               "failed", "tpot_ms", "e2e_ms", "ttft_ms", "finish_reasons")}}))
PY
  echo "throughput: $p done"
done
# The table (the last record of each policy).
.venv/bin/python - "$OUT" > "$R/results.md" <<'PY'
import json, sys
last = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    last[r["policy"]] = r
full = last.get("full", {}).get("summary", {}).get("output_throughput")
print("| policy | budget / interval | pool slots | most running | output tok/s | vs full | TPOT median ms | E2E median s |")
print("|---|---|---|---|---|---|---|---|")
for p in ("full", "beacon", "rkv", "snapkv", "h2o", "streaming", "random"):
    if p not in last:
        continue
    r, s = last[p], last[p]["summary"]
    bi = "-" if p == "full" else f"{r['budget']} / {r['interval']}"
    ratio = f"{s['output_throughput'] / full:.2f}x" if full else "-"
    print(f"| {p} | {bi} | {r['pool_slots']} | {r['running_max']:.0f} | {s['output_throughput']:.1f} | {ratio} | "
          f"{s['tpot_ms']['median']:.0f} | {s['e2e_ms']['median'] / 1000:.1f} |")
PY
cat "$R/results.md"
