"""Automatic prefix caching end to end, on the real server and default model:
requests sharing a long system prompt reuse its KV (OpenAI's
usage.prompt_tokens_details.cached_tokens, gRPC usage.cached_tokens, the
beacon_prefix_cache_* families on /metrics, /v1/engine/stats), and every
answer is, token for token, the answer of a server started with
--no-prefix-cache, under full and under beacon evicting. A cancelled
request that shares blocks frees nothing another request holds: the server
ends idle with every block free.

Env: BEACON_BIN, BEACON_MODEL, BEACON_SOURCE_DIR.
"""
import os
import re
import sys
import urllib.request

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, collect, pb  # noqa: E402

SYSTEM = ("You are a careful assistant for a team that ships reasoning models. Answer in one short sentence. "
          "Rules: be precise, cite the plan you wrote at the start, never invent numbers, say so when unsure. ") * 4
QUESTIONS = ["What is a KV cache?", "Why evict tokens?", "What is a beacon query?", "Name one risk of eviction."]


def ask(c, q, **kw):
    return c.chat.completions.create(model="default", messages=[{"role": "system", "content": SYSTEM},
                                                                 {"role": "user", "content": q}],
                                     max_tokens=64, temperature=0, extra_body={"ignore_eos": True, **kw})


def metric(srv, name):
    body = urllib.request.urlopen(f"http://127.0.0.1:{srv.http_port}/metrics", timeout=10).read().decode()
    m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", body, re.M)
    assert m, (name, body[:2000])
    return float(m.group(1))


def answers(srv, **kw):
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.http_port}/v1", api_key="x", max_retries=0, timeout=120)
    return [ask(c, q, **kw) for q in QUESTIONS]


def main():
    # The default policy is beacon, evicting every 8 tokens past a budget of 32.
    # --enable-prompt-tokens-details: the shared cache's reuse is read from usage here;
    # test_cached_tokens_withheld_by_default checks the default.
    flags = ("--kv-policy", "beacon", "--kv-budget", "32", "--kv-interval", "8", "--kv-min-budget", "16",
             "--enable-prompt-tokens-details")
    beacon = {"kv_policy": "beacon", "kv_budget": 32}
    with Server("--no-prefix-cache", *flags) as off:
        want_full = [r.choices[0].message.content for r in answers(off, kv_policy="full")]
        want_beacon = [r.choices[0].message.content for r in answers(off, **beacon)]
        assert want_full != want_beacon  # beacon evicted, and that changed the answers
        assert all(r.usage.prompt_tokens_details.cached_tokens == 0 for r in answers(off)[:1])
        assert off.stats()["prefix_cache"] is False
    with Server(*flags) as srv:
        q0, h0 = metric(srv, "beacon_prefix_cache_queries_total"), metric(srv, "beacon_prefix_cache_hits_total")
        full = answers(srv, kv_policy="full")
        got = [r.choices[0].message.content for r in full]
        assert got == want_full, (got, want_full)
        prompt = full[0].usage.prompt_tokens
        cached = [r.usage.prompt_tokens_details.cached_tokens for r in full]
        # The first request computes the system prompt; the others reuse its whole blocks.
        assert cached[0] == 0 and all(c >= 0.5 * prompt and c % 16 == 0 for c in cached[1:]), (cached, prompt)
        beacon_runs = answers(srv, **beacon)
        got_beacon = [r.choices[0].message.content for r in beacon_runs]
        assert got_beacon == want_beacon, (got_beacon, want_beacon)
        assert all(r.usage.prompt_tokens_details.cached_tokens > 0 for r in beacon_runs)
        hits = metric(srv, "beacon_prefix_cache_hits_total") - h0
        queries = metric(srv, "beacon_prefix_cache_queries_total") - q0
        assert hits == sum(cached) + sum(r.usage.prompt_tokens_details.cached_tokens for r in beacon_runs), hits
        assert queries == sum(r.usage.prompt_tokens for r in full + beacon_runs), (queries, hits)
        # Streamed usage carries it too.
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.http_port}/v1", api_key="x", max_retries=0, timeout=120)
        usage = [ch.usage for ch in c.chat.completions.create(
            model="default", messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi."}],
            max_tokens=4, temperature=0, stream=True, stream_options={"include_usage": True}) if ch.usage][-1]
        assert usage.prompt_tokens_details.cached_tokens == cached[1], usage
        # gRPC: the same request reports its reuse in the final message.
        req = pb.GenerateRequest(chat=pb.ChatInput(messages=[pb.ChatMessage(role="system", content=SYSTEM),
                                                             pb.ChatMessage(role="user", content=QUESTIONS[0])]),
                                 stopping=pb.StoppingCriteria(max_tokens=64, ignore_eos=True),
                                 sampling=pb.SamplingParams(temperature=0))
        _, text, last = collect(srv.stub.Generate(req, timeout=120))  # the default policy: beacon
        assert text == want_beacon[0] and last.usage.cached_tokens >= cached[1], (text, last.usage)
        assert last.kv.evictions > 0, last.kv
        # A cancelled stream that held shared blocks frees only its own.
        stream = srv.stub.Generate(pb.GenerateRequest(
            chat=pb.ChatInput(messages=[pb.ChatMessage(role="system", content=SYSTEM),
                                        pb.ChatMessage(role="user", content="Count to a thousand.")]),
            stopping=pb.StoppingCriteria(max_tokens=500, ignore_eos=True)), timeout=120)
        next(stream)
        stream.cancel()
        s = srv.wait_idle()
        assert s["prefix_cache"] is True and s["prefix_cache_blocks"] > 0, s
        assert s["prefix_cache_idle_blocks"] == s["prefix_cache_blocks"], s
        assert metric(srv, "beacon_prefix_cache_idle_blocks") == s["prefix_cache_idle_blocks"]
        assert metric(srv, "beacon_kv_blocks_used") == 0
        # The cache still answers after the cancel.
        again = answers(srv, kv_policy="full")
        assert [r.choices[0].message.content for r in again] == want_full
    test_cached_tokens_withheld_by_default()
    print("prefix cache: OK")


def test_cached_tokens_withheld_by_default():
    """Without --enable-prompt-tokens-details a request on the shared cache is not told its reuse
    (the count would tell it which prefixes other clients sent), while the cache still works (the
    metrics count the hits); a request in its own partition (a cache_salt) is told its own."""
    with Server() as srv:
        h0 = metric(srv, "beacon_prefix_cache_hits_total")
        shared = answers(srv, kv_policy="full")
        assert all(r.usage.prompt_tokens_details is None for r in shared), [r.usage for r in shared]
        assert metric(srv, "beacon_prefix_cache_hits_total") - h0 > 0  # reused all the same
        req = pb.GenerateRequest(chat=pb.ChatInput(messages=[pb.ChatMessage(role="system", content=SYSTEM),
                                                             pb.ChatMessage(role="user", content=QUESTIONS[0])]),
                                 stopping=pb.StoppingCriteria(max_tokens=4), sampling=pb.SamplingParams(temperature=0))
        _, _, last = collect(srv.stub.Generate(req, timeout=120))
        assert last.usage.cached_tokens == 0, last.usage  # reused, not told
        salted = answers(srv, kv_policy="full", cache_salt="tenant-a")
        cached = [r.usage.prompt_tokens_details.cached_tokens for r in salted]
        # The salt's own partition: the first computes, the rest reuse its blocks, and are told.
        assert cached[0] == 0 and all(c > 0 for c in cached[1:]), cached
        req.cache_salt = "tenant-a"
        _, _, last = collect(srv.stub.Generate(req, timeout=120))
        assert last.usage.cached_tokens > 0, last.usage
        srv.wait_idle()


if __name__ == "__main__":
    main()
