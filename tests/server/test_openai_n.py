"""n > 1 samples over the official `openai` client and gRPC, on the real
server and default model: n choices, each equal to the same request sent
alone with seed + i (chat and completions, streamed and not); the prompt's KV
blocks held once (the pool gauges of /v1/engine/stats) with admission's
reservation agreeing; usage counting the prompt once.

Env: BEACON_BIN, BEACON_MODEL, BEACON_SOURCE_DIR.
"""
import json
import os
import sys
import threading
import time
import urllib.request

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, collect, pb  # noqa: E402

MSG = [{"role": "user", "content": "Name a fruit and say why you like it."}]


def client(srv):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{srv.http_port}/v1", api_key="x", max_retries=0, timeout=120)


def test_chat_and_completions(srv):
    c = client(srv)
    kw = dict(model="default", messages=MSG, max_tokens=16, temperature=1.0, seed=7, extra_body={"ignore_eos": True})
    r = c.chat.completions.create(n=4, **kw)
    assert sorted(ch.index for ch in r.choices) == [0, 1, 2, 3], r
    texts = {ch.index: ch.message.content for ch in r.choices}
    alone = [c.chat.completions.create(**{**kw, "seed": 7 + i}) for i in range(4)]
    for i in range(4):
        assert texts[i] == alone[i].choices[0].message.content, (i, texts[i], alone[i].choices[0].message.content)
    assert len(set(texts.values())) > 1, texts  # different seeds, different samples
    # usage: the prompt once, every sample's completion.
    assert r.usage.prompt_tokens == alone[0].usage.prompt_tokens
    assert r.usage.completion_tokens == 4 * 16
    # Streamed: the same text per choice index, one finish per choice, usage at the end.
    streamed, finishes, usage = {}, {}, None
    for ch in c.chat.completions.create(n=4, stream=True, stream_options={"include_usage": True}, **kw):
        if ch.usage is not None:
            usage = ch.usage
        for choice in ch.choices:
            streamed[choice.index] = streamed.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
    assert streamed == texts, (streamed, texts)
    assert finishes == {i: "length" for i in range(4)}, finishes
    assert usage.completion_tokens == 64 and usage.prompt_tokens == r.usage.prompt_tokens
    # vLLM's continuous usage: every chunk counts all choices' tokens so far.
    counts = [ch.usage.completion_tokens for ch in c.chat.completions.create(
        n=4, stream=True, stream_options={"include_usage": True, "continuous_usage_stats": True}, **kw) if ch.usage]
    assert counts == sorted(counts) and counts[-1] == 64, counts
    # Completions, with logprobs per choice.
    ck = dict(model="default", prompt="My favourite city is", max_tokens=8, temperature=0.8, seed=3, logprobs=1,
              extra_body={"ignore_eos": True})
    cr = c.completions.create(n=3, **ck)
    for ch in cr.choices:
        one = c.completions.create(**{**ck, "seed": 3 + ch.index}).choices[0]
        assert ch.text == one.text and ch.logprobs.tokens == one.logprobs.tokens, (ch.index, ch.text, one.text)
        assert ch.logprobs.token_logprobs == one.logprobs.token_logprobs
    print("chat and completions: n choices equal the requests alone")


def test_grpc(srv):
    req = pb.GenerateRequest(text="The ship left the harbour", sampling=pb.SamplingParams(temperature=1.0, seed=11, n=3),
                             stopping=pb.StoppingCriteria(max_tokens=10, ignore_eos=True))
    by_index, finals = {}, {}
    for m in srv.stub.Generate(req):
        by_index.setdefault(m.index, []).extend(m.token_ids)
        if m.finish_reason != pb.FINISH_REASON_UNSPECIFIED:
            finals[m.index] = m
    assert sorted(by_index) == [0, 1, 2] and sorted(finals) == [0, 1, 2], (by_index, finals)
    for i in range(3):
        alone = pb.GenerateRequest(text="The ship left the harbour",
                                   sampling=pb.SamplingParams(temperature=1.0, seed=11 + i),
                                   stopping=pb.StoppingCriteria(max_tokens=10, ignore_eos=True))
        ids, _, last = collect(srv.stub.Generate(alone))
        assert ids == by_index[i], (i, ids, by_index[i])
        assert finals[i].seed == last.seed == 11 + i
    print("gRPC: n samples with their indexes")


def stats(srv):
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.http_port}/v1/engine/stats", timeout=10) as r:
        return json.loads(r.read())


def test_prompt_blocks_once(srv):
    """n = 8 with a 1,003-token prompt: 62 prompt blocks held once (16 slots a
    block: all whole blocks before the last prompt token's), each sample its
    own 5 for the last 11 prompt tokens and 64 generated."""
    status, tok = srv.http_post("/tokenize", json.dumps({"prompt": "The history of the old city " * 167}))
    assert status == 200 and tok["count"] == 1003, tok
    peaks = {}
    for n in (1, 8):
        done = {}
        body = {"prompt": tok["tokens"], "max_tokens": 64, "n": n, "seed": 1, "temperature": 1.0, "ignore_eos": True}
        t = threading.Thread(target=lambda: done.update(r=srv.http_post("/v1/completions", json.dumps(body))))
        t.start()
        used = reserved = 0
        while t.is_alive():
            s = stats(srv)
            used = max(used, s["kv_blocks_total"] - s["kv_blocks_free"])
            reserved = max(reserved, s["kv_blocks_reserved"])
            time.sleep(0.002)
        t.join()
        assert done["r"][0] == 200, done
        peaks[n] = (used, reserved)
    # One sample: 1003 + 64 slots = 67 blocks reserved (what it can reach).
    assert peaks[1][1] == 67, peaks
    # Eight: sample 0's 67 and the others' own 5 each reserved; held at most the same.
    assert peaks[8][1] == 67 + 7 * 5, peaks
    assert 62 + 8 * 4 <= peaks[8][0] <= 62 + 8 * 5, peaks  # vs 8 x 67 = 536 without sharing
    print(f"n=8, 1003-token prompt: peak {peaks[8][0]} blocks held, {peaks[8][1]} reserved (n=1: {peaks[1]})")


def main():
    with Server("--kv-policy", "full") as srv:
        test_chat_and_completions(srv)
        test_grpc(srv)
        test_prompt_blocks_once(srv)
    print("PASS")


if __name__ == "__main__":
    main()
