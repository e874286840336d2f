#!/usr/bin/env bash
# Side-by-side CPU decode and prefill throughput: beacon-bench against
# llama.cpp (llama-cpp-python) on the same GGUF, thread count and workload.
#
#   tools/compare-llamacpp.sh            # after `make build model`
#   THREADS=4 BATCHES=1,8 tools/compare-llamacpp.sh
#   BATCHES= PREFILL_LEN=1024,2048,4096 tools/compare-llamacpp.sh   # prefill only
#   CONTEXTS=64,2048,4096 tools/compare-llamacpp.sh   # batch-1 decode at each context
#
# Environment: THREADS (default 2), BATCHES (default 1,4,16,64; empty skips
# decode), PROMPT_LEN (default 32), STEPS (default 32), PREFILL_LEN (prompt
# lengths of the prefill comparison, default 4096; empty skips it: beacon
# prefills in PREFILL_CHUNK-token steps as the scheduler does, default 256,
# llama.cpp in one llama_decode of the whole prompt), MODEL (default models/default.gguf),
# BUILD_DIR (default build), PYTHON (default .venv/bin/python), LLAMACPP_ARGS (extra
# flags for tools/llamacpp_bench.py, e.g. "--kv-unified" or "--flash-attn off"),
# LLAMACPP_OMP_WAIT (default passive; "default" leaves OMP_WAIT_POLICY alone).
# llama.cpp's OpenMP threads spin at a barrier after every op by default; on a
# busy machine that collapses its throughput 10-40x (a descheduled thread
# stalls them all), while beacon's pool is built for shared machines. Passive
# waiting keeps the comparison about the kernels; on an idle machine compare
# with LLAMACPP_OMP_WAIT=default too.
# CONTEXTS (comma-separated): instead of the above, batch-1 decode only, with a
# prompt of each length before the timed steps (the context a step attends
# to), both engines side by side per context; beacon with its default bf16
# KV cache, llama.cpp with its default f16 one. Writes
# $BUILD_DIR/compare-llamacpp-contexts.json.
# Builds nothing. Writes $BUILD_DIR/compare-llamacpp.json.
set -euo pipefail

cd "$(dirname "$0")/.."
if [ -n "${CONTEXTS:-}" ]; then
  BUILD_DIR=${BUILD_DIR:-build}
  runs=()
  for c in ${CONTEXTS//,/ }; do
    CONTEXTS= PROMPT_LEN=$c BATCHES=1 PREFILL_LEN= "$0"
    cp "$BUILD_DIR/compare-llamacpp.json" "$BUILD_DIR/compare-llamacpp-ctx$c.json"
    runs+=("$c" "$BUILD_DIR/compare-llamacpp-ctx$c.json")
  done
  "${PYTHON:-.venv/bin/python}" - "$BUILD_DIR/compare-llamacpp-contexts.json" "${runs[@]}" <<'EOF'
import json, sys
out, args = sys.argv[1], sys.argv[2:]
rows = []
print(f"\n{'context':>8} {'beacon tok/s':>13} {'llama.cpp tok/s':>16} {'beacon/llama':>13} "
      f"{'beacon ms':>10} {'llama ms':>9}")
for i in range(0, len(args), 2):
    ctx, r = int(args[i]), json.load(open(args[i + 1]))["batches"][0]
    tb, tl = r["beacon_tokens_per_second"], r["llamacpp_tokens_per_second"]
    print(f"{ctx:>8} {tb:13.1f} {tl:16.1f} {tb / tl:12.2f}x {r['beacon_step_ms']:10.2f} {r['llamacpp_step_ms']:9.2f}")
    rows.append({"context": ctx, **r})
json.dump({"contexts": rows}, open(out, "w"), indent=2)
EOF
  exit 0
fi
BUILD_DIR=${BUILD_DIR:-build}
MODEL=${MODEL:-models/default.gguf}
THREADS=${THREADS:-2}
BATCHES=${BATCHES-1,4,16,64}
PREFILL_LEN=${PREFILL_LEN-4096}
PREFILL_CHUNK=${PREFILL_CHUNK:-256}
PROMPT_LEN=${PROMPT_LEN:-32}
STEPS=${STEPS:-32}
PY=${PYTHON:-.venv/bin/python}
BENCH=$BUILD_DIR/bin/beacon-bench
OUT=$BUILD_DIR/compare-llamacpp.json

die() { echo "compare-llamacpp: $*" >&2; exit 1; }

[ -x "$BENCH" ] || die "$BENCH not found; run \`make build\` first"
[ -f "$MODEL" ] || die "$MODEL not found; run \`make model\` first"
"$PY" -c "import llama_cpp, numpy" 2>/dev/null ||
  die "llama_cpp (llama-cpp-python) is not importable by $PY; run \`BEACON_WITH_LLAMACPP=1 tools/bootstrap.sh\`"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -n "$BATCHES$PREFILL_LEN" ] || die "nothing to compare: BATCHES and PREFILL_LEN are both empty"
common=(--model "$MODEL" --batches "${BATCHES:-1}" --threads "$THREADS" --prompt-len "$PROMPT_LEN" --steps "$STEPS")
echo '{}' > "$tmp/beacon.json"
echo '{}' > "$tmp/llamacpp.json"
echo '{}' > "$tmp/beacon_prefill.json"
echo '{}' > "$tmp/llamacpp_prefill.json"

if [ -n "$BATCHES" ]; then
  echo "== beacon-bench decode (threads $THREADS) =="
  "$BENCH" decode "${common[@]}" --json "$tmp/beacon.json" || die "beacon-bench failed"
  echo
  echo "== llama.cpp decode (threads $THREADS) =="
  # shellcheck disable=SC2086  # LLAMACPP_ARGS is a flag list
  "$PY" tools/llamacpp_bench.py "${common[@]}" --omp-wait "${LLAMACPP_OMP_WAIT:-passive}" ${LLAMACPP_ARGS:-} --json "$tmp/llamacpp.json" ||
    die "tools/llamacpp_bench.py failed"
  echo
fi
if [ -n "$PREFILL_LEN" ]; then
  echo "== beacon-bench prefill (threads $THREADS, chunks of $PREFILL_CHUNK) =="
  "$BENCH" prefill --model "$MODEL" --threads "$THREADS" --prompt-len "$PREFILL_LEN" --chunk "$PREFILL_CHUNK" \
    --json "$tmp/beacon_prefill.json" || die "beacon-bench prefill failed"
  echo
  echo "== llama.cpp prefill (threads $THREADS) =="
  # shellcheck disable=SC2086  # LLAMACPP_ARGS is a flag list
  "$PY" tools/llamacpp_bench.py --model "$MODEL" --threads "$THREADS" --prefill "$PREFILL_LEN" \
    --omp-wait "${LLAMACPP_OMP_WAIT:-passive}" ${LLAMACPP_ARGS:-} --json "$tmp/llamacpp_prefill.json" ||
    die "tools/llamacpp_bench.py --prefill failed"
  echo
fi

"$PY" - "$tmp/beacon.json" "$tmp/llamacpp.json" "$OUT" "$tmp/beacon_prefill.json" "$tmp/llamacpp_prefill.json" <<'EOF'
import json, sys

beacon = json.load(open(sys.argv[1]))
llama = json.load(open(sys.argv[2]))
out_path = sys.argv[3]
beacon_prefill = json.load(open(sys.argv[4]))
llama_prefill = json.load(open(sys.argv[5]))

by_batch_b = {r["batch"]: r for r in beacon.get("decode", [])}
by_batch_l = {r["batch"]: r for r in llama.get("decode", [])}
batches = sorted(set(by_batch_b) | set(by_batch_l))

# Beacon's batch-1 fraction of the bandwidth roofline: its own figure if it
# reports one, else weight bytes / copy bandwidth / step time.
roof = None
b1 = by_batch_b.get(1)
if b1:
    roof = b1.get("roofline_fraction")
    if roof is None and beacon.get("weight_bytes") and beacon.get("copy_bandwidth_gbps"):
        roof = beacon["weight_bytes"] / (beacon["copy_bandwidth_gbps"] * 1e9) * 1e3 / b1["step_ms"]

def fmt(x, spec):
    return format(x, spec) if x is not None else "-"

def pct(x):
    return f"{x * 100:.0f}%" if x is not None else None

# Both engines against the compute roofline of batched steps: the matrices'
# multiply-adds per second over this machine's int8 dot-product peak, as
# beacon-bench measured it in the same run (bench/int8_peak.h).
peak = (beacon.get("int8_dot_peak_gmacs") or 0) * 1e9
macs = beacon.get("macs_per_token") or 0
def int8_share(tps):
    return tps * macs / peak if tps and peak and macs else None

rows = []
if batches:
    print(f"decode tokens/s, threads {beacon.get('threads')} (beacon) / {llama.get('threads')} (llama.cpp "
          f"{llama.get('llama_cpp_version')}, kv {'unified' if llama.get('kv_unified') else 'per-seq'}, "
          f"flash-attn {llama.get('flash_attn')}, OMP_WAIT_POLICY {llama.get('omp_wait_policy')})")
    print(f"{'batch':>6} {'beacon tok/s':>13} {'llama.cpp tok/s':>16} {'beacon/llama':>13} "
          f"{'beacon ms':>10} {'llama ms':>9} {'beacon int8':>12} {'llama int8':>11}")
    for b in batches:
        rb, rl = by_batch_b.get(b), by_batch_l.get(b)
        tb = rb["tokens_per_second"] if rb else None
        tl = rl["tokens_per_second"] if rl else None
        ratio = tb / tl if tb and tl else None
        print(f"{b:>6} {fmt(tb, '13.1f')} {fmt(tl, '16.1f')} {fmt(ratio, '12.2f') + ('x' if ratio else ''):>13} "
              f"{fmt(rb['step_ms'] if rb else None, '10.2f')} {fmt(rl['step_ms'] if rl else None, '9.2f')} "
              f"{fmt(pct(int8_share(tb)), '>12')} {fmt(pct(int8_share(tl)), '>11')}")
        rows.append({"batch": b, "beacon_tokens_per_second": tb, "llamacpp_tokens_per_second": tl,
                     "ratio_beacon_over_llamacpp": ratio,
                     "beacon_int8_roofline_fraction": int8_share(tb),
                     "llamacpp_int8_roofline_fraction": int8_share(tl),
                     "beacon_step_ms": rb["step_ms"] if rb else None,
                     "llamacpp_step_ms": rl["step_ms"] if rl else None})
    if roof is not None:
        print(f"beacon batch-1 roofline fraction: {roof * 100:.0f}% "
              f"(copy bandwidth {beacon.get('copy_bandwidth_gbps', 0):.2f} GB/s)")
    else:
        print("beacon batch-1 roofline fraction: - (no batch-1 result)")
    if peak and macs:
        print(f"int8 columns: the matrices' multiply-adds ({macs / 1e9:.3f} G a token) per second against the "
              f"int8 dot peak, {peak / 1e9:.1f} G MAC/s ({beacon.get('int8_dot_instruction')}, measured this run)")
    noisy = [r["batch"] for r in llama.get("decode", [])
             if r.get("step_ms_median") and r["step_ms"] > 1.5 * r["step_ms_median"]]
    if noisy:
        print(f"warning: llama.cpp step times were erratic at batch {noisy} (mean > 1.5x median); "
              "the machine is busy, rerun when it is idle")

# Prefill: one prompt of each length; beacon in scheduler-sized chunks,
# llama.cpp in one llama_decode.
prefill_rows = []
pb = {r["prompt_len"]: r for r in beacon_prefill.get("prefill", [])}
pl = {r["prompt_len"]: r for r in llama_prefill.get("prefill", [])}
if pb or pl:
    if batches:
        print()
    print(f"prefill tokens/s, threads {beacon_prefill.get('threads')} (beacon, chunks of "
          f"{beacon_prefill.get('chunk')}) / {llama_prefill.get('threads')} (llama.cpp, one batch, flash-attn "
          f"{llama_prefill.get('flash_attn')}, OMP_WAIT_POLICY {llama_prefill.get('omp_wait_policy')})")
    print(f"{'prompt':>7} {'beacon tok/s':>13} {'llama.cpp tok/s':>16} {'beacon/llama':>13} "
          f"{'beacon s':>9} {'llama s':>8}")
    for n in sorted(set(pb) | set(pl)):
        rb, rl = pb.get(n), pl.get(n)
        tb = rb["tokens_per_second"] if rb else None
        tl = rl["tokens_per_second"] if rl else None
        ratio = tb / tl if tb and tl else None
        print(f"{n:>7} {fmt(tb, '13.1f')} {fmt(tl, '16.1f')} {fmt(ratio, '12.2f') + ('x' if ratio else ''):>13} "
              f"{fmt(rb['seconds'] if rb else None, '9.2f')} {fmt(rl['seconds'] if rl else None, '8.2f')}")
        prefill_rows.append({"prompt_len": n, "beacon_tokens_per_second": tb, "llamacpp_tokens_per_second": tl,
                             "ratio_beacon_over_llamacpp": ratio})

with open(out_path, "w") as f:
    json.dump({"threads": beacon.get("threads", beacon_prefill.get("threads")), "batches": rows,
               "beacon_batch1_roofline_fraction": roof, "prefill": prefill_rows,
               "beacon": beacon, "llamacpp": llama,
               "beacon_prefill": beacon_prefill, "llamacpp_prefill": llama_prefill}, f, indent=2)
    f.write("\n")
print(f"wrote {out_path}")
EOF
