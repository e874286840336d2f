"""beacon-loadtest's OpenAI backends and dataset readers end to end, against a
real beacon-serve on the default model (tests/server/serve_util.py), over its
OpenAI HTTP API:

- token counts: what the load tester measured from the SSE streams (tokens
  from `usage`, warm-up included in `all`) equals the server's Prometheus
  counters (beacon_generation_tokens_total, beacon_prompt_tokens_total,
  beacon_request_success_total) over the same run, exactly, as the gRPC
  test checks for gRPC: /v1/completions with synthetic token ids and a KV
  mix; /v1/chat/completions over a ShareGPT file sampled by seed with the
  reference answers' token counts as max_tokens; /v1/completions over vLLM's
  custom JSONL with per-chunk usage (continuous_usage_stats);
- the streamed ITLs: one per token after the first, whichever usage mode;
- --dataset-sample with one seed picks the same entries twice, another seed
  others; an explicit --output-len overrides the file's lengths;
- --json-format vllm writes benchmark_serving's flat fields, consistent with
  the server's counters;
- errors: a request the server refuses (HTTP 400) is reported as
  INVALID_ARGUMENT; a malformed dataset names file, line/entry and field (exit
  2); bad backend combinations exit 2; an unreachable URL exits 1.

Runs in well under a minute on 2 CPU cores."""
import json
from collections import Counter
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from serve_util import Server  # noqa: E402
from test_loadtest_e2e import expect_ok, free_port, loadtest, metrics, successes  # noqa: E402

SHAREGPT = [
    {"id": "s0", "conversations": [{"from": "system", "value": "You are terse."},
                                   {"from": "human", "value": "Name a large river in Africa."},
                                   {"from": "gpt", "value": "The Nile, which flows north into the Mediterranean."}]},
    {"id": "s1", "conversations": [{"from": "human", "value": "What colour is the sky?"},
                                   {"from": "gpt", "value": "Blue, on a clear day."},
                                   {"from": "human", "value": "And at night?"}]},
    {"id": "s2", "conversations": [{"from": "human", "value": "Only a question, no answer"}]},  # skipped
    {"id": "s3", "conversations": [{"from": "human", "value": "Count to five."},
                                   {"from": "gpt", "value": "One, two, three, four, five."}]},
    {"id": "s4", "conversations": [{"from": "human", "value": "Say hello in French."},
                                   {"from": "gpt", "value": "Bonjour !"}]},
    {"id": "s5", "conversations": [{"from": "human", "value": "Give me a word that rhymes with cat."},
                                   {"from": "gpt", "value": "Hat. Also bat, mat and sat."}]},
]
USABLE = [e for e in SHAREGPT if e["id"] != "s2"]


def url(srv):
    return f"http://127.0.0.1:{srv.http_port}"


def counted_run(srv, tmp, name, *args):
    """Runs beacon-loadtest --json and returns (its JSON, the server's counter deltas over the run)."""
    out = os.path.join(tmp, name + ".json")
    m0 = metrics(srv)
    p = expect_ok("--server", url(srv), "--json", out, "--quiet", *args)
    srv.wait_idle()
    m1 = metrics(srv)
    with open(out) as f:
        result = json.load(f)
    delta = {k: m1.get(k, 0) - m0.get(k, 0) for k in ("beacon_generation_tokens_total", "beacon_prompt_tokens_total")}
    delta["finished"] = successes(m1) - successes(m0)
    return result, delta, p


def check_counts(name, result, delta, requests, exact_itl=False):
    every = result["summary"]["all"]
    assert every["requests"] == requests == delta["finished"], (name, every, delta)
    assert every["output_tokens"] == delta["beacon_generation_tokens_total"], (name, every, delta)
    assert every["prompt_tokens"] == delta["beacon_prompt_tokens_total"], (name, every, delta)
    reqs = result["requests"]
    assert len(reqs) == requests and all(r["ok"] and r["status"] == "OK" for r in reqs), (name, reqs)
    s = result["summary"]
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        q = s[key]
        assert q["count"] > 0 and 0 < q["median"] <= q["p90"] <= q["p99"] <= q["max"], (name, key, q)
    # ignore_eos: every token is streamed. With per-chunk usage there is one ITL per token after each request's
    # first; without it one per text-bearing chunk, and a chunk may hold several tokens (a partial UTF-8
    # character is sent with the next token's text).
    measured = [r for r in reqs if not r["warmup"]]
    itls = sum(r["output_tokens"] - 1 for r in measured)
    if exact_itl:
        assert s["itl_ms"]["count"] == itls, (name, s["itl_ms"], itls)
    else:
        assert 0 < s["itl_ms"]["count"] <= itls, (name, s["itl_ms"], itls)


def test_completions_token_ids(srv, tmp):
    result, delta, p = counted_run(
        srv, tmp, "completions", "--backend", "openai", "--concurrency", "3", "--requests", "9", "--warmup", "1",
        "--prompt-len", "fixed:24", "--output-len", "fixed:16", "--ignore-eos", "--kv-mix", "full,beacon@32",
        "--seed", "5", "--slo", "ttft_ms=60000")
    check_counts("completions", result, delta, 10)
    s = result["summary"]
    assert s["output_tokens"] == 9 * 16 and s["prompt_tokens"] == 9 * 24, s
    assert {r["kv"] for r in result["requests"]} == {"full", "beacon@32"}
    assert result["config"]["backend"] == "openai" and result["config"]["model"] == "default", result["config"]
    assert "9 measured: 9 ok, 0 failed (1 warm-up)" in p.stdout, p.stdout
    # The same with usage in every chunk: exact per-token ITLs.
    cu, cu_delta, _ = counted_run(
        srv, tmp, "completions-cu", "--backend", "openai", "--concurrency", "3", "--requests", "9", "--prompt-len",
        "fixed:24", "--output-len", "fixed:16", "--ignore-eos", "--seed", "5", "--continuous-usage")
    check_counts("completions-cu", cu, cu_delta, 9, exact_itl=True)
    print(f"ok openai /v1/completions (token ids, KV mix): {s['all']['output_tokens']} output + "
          f"{s['all']['prompt_tokens']} prompt tokens = the server's counters; ITLs {s['itl_ms']['count']} by chunk, "
          f"{cu['summary']['itl_ms']['count']} by token with continuous usage")


def test_chat_sharegpt(srv, tmp):
    path = os.path.join(tmp, "dataset-sharegpt.json")
    with open(path, "w") as f:
        json.dump(SHAREGPT, f)
    # The reference answers' lengths by the server's own tokenizer.
    ref = {}
    for e in USABLE:
        turns = [t for t in e["conversations"]]
        h = next(i for i, t in enumerate(turns) if t["from"] != "system")
        status, body = srv.http_post("/tokenize", json.dumps({"prompt": turns[h + 1]["value"]}))
        assert status == 200, body
        ref[e["id"]] = body["count"]
    runs = {}
    for seed in ("1", "1", "2"):
        result, delta, _ = counted_run(
            srv, tmp, "sharegpt", "--backend", "openai-chat", "--dataset", f"sharegpt:{path}", "--dataset-sample", "3",
            "--reference-output-len", "--ignore-eos", "--concurrency", "2", "--requests", "3", "--seed", seed)
        check_counts("sharegpt", result, delta, 3)
        lens = [r["max_tokens"] for r in sorted(result["requests"], key=lambda r: r["index"])]
        # Every request asked for a reference answer's length, each from a different entry.
        assert not Counter(lens) - Counter(ref.values()), (lens, ref)
        assert [r["output_tokens"] for r in sorted(result["requests"], key=lambda r: r["index"])] == lens
        prompts = [r["prompt_tokens"] for r in sorted(result["requests"], key=lambda r: r["index"])]
        runs.setdefault(seed, []).append((lens, prompts))
    assert runs["1"][0] == runs["1"][1], runs  # the same seed: the same subset, in the same order
    assert runs["1"][0] != runs["2"][0], runs  # another seed: another draw
    assert result["config"]["dataset"] == "sharegpt"
    # An explicit --output-len overrides the file's lengths.
    result, delta, _ = counted_run(srv, tmp, "sharegpt-fixed", "--backend", "openai-chat", "--dataset",
                                   f"sharegpt:{path}", "--output-len", "fixed:5", "--ignore-eos", "--concurrency", "2",
                                   "--requests", "5")
    check_counts("sharegpt-fixed", result, delta, 5)
    assert all(r["max_tokens"] == 5 == r["output_tokens"] for r in result["requests"])
    print(f"ok openai-chat over ShareGPT: reference lengths {sorted(ref.values())}, seeded samples repeat, "
          f"token counts = the server's")


def test_custom_continuous_usage_and_vllm_json(srv, tmp):
    path = os.path.join(tmp, "dataset-custom.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps({"prompt": "The capital of France is", "output_tokens": 12}) + "\n")
        f.write(json.dumps({"prompt": "def add(a, b):", "output_tokens": 7}) + "\n")
    result, delta, _ = counted_run(srv, tmp, "custom", "--backend", "openai", "--dataset", f"custom:{path}",
                                   "--continuous-usage", "--ignore-eos", "--concurrency", "2", "--requests", "4")
    check_counts("custom", result, delta, 4, exact_itl=True)
    assert [r["max_tokens"] for r in sorted(result["requests"], key=lambda r: r["index"])] == [12, 7, 12, 7]
    # vLLM's result shape, on the same server.
    out = os.path.join(tmp, "vllm.json")
    m0 = metrics(srv)
    expect_ok("--server", url(srv), "--backend", "openai", "--dataset", f"custom:{path}", "--ignore-eos",
              "--concurrency", "2", "--requests", "4", "--slo", "ttft_ms=60000", "--json-format", "vllm",
              "--json", out, "--quiet")
    srv.wait_idle()
    m1 = metrics(srv)
    with open(out) as f:
        v = json.load(f)
    for k in ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
              "request_goodput", "output_throughput", "total_token_throughput", "input_lens", "output_lens", "ttfts",
              "itls", "errors", "backend", "model_id", "num_prompts", "max_concurrency"):
        assert k in v, (k, sorted(v))
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p90", "p99"):
            assert isinstance(v[f"{stat}_{metric}_ms"], float), (metric, stat, v.get(f"{stat}_{metric}_ms"))
        assert 0 < v[f"median_{metric}_ms"] <= v[f"p99_{metric}_ms"], metric
    assert v["completed"] == 4 and v["failed"] == 0 and v["max_concurrency"] == 2, v
    assert v["total_output_tokens"] == sum(v["output_lens"]) == 38 == \
        m1["beacon_generation_tokens_total"] - m0["beacon_generation_tokens_total"], v
    assert v["total_input_tokens"] == m1["beacon_prompt_tokens_total"] - m0["beacon_prompt_tokens_total"]
    assert v["request_goodput"] == v["request_throughput"] > 0 and v["errors"] == [""] * 4, v
    assert v["total_token_throughput"] > v["output_throughput"] > 0
    print(f"ok custom JSONL with continuous usage; --json-format vllm: {v['completed']} completed, "
          f"{v['total_output_tokens']} output tokens = the server's, p99 TPOT {v['p99_tpot_ms']:.1f} ms")


def test_errors(srv, tmp):
    out = os.path.join(tmp, "refused.json")
    p = loadtest("--server", url(srv), "--backend", "openai", "--concurrency", "2", "--requests", "3",
                 "--prompt-len", "uniform:9000:9100", "--output-len", "fixed:4", "--json", out, "--quiet")
    assert p.returncode == 1 and "INVALID_ARGUMENT 3" in p.stdout, (p.returncode, p.stdout, p.stderr)
    with open(out) as f:
        r = json.load(f)
    assert all("HTTP 400" in q["error"] for q in r["requests"]), r["requests"]
    assert r["summary"]["all"]["prompt_tokens"] == 0
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"prompt": "ok"}\n{"prompt": "x", "output_tokens": "many"}\n')
    good = os.path.join(tmp, "good.jsonl")
    with open(good, "w") as f:
        f.write('{"prompt": "ok"}\n')
    badsg = os.path.join(tmp, "bad_sharegpt.json")
    with open(badsg, "w") as f:
        json.dump([{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt"}]}], f)
    cases = [
        (["--backend", "openai-chat", "--concurrency", "1"], 2, "synthetic token-id prompts need --backend openai"),
        (["--backend", "openai", "--dataset", f"custom:{bad}", "--concurrency", "1"], 2,
         f"{bad}:2: \"output_tokens\" must be a positive integer"),
        (["--backend", "openai", "--dataset", f"sharegpt:{badsg}", "--concurrency", "1"], 2,
         f"{badsg}: entry 0: conversations[1].value must be a string"),
        (["--backend", "openai", "--dataset", "alpaca:x", "--concurrency", "1"], 2, "unknown kind 'alpaca'"),
        (["--backend", "openai", "--dataset", f"custom:{good}", "--reference-output-len", "--concurrency", "1"], 2,
         "--reference-output-len takes ShareGPT"),
        (["--backend", "openai", "--dataset-sample", "2", "--concurrency", "1"], 2, "--dataset-sample needs --dataset"),
        (["--backend", "vllm", "--concurrency", "1"], 2, "--backend must be grpc, openai or openai-chat"),
        (["--backend", "openai", "--server", "localhost:8000", "--concurrency", "1"], 2, "must start with http://"),
        (["--server", "http://127.0.0.1:8000", "--concurrency", "1"], 2, "--backend grpc takes HOST:PORT"),
        (["--backend", "openai", "--concurrency", "1", "--json-format", "csv"], 2, "--json-format must be"),
        (["--backend", "openai", "--server", f"http://127.0.0.1:{free_port()}", "--concurrency", "1"], 1,
         "cannot reach an OpenAI-compatible server at http://127.0.0.1:"),
    ]
    for args, code, needle in cases:
        if "--server" not in args:
            args = ["--server", url(srv)] + args
        p = loadtest(*args, timeout=60)
        assert p.returncode == code, f"{args}: rc {p.returncode}, expected {code}\n{p.stderr}"
        assert needle in p.stderr, f"{args}: {needle!r} not in stderr: {p.stderr!r}"
    print(f"ok refused requests by code (HTTP 400 -> INVALID_ARGUMENT); {len(cases)} bad argument cases")


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp, Server("--kv-interval", "8") as srv:
        test_completions_token_ids(srv, tmp)
        test_chat_sharegpt(srv, tmp)
        test_custom_continuous_usage_and_vllm_json(srv, tmp)
        test_errors(srv, tmp)
    print(f"ok beacon-loadtest OpenAI backends end to end ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
