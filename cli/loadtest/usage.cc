// beacon-loadtest --help: the text of every option (parsed in options.cc).
#include <string>

#include "cli/loadtest/flags.h"

namespace beacon::loadtest {

std::string UsageText() {
  return R"(usage: beacon-loadtest [run] (--rate R | --concurrency N) [options]
       beacon-loadtest sweep (--rate LEVELS | --concurrency LEVELS) --slo SLO [options]
       beacon-loadtest plot --from SWEEP.json[,SWEEP2.json...] --plot OUT.png [--names A,B]

Streams Generate requests to beacon-serve over gRPC, or completions to any
OpenAI-compatible server over HTTP (--backend openai|openai-chat), and reports
TTFT, TPOT, inter-token latency, end-to-end latency (mean, median, p90, p99),
request and token throughput, goodput under an SLO, and errors by gRPC code
(HTTP statuses mapped to them). `sweep` runs
each load level in turn and finds the highest one that meets the SLO.

Server:
  --backend B               grpc (beacon-serve's beacon.v1, default), openai (/v1/completions)
                            or openai-chat (/v1/chat/completions): SSE streams, any
                            OpenAI-compatible server (vLLM, SGLang, llama.cpp, beacon-serve)
  --server HOST:PORT | URL  grpc: HOST:PORT (default 127.0.0.1:50051); openai*:
                            http://HOST:PORT[/PREFIX] (default http://127.0.0.1:8080)
  --model NAME              openai*: the "model" field (default: the first of /v1/models)
  --continuous-usage        openai*: ask for usage in every chunk (continuous_usage_stats):
                            exact per-token ITL when a chunk carries several tokens
  --api-key KEY             sent as 'authorization: Bearer KEY'
  --tls-ca FILE             PEM CA certificate: connect over TLS
  --connections N           gRPC channels / TCP connections; openai*: I/O threads (default 4)
  --timeout-s S             per-request deadline (default 600)
  --connect-timeout-s S     for the initial GetModelInfo (default 10)
Load:
  --rate R                  open loop: R requests/s ('inf': all at once); sweep: LEVELS
  --burstiness K            gamma-distributed gaps, CV 1/sqrt(K); 1 = Poisson (default)
  --concurrency N           closed loop: N requests in flight; sweep: LEVELS
  --requests N              measured requests (default 100; per level in a sweep)
  --duration-s S            or: issue measured requests for S seconds
  --waves K                 closed-loop sweep: K x concurrency requests per level
  --warmup N                requests run first and excluded from the figures (default 0)
  --seed N                  seeds arrivals and the workload: runs repeat (default 0)
Workload:
  --prompt-len DIST         synthetic prompt of exactly this many token ids (default fixed:128)
  --output-len DIST         max_tokens per request (default fixed:128)
                            DIST: fixed:N | uniform:A:B | normal:MEAN:STD | lognormal:MEAN:STD
  --ignore-eos              generate exactly max_tokens (reasoning-style long outputs)
  --prompts FILE.jsonl      {"prompt": "..."} (raw text) or {"messages": [...]} (chat)
                            lines, optional "max_tokens"; used in order, cycling
  --dataset KIND:FILE       sharegpt:FILE (ShareGPT JSON), custom:FILE (vLLM custom JSONL:
                            "prompt", "output_tokens") or jsonl:FILE (as --prompts);
                            an explicit --output-len overrides the file's lengths
  --dataset-sample N        N entries by a --seed-ed shuffle (default: all, in order)
  --reference-output-len    sharegpt: max_tokens = the reference answer's tokens (server-tokenized)
  --kv-mix MIX              per-request KV policies: POLICY[@BUDGET][:WEIGHT],...
                            e.g. full:1,beacon@256:1 (policy 'default': the server's)
  --kv-policy P, --kv-budget B   one policy (and budget) for every request
  --temperature T           sampling temperature (default 0: greedy)
SLO and sweep:
  --slo ttft_ms=..,tpot_ms=..,e2e_ms=..   bounds of a good request (any subset)
  --slo-attainment F        sweep: a level passes when F of its requests are good (default 0.9)
  --stop-after-fails N      sweep: stop after N failing levels in a row (default 1)
                            LEVELS: 1,2,4,8 | START:STOP:+STEP | START:STOP:xFACTOR
Output:
  --json FILE, --csv FILE   results (run: per-request CSV; sweep: per-level CSV)
  --json-format F           beacon (default) or vllm: benchmark_serving's flat result fields
  --plot FILE.png           sweep: latency percentiles and goodput against load
  --from A.json,B.json      plot: re-plot a sweep's JSON, or compare several sweeps
                            (TTFT p90, TPOT p90, goodput; one series per file)
  --names A,B               plot: series names (default: each sweep's --label, else its KV policy)
  --label TEXT              recorded in the JSON
  --quiet                   no progress line
Every option can also be set from the environment as BEACON_LOADTEST_<NAME>
(e.g. BEACON_LOADTEST_SERVER); the command line wins.
Exit status: 0 done, 2 bad arguments, 1 server unreachable or every request
failed, 130 interrupted (Ctrl-C cancels what is in flight; results are still written).
)";
}

}  // namespace beacon::loadtest
