"""beacon-serve's metrics in vLLM's names (--metrics-prefix vllm), end to end:
a real beacon-serve with a served model name, scraped every second by a real
Prometheus (the Debian `prometheus` package), under a gRPC load that finishes
requests by length, stop string, time limit and cancellation.

- the PromQL expressions of a vLLM-style dashboard and of vLLM autoscaling
  rules (KEDA/HPA queries), written against vLLM's names with
  model_name="$model_name": every one whose metric families we expose returns
  data over the load; every one that needs a family we lack returns none, and
  that family is listed in docs/observability.md's "vLLM metrics beacon-serve
  lacks" (so the list stays true as families are added);
- every series carries model_name = the served model name; the families vLLM
  has are exposed under vLLM's names only (no beacon_ duplicate), the others
  keep theirs;
- values: vllm:generation_tokens_total / prompt_tokens_total equal the
  clients' token counts; vllm:request_success_total counts by vLLM's
  finished_reason values (stop, length, abort) exactly; the renamed aliases
  agree (kv_cache_usage_perc = gpu_cache_usage_perc; time_per_output_token =
  inter_token_latency); vllm:kv_cache_usage_perc counts admission's
  reservations (= reserved / pool at every scrape under reserve admission);
- `promtool check metrics` parses the vllm-mode exposition and finds nothing
  wrong but the colon its linter dislikes in vLLM's own names.

Needs /usr/bin/prometheus and /usr/bin/promtool (tools/bootstrap.sh installs them)."""
import math
import os
import re
import subprocess
import tempfile
import time
import urllib.request

from serve_util import SRC, Server, chat_request, collect, pb
from prom_util import PROMTOOL, Prometheus
from test_prometheus import cancel_one, run_load

MODEL_NAME = "smol-135m"
OBSERVABILITY_DOC = os.path.join(SRC, "docs", "observability.md")

# Panels of a vLLM-style Grafana dashboard and vLLM autoscaling queries, in vLLM's names. $model_name and
# $__rate_interval are substituted as Grafana would.
DASHBOARD = [
    ("E2E latency p99", 'histogram_quantile(0.99, sum by(le) (rate(vllm:e2e_request_latency_seconds_bucket'
                        '{model_name="$model_name"}[$__rate_interval])))'),
    ("E2E latency mean", 'rate(vllm:e2e_request_latency_seconds_sum{model_name="$model_name"}[$__rate_interval]) / '
                         'rate(vllm:e2e_request_latency_seconds_count{model_name="$model_name"}[$__rate_interval])'),
    ("prompt tokens/s", 'rate(vllm:prompt_tokens_total{model_name="$model_name"}[$__rate_interval])'),
    ("generation tokens/s", 'rate(vllm:generation_tokens_total{model_name="$model_name"}[$__rate_interval])'),
    ("ITL p50", 'histogram_quantile(0.5, sum by(le) (rate(vllm:inter_token_latency_seconds_bucket'
                '{model_name="$model_name"}[$__rate_interval])))'),
    ("ITL mean", 'rate(vllm:inter_token_latency_seconds_sum{model_name="$model_name"}[$__rate_interval]) / '
                 'rate(vllm:inter_token_latency_seconds_count{model_name="$model_name"}[$__rate_interval])'),
    ("TPOT p99 (older name)", 'histogram_quantile(0.99, sum by(le) (rate(vllm:time_per_output_token_seconds_bucket'
                              '{model_name="$model_name"}[$__rate_interval])))'),
    ("request TPOT p90", 'histogram_quantile(0.9, sum by(le) (rate('
                         'vllm:request_time_per_output_token_seconds_bucket{model_name="$model_name"}'
                         '[$__rate_interval])))'),
    ("running", 'vllm:num_requests_running{model_name="$model_name"}'),
    ("waiting", 'vllm:num_requests_waiting{model_name="$model_name"}'),
    ("swapped", 'vllm:num_requests_swapped{model_name="$model_name"}'),
    ("TTFT p95", 'histogram_quantile(0.95, sum by(le) (rate(vllm:time_to_first_token_seconds_bucket'
                 '{model_name="$model_name"}[$__rate_interval])))'),
    ("TTFT mean", 'rate(vllm:time_to_first_token_seconds_sum{model_name="$model_name"}[$__rate_interval]) / '
                  'rate(vllm:time_to_first_token_seconds_count{model_name="$model_name"}[$__rate_interval])'),
    ("KV cache usage", 'vllm:kv_cache_usage_perc{model_name="$model_name"}'),
    ("GPU cache usage (older name)", 'vllm:gpu_cache_usage_perc{model_name="$model_name"}'),
    ("CPU cache usage", 'vllm:cpu_cache_usage_perc{model_name="$model_name"}'),
    ("prompt length heatmap", 'sum by(le) (increase(vllm:request_prompt_tokens_bucket{model_name="$model_name"}'
                              '[$__rate_interval]))'),
    ("generation length heatmap", 'sum by(le) (increase(vllm:request_generation_tokens_bucket'
                                  '{model_name="$model_name"}[$__rate_interval]))'),
    ("finish reason", 'sum by(finished_reason) (increase(vllm:request_success_total{model_name="$model_name"}'
                      '[$__rate_interval]))'),
    ("queue time", 'rate(vllm:request_queue_time_seconds_sum{model_name="$model_name"}[$__rate_interval])'),
    ("prefill time", 'rate(vllm:request_prefill_time_seconds_sum{model_name="$model_name"}[$__rate_interval])'),
    ("decode time", 'rate(vllm:request_decode_time_seconds_sum{model_name="$model_name"}[$__rate_interval])'),
    ("inference time p90", 'histogram_quantile(0.9, sum by(le) (rate(vllm:request_inference_time_seconds_bucket'
                           '{model_name="$model_name"}[$__rate_interval])))'),
    ("max generation tokens", 'rate(vllm:request_max_num_generation_tokens_sum{model_name="$model_name"}'
                              '[$__rate_interval])'),
    ("preemptions", 'rate(vllm:num_preemptions_total{model_name="$model_name"}[$__rate_interval])'),
    ("iteration tokens", 'histogram_quantile(0.5, sum by(le) (rate(vllm:iteration_tokens_total_bucket'
                         '{model_name="$model_name"}[$__rate_interval])))'),
    ("max_tokens asked", 'rate(vllm:request_params_max_tokens_sum{model_name="$model_name"}[$__rate_interval])'),
    ("prefix cache hit rate", 'rate(vllm:prefix_cache_hits_total{model_name="$model_name"}[$__rate_interval]) / '
                              'rate(vllm:prefix_cache_queries_total{model_name="$model_name"}[$__rate_interval])'),
    ("cache config", 'vllm:cache_config_info{model_name="$model_name"}'),
    # Autoscaling (KEDA ScaledObject / prometheus-adapter) as written for vLLM fleets.
    ("KEDA queue depth", 'sum(vllm:num_requests_waiting{model_name="$model_name"})'),
    ("HPA KV usage", 'avg(vllm:kv_cache_usage_perc{model_name="$model_name"})'),
    ("HPA running", 'sum by(model_name) (vllm:num_requests_running{model_name="$model_name"})'),
]

FINISH = {pb.FINISH_REASON_STOP: "stop", pb.FINISH_REASON_EOS: "stop", pb.FINISH_REASON_STOP_SEQUENCE: "stop",
          pb.FINISH_REASON_LENGTH: "length", pb.FINISH_REASON_TIME_LIMIT: "length",
          pb.FINISH_REASON_CANCELLED: "abort", pb.FINISH_REASON_ERROR: "abort"}


def families_of(expr):
    """The vLLM metric families an expression reads (histogram series suffixes dropped)."""
    return {re.sub(r"_(bucket|sum|count)$", "", m) for m in re.findall(r"vllm:[a-z0-9_:]+", expr)}


def doc_lacking():
    """The vllm: names docs/observability.md lists under its "vLLM metrics beacon-serve lacks" heading."""
    with open(OBSERVABILITY_DOC) as f:
        text = f.read()
    m = re.search(r"^#+ vLLM metrics beacon-serve lacks\n(.*?)(?=^#)", text, re.M | re.S)
    assert m, "docs/observability.md has no 'vLLM metrics beacon-serve lacks' section"
    return set(re.findall(r"`(vllm:[a-z0-9_:]+)`", m.group(1)))


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp, \
            Server("--metrics-prefix", "vllm", "--served-model-name", MODEL_NAME, "--kv-policy", "beacon",
                   "--kv-budget", "64", "--kv-interval", "16") as srv:
        rules = os.path.join(tmp, "rules.yml")
        with open(rules, "w") as f:
            f.write("groups: []\n")
        target = f"127.0.0.1:{srv.http_port}"
        inst = f'instance="{target}"'
        prom = Prometheus(target, rules)
        try:
            prom.wait_for(f"up{{{inst}}}", 1)
            load_start = time.time()
            results = run_load(srv)  # length and time_limit finishes, concurrent
            _, text, stopped = collect(srv.stub.Generate(chat_request("Name a colour.", 64, stop=[" "]), timeout=60))
            assert stopped.finish_reason == pb.FINISH_REASON_STOP_SEQUENCE, (stopped, text)
            cancel_seen = cancel_one(srv)
            srv.wait_idle()
            stats = srv.stats()
            finals = [last for _, _, last in results] + [stopped]
            prom.wait_for(f"vllm:generation_tokens_total{{{inst}}}", stats["generation_tokens"])
            prom.wait_for(f"sum(vllm:request_success_total{{{inst}}})", len(finals) + 1)  # + the cancelled one
            prom.wait_for(f"vllm:num_requests_running{{{inst}}}", 0)
            load_end = time.time()
            print(f"ok load: {len(finals) + 1} requests, {stats['generation_tokens']} tokens "
                  f"({time.time() - t0:.1f}s)")

            # Names and labels.
            names = set(prom.by(f'count by (__name__) ({{{inst}}})', "__name__"))
            meta = prom.api("metadata")
            exposed = {n for n in meta if n.startswith("vllm:")}
            for fam in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                        "vllm:gpu_cache_usage_perc", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                        "vllm:num_preemptions_total", "vllm:request_success_total",
                        "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                        "vllm:time_per_output_token_seconds", "vllm:request_time_per_output_token_seconds",
                        "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
                        "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
                        "vllm:request_inference_time_seconds", "vllm:request_prompt_tokens",
                        "vllm:request_generation_tokens"):
                assert fam in exposed, (fam, sorted(exposed))
            for renamed in ("beacon_num_requests_running", "beacon_kv_cache_usage_perc", "beacon_prompt_tokens_total",
                            "beacon_time_to_first_token_seconds_count", "beacon_request_success_total"):
                assert renamed not in names, f"{renamed} duplicates its vLLM name in vllm mode"
            for kept in ("beacon_kv_blocks_reserved", "beacon_kv_pool_blocks", "beacon_kv_evictions_total",
                         "beacon_server_info", "beacon_kv_cache_used_perc"):
                assert kept in names, f"{kept}: a family vLLM lacks keeps its beacon name"
            other = prom.query(f'{{__name__=~"vllm:.+|beacon_.+", model_name!="{MODEL_NAME}", {inst}}}')
            assert not other, [s["metric"] for s in other][:5]

            # Values.
            v = lambda e: prom.value(f"sum({e}{{{inst}}})")  # noqa: E731
            assert v("vllm:generation_tokens_total") == stats["generation_tokens"]
            assert v("vllm:prompt_tokens_total") == stats["prompt_tokens"]
            want = {"stop": 0, "length": 0, "abort": 1}  # the cancelled one
            for f in finals:
                want[FINISH[f.finish_reason]] += 1
            got = prom.by(f"vllm:request_success_total{{{inst}}}", "finished_reason")
            assert got == {k: float(n) for k, n in want.items()}, (got, want)
            assert v("vllm:request_generation_tokens_sum") == stats["generation_tokens"]
            assert v("vllm:request_prompt_tokens_count") == stats["finished"] == v("vllm:e2e_request_latency_seconds_count")
            assert v("vllm:inter_token_latency_seconds_count") == v("vllm:time_per_output_token_seconds_count") > 0
            rng = f"{int(load_end - load_start) + 2}s"

            def peak(expr):
                r = prom.query(f"max(max_over_time(({expr})[{rng}:1s]))", time=f"{load_end:.3f}")
                assert r, expr
                return float(r[0]["value"][1])

            assert peak(f"abs(vllm:kv_cache_usage_perc{{{inst}}} - vllm:gpu_cache_usage_perc{{{inst}}})") == 0
            assert peak(f"vllm:kv_cache_usage_perc{{{inst}}}") > 0
            assert peak(f"abs(vllm:kv_cache_usage_perc{{{inst}}} - beacon_kv_blocks_reserved{{{inst}}} / "
                        f"beacon_kv_pool_blocks{{{inst}}})") < 1e-12
            print("ok vLLM names, model_name on every series, counters exact, reservations in the KV gauge")

            # The dashboard.
            lacking = doc_lacking()
            with_data, without = [], []
            for title, expr in DASHBOARD:
                q = expr.replace("$model_name", MODEL_NAME).replace("$__rate_interval", "15s")
                q = re.sub(r"(vllm:[a-z0-9_:]+)\{", lambda m: m.group(0) + inst + ", ", q)
                prom.query(q)  # parses and evaluates
                series = prom.query_range(q, load_start, load_end + 3, step=1)
                has = any(not math.isnan(float(val)) for s in series for _, val in s["values"])
                missing = {fam for fam in families_of(expr) if fam not in exposed}
                if missing:
                    assert not has, f"{title}: data for {missing}, which the test thought lacking: {q}"
                    undocumented = missing - lacking
                    assert not undocumented, f"{title}: {undocumented} not in docs/observability.md's lacking list"
                    without.append(title)
                else:
                    assert has, f"{title}: no data: {q}"
                    with_data.append(title)
            assert len(with_data) >= 20, with_data
            assert not (lacking & exposed), f"documented as lacking but exposed: {lacking & exposed}"
            print(f"ok vLLM-style dashboard: {len(with_data)} expressions return data; {len(without)} need families "
                  f"we lack, all documented: {', '.join(without)}")

            with urllib.request.urlopen(f"http://127.0.0.1:{srv.http_port}/metrics", timeout=10) as r:
                exposition = r.read()
            p = subprocess.run([PROMTOOL, "check", "metrics"], input=exposition, capture_output=True, timeout=60)
            # The linter's one complaint may be the colon in vLLM's own names (reserved for recording rules by
            # Prometheus's naming advice, used by vLLM anyway); the exposition must parse and nothing else may fail.
            lines = (p.stdout.decode() + p.stderr.decode()).splitlines()
            colon = [ln for ln in lines if re.match(r"^vllm:\S+ metric names should not contain ':'$", ln)]
            other = [ln for ln in lines if ln not in colon and ln.strip()]
            assert not other and (p.returncode == 0 or colon), f"promtool check metrics (rc {p.returncode}):\n{lines}"
            assert len(cancel_seen) >= 1
        except BaseException:
            print(prom.read_log()[-3000:])
            raise
        finally:
            prom.stop()
    print(f"ok beacon-serve metrics in vLLM's names ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
