#!/usr/bin/env bash
# beacon-serve on the GPU under a load test (issue 44), a stage of
# tools/gpu-check.sh:  tools/gpu-serve-check.sh BIN_DIR WORK_DIR
#
# One server (--device cuda, gRPC and HTTP on loopback) on a dummy-weight
# model at the R1-Distill-Qwen-7B shape with that model's real tokenizer and
# chat template (tests/fixtures/tokenizers/, vocabulary only: real weights do
# not fit the device tool's transfer), a KV pool of SERVE_POOL slots, then
# beacon-loadtest twice on the same pool: every request `full`, then every
# request `beacon` at SERVE_BUDGET. Closed loop, exact prompt and output
# lengths (--ignore-eos), so the two runs differ only by the policy: each
# admits as many requests as their peak footprints fit (prompt + max_tokens
# under full, kept prompt + budget + interval under beacon).
#
# Checks: no failed request in either run; after each run every KV block is
# free again (beacon_kv_blocks_used 0 on /metrics); the server exits cleanly
# on SIGTERM. Writes serve-full.json, serve-beacon.json (beacon-loadtest
# --json), serve-metrics-*.txt and serve.log into WORK_DIR, and serve.json
# with the checks' outcome.
#
# Environment: LAUNCH (a loader prefix for bundled binaries), SERVE_POOL
# (default 20480 slots = 16 x (256 + 1024)), SERVE_BUDGET (256),
# SERVE_REQUESTS (96 per run), SERVE_OUTPUT (1024), SERVE_CONCURRENCY (64),
# SERVE_INTERVAL (the server's --kv-interval; default its own), SERVE_GRPC_PORT
# and SERVE_HTTP_PORT (50151, 18151). SERVE_DEVICE (cuda), SERVE_MODEL (the
# 7B-shape dummy) and SERVE_SERVER (the executable in BIN_DIR: beacon-serve)
# rehearse the script on a CPU with a tiny model, on the CPU backend or on the
# CUDA backend under emulation (beacon-serve-emu; tests/server/
# test_cuda_emu_serving.py runs that):
#   SERVE_DEVICE=cpu SERVE_MODEL=dummy:$PWD/tests/data/tiny-r1-qwen2.json SERVE_REQUESTS=16 SERVE_OUTPUT=128 \
#     tools/gpu-serve-check.sh build/bin /tmp/serve-rehearsal
#   SERVE_SERVER=beacon-serve-emu SERVE_MODEL=...   (the same with --device cuda, emulated)
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$1 work=$2
read -r -a launch <<< "${LAUNCH:-}"
pool=${SERVE_POOL:-20480} budget=${SERVE_BUDGET:-256} requests=${SERVE_REQUESTS:-96}
output=${SERVE_OUTPUT:-1024} conc=${SERVE_CONCURRENCY:-64}
grpc_port=${SERVE_GRPC_PORT:-50151} http_port=${SERVE_HTTP_PORT:-18151}  # fixed: the GPU machine runs nothing else
grpc=127.0.0.1:$grpc_port http=127.0.0.1:$http_port
model=${SERVE_MODEL:-"dummy:$(pwd)/configs/deepseek-r1-distill-qwen-7b.json"}
device=${SERVE_DEVICE:-cuda}
server_bin=${SERVE_SERVER:-beacon-serve}
interval=()
[ -n "${SERVE_INTERVAL:-}" ] && interval=(--kv-interval "$SERVE_INTERVAL")
mkdir -p "$work"
vocab=tests/fixtures/tokenizers/r1-distill-qwen-7b-vocab.gguf

"${launch[@]}" "$bin/$server_bin" --device "$device" --model "$model" --tokenizer "$vocab" --host 127.0.0.1 \
  --grpc-port "$grpc_port" --http-port "$http_port" --kv-pool-tokens "$pool" --max-running 256 --max-tokens-limit 4096 \
  "${interval[@]}" --log-level info > "$work/serve.log" 2>&1 &
server=$!
# HTTP GET without curl (the GPU machine's image is not known to have it; python3 it has).
get() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1" 2>/dev/null; }
cleanup() { kill "$server" 2>/dev/null; }
trap cleanup EXIT
for _ in $(seq 1 120); do
  get "http://$http/ready" > /dev/null && break
  kill -0 "$server" 2>/dev/null || { echo "gpu-serve-check: beacon-serve exited:"; tail -20 "$work/serve.log"; exit 1; }
  sleep 1
done
get "http://$http/ready" > /dev/null || { echo "gpu-serve-check: not ready after 120 s"; tail -20 "$work/serve.log"; exit 1; }
echo "beacon-serve ready (--device $device)"

blocks_used() { get "http://$http/metrics" | awk '/^beacon_kv_blocks_used[{ ]/{print $NF}'; }
rc=0
declare -A used
for policy in full beacon; do
  args=(--kv-policy "$policy")
  [ "$policy" = beacon ] && args+=(--kv-budget "$budget")
  "${launch[@]}" "$bin/beacon-loadtest" --server "$grpc" --concurrency "$conc" --requests "$requests" \
    --prompt-len fixed:256 --output-len "fixed:$output" --ignore-eos "${args[@]}" \
    --json "$work/serve-$policy.json" > "$work/serve-$policy.log" 2>&1 || rc=1
  tail -25 "$work/serve-$policy.log"
  sleep 1
  get "http://$http/metrics" > "$work/serve-metrics-$policy.txt"
  used[$policy]=$(blocks_used)
  echo "after $policy: beacon_kv_blocks_used ${used[$policy]:-?}"
  [ "${used[$policy]:-x}" = 0 ] || rc=1
done
kill -TERM "$server"
wait "$server"
exit_rc=$?
trap - EXIT
[ "$exit_rc" = 0 ] || rc=1
printf '{"device": "%s", "pool_tokens": %s, "budget": %s, "requests": %s, "output_len": %s, "concurrency": %s, "blocks_used_after_full": "%s", "blocks_used_after_beacon": "%s", "server_exit": %s, "ok": %s}\n' \
  "$device" "$pool" "$budget" "$requests" "$output" "$conc" "${used[full]:-}" "${used[beacon]:-}" "$exit_rc" \
  "$([ $rc = 0 ] && echo true || echo false)" > "$work/serve.json"
exit $rc
