"""beacon-serve's Prometheus metrics end to end: a real beacon-serve, scraped
every second by a real Prometheus server (the Debian `prometheus` package)
that also loads deploy/prometheus/rules.yml, under a small gRPC load that
reaches every finish path the test can make happen deterministically
(length, time_limit, cancelled, rejected as invalid) and evicts (beacon policy,
small budget). Everything is then checked through Prometheus's HTTP API:

- every metric family is there, with its type;
- counters equal what the clients saw, exactly: generated tokens (= streamed
  tokens, ignore_eos), prompt tokens, finish reasons, evictions, evicted
  tokens; histogram counts and sums equal the per-request timings and KV
  stats of the final messages; steps and blocks agree with /v1/engine/stats;
- gauges: saw the load while it ran (running, reserved blocks, KV usage,
  compression savings) and are back to idle after it;
- `promtool check metrics` on the /metrics text, `promtool check rules`,
  `promtool test rules`, `promtool check config` on the example config;
- every rule of rules.yml evaluates without error and each recording rule
  has data;
- every PromQL expression of deploy/grafana/beacon-dashboard.json (Grafana
  variables substituted) parses and returns data over the load.

Needs /usr/bin/prometheus and /usr/bin/promtool (tools/bootstrap.sh
installs them); PROMETHEUS and PROMTOOL override the paths."""
import concurrent.futures
import json
import math
import os
import re
import subprocess
import time
import urllib.request

from prom_util import PROMTOOL, Prometheus, close, with_labels
from serve_util import SRC, Server, chat_request, collect, expect_rpc_error, pb
import grpc

RULES = os.path.join(SRC, "deploy", "prometheus", "rules.yml")
RULES_TEST = os.path.join(SRC, "deploy", "prometheus", "rules_test.yml")
EXAMPLE_CONFIG = os.path.join(SRC, "deploy", "prometheus", "prometheus.yml")
DASHBOARD = os.path.join(SRC, "deploy", "grafana", "beacon-dashboard.json")

GAUGES = ["beacon_server_info", "beacon_num_requests_running", "beacon_num_requests_waiting",
          "beacon_kv_pool_blocks", "beacon_kv_blocks_used", "beacon_kv_blocks_free", "beacon_kv_blocks_reserved",
          "beacon_kv_cache_usage_perc", "beacon_kv_cache_used_perc", "beacon_num_requests_compressing",
          "beacon_kv_cached_tokens",
          "beacon_kv_logical_tokens", "beacon_kv_bytes_per_token", "beacon_engine_step_batch_size",
          "beacon_engine_step_tokens", "beacon_prefix_cache_blocks", "beacon_prefix_cache_idle_blocks",
          "beacon_engine_broken", "beacon_engine_step_running_seconds"]
COUNTERS = ["beacon_prompt_tokens_total", "beacon_generation_tokens_total", "beacon_preemptions_total",
            "beacon_kv_evictions_total", "beacon_kv_evicted_tokens_total", "beacon_engine_steps_total",
            "beacon_request_success_total", "beacon_request_rejected_total", "beacon_prefix_cache_queries_total",
            "beacon_prefix_cache_hits_total"]
HISTOGRAMS = ["beacon_time_to_first_token_seconds", "beacon_inter_token_latency_seconds",
              "beacon_time_per_output_token_seconds", "beacon_e2e_request_latency_seconds",
              "beacon_request_queue_time_seconds", "beacon_engine_step_seconds", "beacon_request_peak_kv_tokens",
              "beacon_request_kv_compression_ratio", "beacon_request_prefill_time_seconds",
              "beacon_request_decode_time_seconds", "beacon_request_inference_time_seconds",
              "beacon_request_prompt_tokens", "beacon_request_generation_tokens"]
FINISH_REASONS = ["stop", "length", "eos", "stop_sequence", "time_limit", "cancelled", "error"]
REJECT_REASONS = ["queue_full", "invalid", "draining", "unauthenticated", "other"]
FINISH_NAME = {pb.FINISH_REASON_STOP: "stop", pb.FINISH_REASON_LENGTH: "length", pb.FINISH_REASON_EOS: "eos",
               pb.FINISH_REASON_STOP_SEQUENCE: "stop_sequence", pb.FINISH_REASON_TIME_LIMIT: "time_limit",
               pb.FINISH_REASON_CANCELLED: "cancelled", pb.FINISH_REASON_ERROR: "error"}

PROMPTS = ["Write a short plan for learning to bake bread.", "List three prime numbers.",
           "Describe the water cycle.", "Explain photosynthesis briefly.", "Name the planets.",
           "Give three tips for studying.", "Tell a story about a lighthouse keeper.",
           "Describe a busy harbour at dawn."]


def run_load(srv):
    """The concurrent part of the load; every request gets its final message. Returns [(request, ids, last)]."""
    full = pb.KvOptions(policy="full")
    small = pb.KvOptions(policy="beacon", budget=32)
    reqs = [chat_request(PROMPTS[i], 32, ignore_eos=True, kv=full, request_id=f"full-{i}") for i in range(3)]
    reqs.append(chat_request(PROMPTS[3], 96, ignore_eos=True, kv=small, request_id="beacon-32"))
    reqs.append(chat_request(PROMPTS[4], 112, ignore_eos=True, request_id="beacon-default"))  # server default
    # Long enough that only the time limit ends them: two compressing requests live for 3 s whatever the
    # machine's speed, so the once-a-second scrapes see a batch of 2+ and eviction's savings.
    for i, p in enumerate(PROMPTS[5:7]):
        reqs.append(chat_request(p, 1000, ignore_eos=True, kv=small, time_limit_ms=3000,
                                 request_id=f"time-limit-{i}"))

    def one(r):
        ids, _, last = collect(srv.stub.Generate(r, timeout=120))
        return r, ids, last

    with concurrent.futures.ThreadPoolExecutor(len(reqs)) as ex:
        return list(ex.map(one, reqs))


def cancel_one(srv):
    """A request the client cancels after its first tokens. Returns the token ids it saw."""
    call = srv.stub.Generate(chat_request(PROMPTS[7], 1000, ignore_eos=True, request_id="cancel-me"), timeout=120)
    seen = []
    for msg in call:
        seen.extend(msg.token_ids)
        if seen:
            break
    call.cancel()
    try:
        for msg in call:
            pass
        raise AssertionError("the cancelled stream went on")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.CANCELLED, e
    return seen


def expected_families():
    names = set(GAUGES) | set(COUNTERS)
    for h in HISTOGRAMS:
        names |= {h + "_bucket", h + "_sum", h + "_count"}
    return names


def check_families(prom, inst):
    got = set(prom.by(f'count by (__name__) ({{__name__=~"beacon_.+", {inst}}})', "__name__"))
    missing = expected_families() - got
    assert not missing, f"missing metric series: {sorted(missing)}"
    meta = prom.api("metadata")
    for kind, names in (("gauge", GAUGES), ("counter", COUNTERS), ("histogram", HISTOGRAMS)):
        for n in names:
            assert n in meta, f"no metadata for {n}"
            assert meta[n][0]["type"] == kind, (n, meta[n])
            assert meta[n][0]["help"], f"{n} has no help text"
    finish = prom.by(f"beacon_request_success_total{{{inst}}}", "finished_reason")
    assert sorted(finish) == sorted(FINISH_REASONS), finish
    rejected = prom.by(f"beacon_request_rejected_total{{{inst}}}", "reason")
    assert sorted(rejected) == sorted(REJECT_REASONS), rejected
    kinds = prom.by(f"beacon_engine_step_seconds_count{{{inst}}}", "kind")
    assert sorted(kinds) == ["decode", "mixed", "prefill"], kinds
    # Every series carries the served model name (the default: the model file's name), as vLLM's do.
    unlabelled = prom.query(f'{{__name__=~"beacon_.+", model_name!="default", {inst}}}')
    assert not unlabelled, [s["metric"] for s in unlabelled][:5]
    # The TTFT SLO of rules.yml counts bucket le="2.5": it must exist.
    assert prom.query(f'beacon_time_to_first_token_seconds_bucket{{le="2.5", {inst}}}'), "no le=2.5 TTFT bucket"


def check_phase1(prom, inst, results):
    """Counters and histograms against what the clients saw, exactly."""
    v = lambda e: prom.value(f"sum({with_labels(e, inst)})")  # noqa: E731
    finals = [last for _, _, last in results]
    for r, ids, last in results:
        # ignore_eos: every sampled token is streamed.
        assert len(ids) == last.usage.completion_tokens, (r.request_id, len(ids), last.usage)
    reasons = {}
    for last in finals:
        reasons[FINISH_NAME[last.finish_reason]] = reasons.get(FINISH_NAME[last.finish_reason], 0) + 1
    assert reasons.get("time_limit") == 2 and reasons.get("length") == len(finals) - 2, reasons
    gen = sum(f.usage.completion_tokens for f in finals)
    assert v("beacon_generation_tokens_total") == gen == sum(len(ids) for _, ids, _ in results)
    assert v("beacon_prompt_tokens_total") == sum(f.usage.prompt_tokens for f in finals)
    # Every request was admitted once (reserve admission) and looked its prompt up; what it
    # reused is its usage's cached_tokens (the chat template's shared lead at least).
    assert v("beacon_prefix_cache_queries_total") == sum(f.usage.prompt_tokens for f in finals)
    assert v("beacon_prefix_cache_hits_total") == sum(f.usage.cached_tokens for f in finals)
    got = prom.by(f"beacon_request_success_total{{{inst}}}", "finished_reason")
    assert got == {r: float(reasons.get(r, 0)) for r in FINISH_REASONS}, (got, reasons)
    evictions = sum(f.kv.evictions for f in finals)
    assert evictions > 0, "the beacon requests should have evicted"
    assert v("beacon_kv_evictions_total") == evictions
    assert v("beacon_kv_evicted_tokens_total") == sum(f.kv.evicted_tokens for f in finals) > 0
    assert v("beacon_preemptions_total") == sum(f.kv.preemptions for f in finals) == 0  # reserve admission

    n = len(finals)
    with_tokens = [f for f in finals if f.usage.completion_tokens >= 1]
    # TPOT counts requests that ran to their natural end (not cancelled or timed out).
    natural = (pb.FINISH_REASON_STOP, pb.FINISH_REASON_LENGTH, pb.FINISH_REASON_EOS, pb.FINISH_REASON_STOP_SEQUENCE)
    multi = [f for f in finals if f.usage.completion_tokens > 1 and f.finish_reason in natural]
    hist = {}
    for h in HISTOGRAMS:
        hist[h] = (v(h + "_count"), v(h + "_sum"))
    assert hist["beacon_e2e_request_latency_seconds"][0] == n
    assert close(hist["beacon_e2e_request_latency_seconds"][1], sum(f.timings.total_seconds for f in finals))
    assert hist["beacon_request_queue_time_seconds"][0] == n
    assert close(hist["beacon_request_queue_time_seconds"][1], sum(f.timings.queue_seconds for f in finals))
    assert hist["beacon_time_to_first_token_seconds"][0] == len(with_tokens)
    assert close(hist["beacon_time_to_first_token_seconds"][1],
                 sum(f.timings.time_to_first_token_seconds for f in with_tokens))
    # One observation per sampled token but the first of each request.
    assert hist["beacon_inter_token_latency_seconds"][0] == gen - len(with_tokens)
    assert hist["beacon_time_per_output_token_seconds"][0] == len(multi)
    tpot = sum((f.timings.total_seconds - f.timings.time_to_first_token_seconds) / (f.usage.completion_tokens - 1)
               for f in multi)
    assert close(hist["beacon_time_per_output_token_seconds"][1], tpot)
    peaks = [f for f in finals if f.kv.peak_cached_tokens > 0]
    assert len(peaks) == n
    assert hist["beacon_request_peak_kv_tokens"] == (n, sum(f.kv.peak_cached_tokens for f in peaks))
    assert hist["beacon_request_kv_compression_ratio"][0] == n
    ratios = [(f.usage.prompt_tokens + f.usage.completion_tokens) / f.kv.peak_cached_tokens for f in peaks]
    assert close(hist["beacon_request_kv_compression_ratio"][1], sum(ratios))
    # The compressed requests land above the 1.1 bucket; full ones (ratio ~1) at or below it.
    over = sum(r > 1.1 for r in ratios)
    assert over >= 2, ratios
    assert v('beacon_request_kv_compression_ratio_bucket{le="1.1"}') == n - over
    assert v("beacon_engine_step_seconds_count") == v("beacon_engine_steps_total") > 0
    # Per request: token counts exactly; the phases from the final message's timings (prefill: first
    # scheduled step to first token; decode: first token to finish; inference: scheduled to finish).
    assert hist["beacon_request_prompt_tokens"] == (n, sum(f.usage.prompt_tokens for f in finals))
    assert hist["beacon_request_generation_tokens"] == (n, gen)
    t = [f.timings for f in with_tokens]
    assert hist["beacon_request_prefill_time_seconds"][0] == len(with_tokens)
    assert close(hist["beacon_request_prefill_time_seconds"][1],
                 sum(x.time_to_first_token_seconds - x.queue_seconds for x in t), abs_=1e-4)
    assert hist["beacon_request_decode_time_seconds"][0] == len(with_tokens)
    assert close(hist["beacon_request_decode_time_seconds"][1],
                 sum(x.total_seconds - x.time_to_first_token_seconds for x in t), abs_=1e-4)
    assert hist["beacon_request_inference_time_seconds"][0] == len(with_tokens)
    assert close(hist["beacon_request_inference_time_seconds"][1], sum(x.total_seconds - x.queue_seconds for x in t),
                 abs_=1e-4)
    return gen


def check_during_load(prom, inst, start, end):
    """What the gauges showed while the load ran (max over the scrapes)."""
    rng = f"{int(end - start) + 2}s"
    at = {"time": f"{end:.3f}"}

    def peak(expr):
        r = prom.query(f"max(max_over_time(({expr})[{rng}:1s]))", **at)
        assert r, expr
        return float(r[0]["value"][1])

    assert peak(f"beacon_num_requests_running{{{inst}}}") >= 2
    assert peak(f"beacon_kv_blocks_reserved{{{inst}}}") > 0
    assert peak(f"beacon_kv_cache_usage_perc{{{inst}}}") > 0
    assert peak(f"beacon_num_requests_compressing{{{inst}}}") >= 1
    assert peak(f"beacon_kv_cached_tokens{{{inst}}}") > 0
    # Eviction saved memory: a full cache would have held more.
    assert peak(f"beacon_kv_logical_tokens{{{inst}}} - beacon_kv_cached_tokens{{{inst}}}") > 0
    assert peak(f"beacon_engine_step_batch_size{{{inst}}}") >= 2
    assert peak(f"beacon_engine_step_tokens{{{inst}}}") >= 2
    # Reserve admission: blocks holding data never exceed what admission reserved; the gauges add up.
    assert peak(f"beacon_kv_blocks_used{{{inst}}} - beacon_kv_blocks_reserved{{{inst}}}") <= 0
    assert peak(f"abs(beacon_kv_blocks_used{{{inst}}} + beacon_kv_blocks_free{{{inst}}} - "
                f"beacon_kv_pool_blocks{{{inst}}})") == 0
    assert peak(f"beacon_kv_cached_tokens{{{inst}}} - beacon_kv_logical_tokens{{{inst}}}") <= 0
    assert peak(f"beacon_kv_cache_usage_perc{{{inst}}}") <= 1
    # The usage gauge pickers read counts reservations: max(used, reserved) / pool, which under reserve
    # admission (reserved >= used, checked above) is reserved / pool at every scrape; used_perc is used / pool.
    assert peak(f"abs(beacon_kv_cache_usage_perc{{{inst}}} - beacon_kv_blocks_reserved{{{inst}}} / "
                f"beacon_kv_pool_blocks{{{inst}}})") < 1e-12
    assert peak(f"abs(beacon_kv_cache_used_perc{{{inst}}} - beacon_kv_blocks_used{{{inst}}} / "
                f"beacon_kv_pool_blocks{{{inst}}})") < 1e-12
    # Reservations run ahead of use (each request holds its peak footprint from admission on).
    assert peak(f"beacon_kv_cache_usage_perc{{{inst}}} - beacon_kv_cache_used_perc{{{inst}}}") > 0


def check_final(prom, inst, srv, gen1, prompt1, cancel_seen, cancel_prompt):
    v = lambda e: prom.value(f"sum({with_labels(e, inst)})")  # noqa: E731
    stats = srv.stats()
    gen = v("beacon_generation_tokens_total")
    assert gen == stats["generation_tokens"]
    assert gen - gen1 >= len(cancel_seen) >= 1, (gen, gen1, cancel_seen)
    assert v("beacon_prompt_tokens_total") == stats["prompt_tokens"] == prompt1 + cancel_prompt
    assert v("beacon_prefix_cache_queries_total") == stats["prefix_cache_queries"]
    assert v("beacon_prefix_cache_hits_total") == stats["prefix_cache_hits"]
    assert v("beacon_prefix_cache_idle_blocks") == stats["prefix_cache_idle_blocks"] == stats["prefix_cache_blocks"]
    assert v("beacon_kv_evictions_total") == stats["evictions"]
    assert v("beacon_kv_evicted_tokens_total") == stats["evicted_tokens"]
    assert v("beacon_preemptions_total") == stats["preemptions"] == 0
    assert v("beacon_engine_steps_total") == stats["steps"] == v("beacon_engine_step_seconds_count")
    assert v("beacon_request_success_total") == stats["finished"]
    assert v('beacon_request_success_total{finished_reason="cancelled"}') == 1
    rejected = prom.by(f"beacon_request_rejected_total{{{inst}}}", "reason")
    assert rejected == {"queue_full": 0, "invalid": 2, "draining": 0, "unauthenticated": 0, "other": 0}, rejected
    assert v("beacon_e2e_request_latency_seconds_count") == stats["finished"]
    assert v("beacon_request_queue_time_seconds_count") == stats["finished"]
    assert v("beacon_inter_token_latency_seconds_count") == gen - v("beacon_time_to_first_token_seconds_count")
    # Idle again.
    assert v("beacon_kv_pool_blocks") == stats["kv_blocks_total"] > 0
    assert v("beacon_kv_blocks_free") == stats["kv_blocks_total"]
    for g in ("beacon_kv_cache_usage_perc", "beacon_kv_cache_used_perc", "beacon_kv_blocks_used",
              "beacon_kv_blocks_reserved",
              "beacon_num_requests_running", "beacon_num_requests_waiting", "beacon_num_requests_compressing",
              "beacon_kv_cached_tokens", "beacon_kv_logical_tokens"):
        assert v(g) == 0, (g, v(g))
    # The default model (30 layers, 3 KV heads of 64) with the default bf16
    # cache: 2 (K, V) x 30 x 3 x 64 x 2 bytes; f32 would be twice that.
    assert v("beacon_kv_bytes_per_token") == 2 * 30 * 3 * 64 * 2, v("beacon_kv_bytes_per_token")
    # The info metric agrees with GetModelInfo.
    info = srv.stub.GetModelInfo(pb.GetModelInfoRequest())
    r = prom.query(f"beacon_server_info{{{inst}}}")
    assert len(r) == 1 and float(r[0]["value"][1]) == 1, r
    labels = r[0]["metric"]
    want = {"model": info.model, "architecture": info.architecture, "kv_block_size": str(info.kv_block_size),
            "kv_pool_tokens": str(info.kv_pool_tokens), "kv_policy": info.default_kv_policy,
            "kv_budget": str(info.default_kv_budget), "admission": info.admission, "kv_cache_dtype": "bf16",
            "metrics_prefix": "beacon"}
    assert {k: labels.get(k) for k in want} == want, (labels, want)
    assert v("beacon_kv_pool_blocks") * info.kv_block_size == info.kv_pool_tokens


def check_promtool(srv):
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.http_port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"]
        text = r.read()
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=60)
    assert p.returncode == 0, f"promtool check metrics:\n{p.stdout.decode()}{p.stderr.decode()}"
    for args in (["check", "rules", RULES], ["test", "rules", RULES_TEST], ["check", "config", EXAMPLE_CONFIG]):
        p = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, f"promtool {' '.join(args)}:\n{p.stdout}{p.stderr}"


def check_rules(prom):
    """Every rule of rules.yml is loaded and evaluates cleanly; every recording rule has data."""
    groups = prom.api("rules")["groups"]
    with open(RULES) as f:
        text = f.read()
    want_groups = set(re.findall(r"^  - name: (\S+)", text, re.M))
    assert {g["name"] for g in groups} == want_groups, groups
    records, alerts = set(), set()
    end = time.time() + 10
    for g in groups:
        for rule in g["rules"]:
            if rule["type"] == "recording":
                records.add(rule["name"])
            else:
                alerts.add(rule["name"])
    assert alerts >= {"BeaconKvCachePressure", "BeaconQueueGrowing", "BeaconTtftSloBurn", "BeaconNoProgress",
                      "BeaconHighRejectionRate", "BeaconDown"}, alerts
    while True:  # the rules have run at least once since the last group was loaded
        groups = prom.api("rules")["groups"]
        bad = [(r["name"], r.get("health"), r.get("lastError")) for g in groups for r in g["rules"]
               if r.get("health") != "ok"]
        if not bad:
            break
        assert time.time() < end, f"rules not healthy: {bad}"
        time.sleep(0.5)
    for name in sorted(records):
        assert prom.query(name), f"recording rule {name} has no data"
    firing = [a for a in prom.api("alerts")["alerts"] if a["state"] == "firing"]
    assert not firing, firing


GRAFANA_VARS = {"__rate_interval": "15s", "__interval": "1s", "__range": "1m", "__range_s": "60",
                "__interval_ms": "1000"}


def dashboard_exprs():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    assert dash.get("schemaVersion", 0) >= 36, dash.get("schemaVersion")
    names = {v["name"]: v for v in dash["templating"]["list"]}
    assert names["DS_PROMETHEUS"]["type"] == "datasource" and names["DS_PROMETHEUS"]["query"] == "prometheus"
    assert "instance" in names and "model_name" in names
    exprs = []

    def walk(o, where):
        if isinstance(o, dict):
            title = o.get("title", where)
            if isinstance(o.get("expr"), str):
                exprs.append((title, o["expr"]))
            if o.get("datasource") and isinstance(o["datasource"], dict) and o["datasource"].get("type") != "grafana":
                assert o["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, (title, o["datasource"])
            for k, val in o.items():
                if k != "templating":
                    walk(val, title)
        elif isinstance(o, list):
            for val in o:
                walk(val, where)

    walk(dash, "")
    return exprs, names


def substitute(expr, values):
    def sub(m):
        name = m.group(1) or m.group(2)
        assert name in values, f"unknown Grafana variable ${name} in {expr}"
        return values[name]
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", sub, expr)


def check_dashboard(prom, instance, start, end):
    exprs, names = dashboard_exprs()
    assert len(exprs) >= 20, len(exprs)
    # The model variable's query finds the served model name; the instance variable's, within the chosen
    # models, the server.
    assert "label_values(beacon_server_info, model_name)" in json.dumps(names["model_name"]["query"])
    assert "default" in prom.api("label/model_name/values", **{"match[]": "beacon_server_info"})
    assert 'label_values(beacon_server_info{model_name=~\\"$model_name\\"}, instance)' in \
        json.dumps(names["instance"]["query"]), names["instance"]["query"]
    assert instance in prom.api("label/instance/values", **{"match[]": 'beacon_server_info{model_name=~"default"}'})
    # Every query selects the chosen models and instances.
    unfiltered = [(t, e) for t, e in exprs if e.count('model_name=~"$model_name"') < e.count('instance=~"$instance"')
                  or 'instance=~"$instance"' not in e]
    assert not unfiltered, unfiltered
    # $instance and $model_name as Grafana writes them into regex matchers: All (".*"), and this one instance
    # and model, regex-escaped inside a PromQL string (backslashes doubled).
    empty = []
    for inst_value, model_value in ((".*", ".*"), (re.escape(instance).replace("\\", "\\\\"), "default")):
        values = dict(GRAFANA_VARS, instance=inst_value, model_name=model_value)
        for title, expr in exprs:
            q = substitute(expr, values)
            prom.query(q)  # parses and evaluates as an instant query
            series = prom.query_range(q, start, end, step=1)
            if not any(not math.isnan(float(val)) for s in series for _, val in s["values"]):
                empty.append(f"{title}: {q}")
    assert not empty, "dashboard queries without data:\n" + "\n".join(empty)
    return len(exprs)


def main():
    t0 = time.time()
    # --enable-prompt-tokens-details: the prefix-cache counters are checked against usage.cached_tokens.
    with Server("--kv-policy", "beacon", "--kv-budget", "64", "--kv-interval", "16",
                "--enable-prompt-tokens-details") as srv:
        target = f"127.0.0.1:{srv.http_port}"
        inst = f'instance="{target}"'
        prom = Prometheus(target, RULES)
        try:
            prom.wait_for(f'up{{{inst}}}', 1)
            print(f"ok prometheus up, scraping {target} ({time.time() - t0:.1f}s)")

            # Rejected before running: an unknown KV policy and max_tokens over the limit.
            expect_rpc_error(lambda: srv.stub.Generate(chat_request("hi", 8, kv=pb.KvOptions(policy="lru"))),
                             grpc.StatusCode.INVALID_ARGUMENT, "kv_policy")
            expect_rpc_error(lambda: srv.stub.Generate(chat_request("hi", 10 ** 7)),
                             grpc.StatusCode.INVALID_ARGUMENT, "max_tokens")

            load_start = time.time()
            results = run_load(srv)
            srv.wait_idle()
            finals = [last for _, _, last in results]
            gen1 = sum(f.usage.completion_tokens for f in finals)
            prompt1 = sum(f.usage.prompt_tokens for f in finals)
            prom.wait_for(f"sum(beacon_request_success_total{{{inst}}})", len(finals))
            prom.wait_for(f"beacon_generation_tokens_total{{{inst}}}", gen1)
            prom.wait_for(f"beacon_kv_blocks_used{{{inst}}}", 0)
            check_families(prom, inst)
            check_phase1(prom, inst, results)
            print(f"ok load: {len(finals)} requests, {gen1} tokens; counters and histograms exact "
                  f"({time.time() - t0:.1f}s)")

            cancel_seen = cancel_one(srv)
            srv.wait_idle()
            tok = srv.stub.Tokenize(pb.TokenizeRequest(chat=pb.ChatInput(
                messages=[pb.ChatMessage(role="user", content=PROMPTS[7])])))
            stats = srv.stats()
            prom.wait_for(f'beacon_request_success_total{{finished_reason="cancelled", {inst}}}', 1)
            prom.wait_for(f"beacon_generation_tokens_total{{{inst}}}", stats["generation_tokens"])
            prom.wait_for(f"beacon_engine_steps_total{{{inst}}}", stats["steps"])
            load_end = time.time()
            check_final(prom, inst, srv, gen1, prompt1, cancel_seen, len(tok.ids))
            check_during_load(prom, inst, load_start, load_end)
            print(f"ok cancel, idle gauges, gauges under load ({time.time() - t0:.1f}s)")

            check_rules(prom)
            print(f"ok rules.yml loaded and evaluated, recording rules have data ({time.time() - t0:.1f}s)")
            n = check_dashboard(prom, target, load_start - 2, time.time())
            print(f"ok dashboard: {n} PromQL expressions return data ({time.time() - t0:.1f}s)")
            check_promtool(srv)
            print(f"ok promtool check metrics / check rules / test rules / check config ({time.time() - t0:.1f}s)")
        except BaseException:
            print("---- prometheus log ----\n" + prom.read_log()[-3000:])
            raise
        finally:
            prom.stop()


if __name__ == "__main__":
    main()
