"""Log probabilities over the official `openai` client and gRPC, against the
NumPy reference's log-softmax; tokenize/detokenize; the sampling defaults.

The server runs an all-F32 copy of the default model with an f32 KV cache
(tests/reference/test_numpy_logits_f32.py: there the engine's logits match
the reference to 2e-4 relative RMS), so the logprobs of the engine and of
log_softmax(reference logits) differ only by float rounding. Tolerance:
LP_TOL = 1e-3 nats absolute on every reported value (measured max printed:
3.5e-5 on 2026-12-01); a wrong softmax (no max shift in float32, a missed
temperature, an off-by-one row) is off by whole nats.

Covered: completions with echo + logprobs (prompt tokens included, the
first null), streamed and not; chat logprobs + top_logprobs, streamed and
not; vLLM's prompt_logprobs; --logprobs-mode processed at temperature 0.5
(log_softmax(logits / 0.5)); gRPC OutputOptions.logprobs equal to HTTP's;
/tokenize, /detokenize and gRPC Detokenize; the temperature default (1.0
without a generation config; a generation_config.json's values with
--generation-config; --override-generation-config) as GetModelInfo and
/v1/models report it.

Env: BEACON_BIN, BEACON_MODEL, BEACON_SOURCE_DIR. ~0.6 GB temporary disk.
"""
import json
import os
import sys
import tempfile

import numpy as np
import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))

from serve_util import MODEL, Server, chat_request, collect, pb  # noqa: E402
from gguf_numpy import write_dequantized_copy  # noqa: E402
from numpy_model import NumpyModel  # noqa: E402

LP_TOL = 1e-3
worst = [0.0]


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def close(got, want, what):
    err = abs(got - want)
    worst[0] = max(worst[0], err)
    assert err <= LP_TOL, f"{what}: engine {got}, reference {want} (|diff| {err:.2e} > {LP_TOL})"


def tid(token):
    assert token.startswith("token_id:"), token
    return int(token[len("token_id:"):])


def client(srv):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{srv.http_port}/v1", api_key="x", max_retries=0, timeout=120)


def check_top(ref_row, top, n, what, also=None):
    """`top`: {id: logprob} as reported: the n most likely, plus token `also`
    (the position's own, which OpenAI's completions shape always adds)."""
    others = {i: v for i, v in top.items() if i != also}
    assert len(others) >= n - (also is not None), (what, top)
    kth = np.sort(ref_row)[-n]
    for i, lp in top.items():
        close(lp, ref_row[i], f"{what} top id {i}")
    for i in others:
        assert ref_row[i] >= kth - LP_TOL, f"{what}: id {i} is not among the {n} most likely"


def test_completions(srv, ref_model):
    c = client(srv)
    kw = dict(model="default", prompt="The capital of France is", max_tokens=8, temperature=0, logprobs=5, echo=True,
              extra_body={"return_tokens_as_token_ids": True})
    r = c.completions.create(**kw)
    lp = r.choices[0].logprobs
    ids = [tid(t) for t in lp.tokens]
    n_prompt = r.usage.prompt_tokens
    assert len(ids) == n_prompt + r.usage.completion_tokens, (len(ids), r.usage)
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None  # the first prompt token has none
    assert r.choices[0].text.startswith("The capital of France is")
    ref = log_softmax(ref_model.forward(ids))
    for t in range(1, len(ids)):
        close(lp.token_logprobs[t], ref[t - 1, ids[t]], f"completions position {t}")
        top = {tid(k): v for k, v in lp.top_logprobs[t].items()}
        assert ids[t] in top  # the token itself is always in the dict (OpenAI's legacy shape)
        check_top(ref[t - 1], top, 5, f"completions position {t}", also=ids[t])
    # Greedy: every generated token is the reference's most likely (or within rounding of it).
    for t in range(n_prompt, len(ids)):
        assert ref[t - 1, ids[t]] >= ref[t - 1].max() - LP_TOL, t
    # Streamed: the same tokens and values, chunk by chunk.
    tokens, values = [], []
    for ch in c.completions.create(stream=True, **kw):
        if ch.choices and ch.choices[0].logprobs is not None:
            tokens += ch.choices[0].logprobs.tokens
            values += ch.choices[0].logprobs.token_logprobs
    assert tokens == lp.tokens, (tokens, lp.tokens)
    assert values == lp.token_logprobs
    print(f"completions: {len(ids)} positions checked")


def test_chat(srv, ref_model):
    c = client(srv)
    msgs = [{"role": "user", "content": "Name a colour."}]
    status, body = srv.http_post("/tokenize", json.dumps({"messages": msgs}))
    assert status == 200, body
    prompt_ids = body["tokens"]
    kw = dict(model="default", messages=msgs, max_tokens=6, temperature=0, logprobs=True, top_logprobs=3,
              extra_body={"return_tokens_as_token_ids": True, "prompt_logprobs": 2})
    raw = c.chat.completions.with_raw_response.create(**kw)
    r = raw.parse()
    content = r.choices[0].logprobs.content
    gen = [tid(e.token) for e in content]
    assert len(gen) == r.usage.completion_tokens or len(gen) == r.usage.completion_tokens - 1  # EOS unreported
    ids = prompt_ids + gen
    ref = log_softmax(ref_model.forward(ids))
    for k, e in enumerate(content):
        row = ref[len(prompt_ids) - 1 + k]
        close(e.logprob, row[gen[k]], f"chat token {k}")
        assert len(e.top_logprobs) == 3
        check_top(row, {tid(t.token): t.logprob for t in e.top_logprobs}, 3, f"chat token {k}")
        assert bytes(e.bytes) == f"token_id:{gen[k]}".encode()
    # vLLM's prompt_logprobs: null, then {id: {logprob, rank, decoded_token}} per prompt token.
    prompt_lp = json.loads(raw.text)["prompt_logprobs"]
    assert prompt_lp[0] is None and len(prompt_lp) == len(prompt_ids)
    for t in range(1, len(prompt_ids)):
        entry = {int(k): v for k, v in prompt_lp[t].items()}
        assert prompt_ids[t] in entry
        for i, v in entry.items():
            close(v["logprob"], ref[t - 1, i], f"prompt position {t} id {i}")
            assert v["rank"] == 1 + int((ref[t - 1] > ref[t - 1, i] + 1e-9).sum()) or abs(
                ref[t - 1, i] - np.sort(ref[t - 1])[-v["rank"]]) < LP_TOL
    # Streamed chat: the same entries.
    streamed = []
    for ch in c.chat.completions.create(stream=True, **kw):
        if ch.choices and ch.choices[0].logprobs is not None:
            streamed += ch.choices[0].logprobs.content
    assert [e.token for e in streamed] == [e.token for e in content]
    assert [e.logprob for e in streamed] == [e.logprob for e in content]
    print(f"chat: {len(gen)} tokens and {len(prompt_ids) - 1} prompt positions checked")
    return prompt_ids, gen


def test_grpc(srv, prompt_ids, gen):
    """OutputOptions.logprobs over gRPC: the same tokens and values as HTTP's chat."""
    req = pb.GenerateRequest(tokens=pb.TokenIds(ids=prompt_ids), sampling=pb.SamplingParams(temperature=0),
                             stopping=pb.StoppingCriteria(max_tokens=6),
                             output=pb.OutputOptions(logprobs=3, prompt_logprobs=1))
    msgs = list(srv.stub.Generate(req))
    lps = [lp for m in msgs for lp in m.logprobs]
    ids = [i for m in msgs for i in m.token_ids]
    assert [lp.token_id for lp in lps] == ids == gen[:len(ids)], (ids, gen)
    assert all(lp.rank == 1 and len(lp.top) == 3 and lp.top[0].token_id == lp.token_id for lp in lps)
    first = msgs[0]
    assert list(first.prompt_token_ids) == prompt_ids and len(first.prompt_logprobs) == len(prompt_ids) - 1
    assert all(len(p.top) == 1 for p in first.prompt_logprobs)
    text = srv.stub.Detokenize(pb.DetokenizeRequest(ids=ids)).text
    assert text == "".join(m.text for m in msgs), text
    bad = pb.DetokenizeRequest(ids=[1, 10 ** 7])
    try:
        srv.stub.Detokenize(bad)
        raise AssertionError("Detokenize accepted an id outside the vocabulary")
    except Exception as e:  # grpc.RpcError
        assert "ids[1]" in str(e), e


def test_processed(f32_path, ref_model):
    with Server("--kv-cache-dtype", "f32", "--kv-policy", "full", "--served-model-name", "default",
                "--logprobs-mode", "processed", model=f32_path) as srv:
        info = srv.stub.GetModelInfo(pb.GetModelInfoRequest())
        assert info.logprobs_mode == "processed" and info.max_logprobs == 20
        c = client(srv)
        r = c.completions.create(model="default", prompt="Once upon a time", max_tokens=6, temperature=0.5, seed=3,
                                 logprobs=2, echo=True, extra_body={"return_tokens_as_token_ids": True})
        lp = r.choices[0].logprobs
        ids = [tid(t) for t in lp.tokens]
        n_prompt = r.usage.prompt_tokens
        logits = ref_model.forward(ids)
        raw, hot = log_softmax(logits), log_softmax(logits / 0.5)
        for t in range(1, len(ids)):
            # Prompt positions are raw; sampled ones at the sampler's temperature.
            close(lp.token_logprobs[t], (hot if t >= n_prompt else raw)[t - 1, ids[t]], f"processed position {t}")
    print("processed mode checked")


def test_tokenize_routes(srv):
    status, body = srv.http_post("/tokenize", json.dumps({"prompt": "Hello world", "return_token_strs": True}))
    assert status == 200, body
    tok = body
    assert tok["count"] == len(tok["tokens"]) == 2 and tok["token_strs"] == ["Hello", " world"], tok
    assert tok["max_model_len"] == 8192
    status, body = srv.http_post("/detokenize", json.dumps({"tokens": tok["tokens"]}))
    assert status == 200 and body == {"prompt": "Hello world"}, body
    for path, payload, field in [("/tokenize", {"prompt": "x", "add_generation_prompt": True}, "add_generation_prompt"),
                                 ("/tokenize", {"prompt": "x", "extra": 1}, "extra"),
                                 ("/tokenize", {}, "prompt"),
                                 ("/detokenize", {"tokens": [1, -4]}, "tokens[1]"),
                                 ("/detokenize", {"tokens": [10 ** 7]}, "tokens[0]")]:
        status, body = srv.http_post(path, json.dumps(payload))
        err = body["error"]
        assert status == 400 and field in err["message"] and err["param"] == field, (path, payload, status, body)


def seeded_text(srv, top_k=None, **sampling):
    extra = {"ignore_eos": True} if top_k is None else {"ignore_eos": True, "top_k": top_k}
    r = client(srv).completions.create(model="default", prompt="My favourite animal is", max_tokens=16, seed=77,
                                       extra_body=extra, **sampling)
    return r.choices[0].text


def test_defaults():
    # No generation config (a GGUF without general.sampling keys): OpenAI's temperature 1.
    with Server() as srv:
        info = srv.stub.GetModelInfo(pb.GetModelInfoRequest())
        d = info.default_sampling
        assert (d.temperature, d.top_p, d.top_k, d.source) == (1.0, 1.0, 0, "openai"), d
        models = srv.http("/v1/models")[1]["data"][0]
        assert models["default_sampling"]["temperature"] == 1.0, models
        left_out = seeded_text(srv)
        assert left_out == seeded_text(srv, temperature=1.0)
        assert left_out != seeded_text(srv, temperature=0)
        # gRPC the same: a request without temperature samples at 1.0.
        a, _, _ = collect(srv.stub.Generate(chat_request("Say a word.", 12, sampling=pb.SamplingParams(seed=5),
                                                         ignore_eos=True)))
        b, _, _ = collect(srv.stub.Generate(chat_request("Say a word.", 12, ignore_eos=True,
                                                         sampling=pb.SamplingParams(seed=5, temperature=1.0))))
        assert a == b
    # A generation_config.json: its values become the defaults, a request's own still win.
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "generation_config.json"), "w") as f:
            json.dump({"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 20, "bos_token_id": 1}, f)
        with Server("--generation-config", tmp) as srv:
            d = srv.stub.GetModelInfo(pb.GetModelInfoRequest()).default_sampling
            assert (round(d.temperature, 6), round(d.top_p, 6), d.top_k) == (0.6, 0.9, 20), d
            assert d.source == "generation_config.json", d
            assert seeded_text(srv) == seeded_text(srv, temperature=0.6, top_p=0.9, top_k=20)
        with Server("--generation-config", tmp, "--override-generation-config", '{"temperature": 0}') as srv:
            d = srv.stub.GetModelInfo(pb.GetModelInfoRequest()).default_sampling
            assert d.temperature == 0 and d.source == "generation_config.json+override", d
            assert seeded_text(srv) == seeded_text(srv, temperature=0)
    print("defaults checked")


def main():
    ref_model = NumpyModel(MODEL)
    with tempfile.TemporaryDirectory(prefix="beacon-lp-") as tmp:
        f32_path = os.path.join(tmp, "model-f32.gguf")
        write_dequantized_copy(ref_model.file, f32_path)
        with Server("--kv-cache-dtype", "f32", "--kv-policy", "full", "--served-model-name", "default",
                    model=f32_path) as srv:
            test_completions(srv, ref_model)
            prompt_ids, gen = test_chat(srv, ref_model)
            test_grpc(srv, prompt_ids, gen)
            test_tokenize_routes(srv)
        test_processed(f32_path, ref_model)
    test_defaults()
    print(f"max |engine - reference| logprob: {worst[0]:.2e} (tolerance {LP_TOL})")
    print("PASS")


if __name__ == "__main__":
    main()
