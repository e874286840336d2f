"""Reasoning output end to end: a tiny random-weight Qwen2 model behind the
DeepSeek-R1-Distill-Qwen-7B vocabulary (--tokenizer), real chat templates
(--chat-template), --reasoning-parser auto / qwen3. Over real gRPC and HTTP:
the think block split into reasoning_text / reasoning_content and
text / content, checked against an independent decode of the token ids from
the GGUF vocabulary in Python (gguf.GGUFReader); max_reasoning_tokens forcing
</think>; chat_template_kwargs (Qwen3's enable_thinking) in both APIs;
request and start-up errors; and the default model's unchanged output."""
import json
import os
import subprocess
import tempfile
import time
import urllib.request

import gguf
import grpc
from google.protobuf import struct_pb2
from serve_util import BIN, MODEL, SRC, Server, expect_rpc_error, pb

VOCAB = os.path.join(SRC, "tests/fixtures/tokenizers/r1-distill-qwen-7b-vocab.gguf")
DUMMY = "dummy:" + os.path.join(SRC, "tests/data/tiny-r1-qwen2.json")
TEMPLATES = os.path.join(SRC, "tests/fixtures/chat_templates")
OPEN, CLOSE = 151648, 151649  # <think>, </think> in the R1 vocabulary
INVALID = grpc.StatusCode.INVALID_ARGUMENT

# Greedy (temperature 0; the seed is sent all the same), so the output is fixed
# per prompt. The random model writes arbitrary byte-level tokens; this prompt
# was chosen so that neither part ends or starts inside a UTF-8 sequence, where
# U+FFFD replacement at the reasoning/answer boundary would be a matter of
# convention rather than of correctness.
PROMPT = "What is 2+2?"
SEED = 7


# ---- an independent decoder: GPT-2 byte-level BPE pieces from the GGUF ----

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


class Vocab:
    def __init__(self, path):
        r = gguf.GGUFReader(path)
        f = r.fields["tokenizer.ggml.tokens"]
        tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        t = r.fields["tokenizer.ggml.token_type"]
        types = [int(t.parts[i][0]) for i in t.data]
        inv = {c: b for b, c in bytes_to_unicode().items()}
        self.piece = []
        for text, ty in zip(tokens, types):
            if ty == 1:  # normal: byte-level
                self.piece.append(bytes(inv[c] for c in text))
            elif ty == 4:  # user-defined: verbatim
                self.piece.append(text.encode("utf-8"))
            else:  # control, unused: nothing
                self.piece.append(b"")
        self.tokens = tokens

    def decode(self, ids):
        return b"".join(self.piece[i] for i in ids).decode("utf-8", errors="replace")


# ---- helpers ----

def grpc_chat(messages, max_tokens, max_reasoning_tokens=0, kwargs=None, ignore_eos=True):
    req = pb.GenerateRequest(
        chat=pb.ChatInput(messages=[pb.ChatMessage(**m) for m in messages]),
        sampling=pb.SamplingParams(temperature=0, seed=SEED),
        stopping=pb.StoppingCriteria(max_tokens=max_tokens, ignore_eos=ignore_eos,
                                     max_reasoning_tokens=max_reasoning_tokens))
    for k, v in (kwargs or {}).items():
        req.chat.chat_template_kwargs[k].CopyFrom(to_value(v))
    return req


def to_value(v):
    s = struct_pb2.Struct()
    s.update({"v": v})
    return s.fields["v"]


def http_body(messages, max_tokens, max_reasoning_tokens=None, kwargs=None, **extra):
    b = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "seed": SEED, "ignore_eos": True}
    if max_reasoning_tokens is not None:
        b["max_reasoning_tokens"] = max_reasoning_tokens
    if kwargs is not None:
        b["chat_template_kwargs"] = kwargs
    b.update(extra)
    return b


def post(srv, body, path="/v1/chat/completions"):
    return srv.http_post(path, json.dumps(body))


def sse(srv, body):
    """The parsed data events of a streamed chat completion (without [DONE])."""
    req = urllib.request.Request(f"http://127.0.0.1:{srv.http_port}/v1/chat/completions",
                                 data=json.dumps({**body, "stream": True,
                                                  "stream_options": {"include_usage": True}}).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200
        raw = r.read().decode()
    events = raw.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]", raw[-300:]
    return [json.loads(e[len("data: "):]) for e in events[:-2]]


def run_grpc(srv, req):
    """Every message of a Generate stream, and the concatenated ids, text, reasoning."""
    msgs = list(srv.stub.Generate(req))
    ids = [i for m in msgs for i in m.token_ids]
    return msgs, ids, "".join(m.text for m in msgs), "".join(m.reasoning_text for m in msgs)


def check_split(msgs, close):
    """Messages whose tokens all precede the close carry no answer text;
    messages after it carry no reasoning."""
    pos = 0
    for m in msgs:
        n = len(m.token_ids)
        if pos + n <= close:
            assert m.text == "", (pos, n, m)
        if pos > close:
            assert m.reasoning_text == "", (pos, n, m)
        pos += n


def failed_start(*args):
    """beacon-serve with `args` must exit non-zero before becoming ready: its output."""
    p = subprocess.run([os.path.join(BIN, "beacon-serve"), "--host", "127.0.0.1", "--grpc-port", "0",
                        "--http-port", "0", "--threads", "1", *args],
                       capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "ready grpc=" not in out, out
    return out


# ---- 1-3, 6: the R1 vocabulary with its own template (auto: deepseek_r1) ----

def test_r1_parser(srv):
    assert "reasoning_parser=deepseek_r1" in srv.read_log(), srv.read_log()
    info = srv.stub.GetModelInfo(pb.GetModelInfoRequest())
    assert info.reasoning_parser == "deepseek_r1" and info.vocab_size == 152064, info
    # The template ends the prompt with <｜Assistant｜> and no marker: deepseek_r1 starts inside.
    tok = srv.stub.Tokenize(pb.TokenizeRequest(chat=pb.ChatInput(messages=[pb.ChatMessage(role="user",
                                                                                         content=PROMPT)])))
    assert OPEN not in tok.ids and CLOSE not in tok.ids and tok.ids[-1] == 151645, tok.ids


def test_r1_forced_close(srv, vocab):
    msgs, ids, text, reasoning = run_grpc(srv, grpc_chat([{"role": "user", "content": PROMPT}], 24, 8))
    assert len(ids) == 24, ids
    assert OPEN not in ids[:1], ids  # the model did not open a block of its own (would be dropped)
    # After 7 reasoning tokens the 8th is forced to be </think> (unless the model
    # happened to close earlier by itself).
    assert CLOSE in ids, ids
    close = ids.index(CLOSE)
    assert close <= 7, ids
    check_split(msgs, close)
    final = msgs[-1]
    assert final.finish_reason == pb.FINISH_REASON_LENGTH
    assert final.usage.reasoning_tokens == close + 1, final.usage
    assert final.usage.completion_tokens == len(ids), final.usage
    # Independent decode: the markers are in neither text.
    assert reasoning == vocab.decode(ids[:close]), (reasoning, vocab.decode(ids[:close]))
    assert text == vocab.decode(ids[close + 1:]), (text, vocab.decode(ids[close + 1:]))
    assert reasoning and text and "\ufffd" not in reasoning[-1:] + text[:1], (reasoning, text)
    assert "<think>" not in text + reasoning and "</think>" not in text + reasoning
    return ids, text, reasoning, final.usage


def test_r1_http_matches_grpc(srv, grpc_result):
    ids, text, reasoning, usage = grpc_result
    body = http_body([{"role": "user", "content": PROMPT}], 24, 8)
    status, r = post(srv, body)
    assert status == 200, r
    msg = r["choices"][0]["message"]
    assert msg["reasoning_content"] == reasoning and msg["content"] == text, (msg, reasoning, text)
    want_usage = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                  "total_tokens": usage.prompt_tokens + usage.completion_tokens,
                  # No prompt_tokens_details: cached tokens are withheld on the shared prefix cache
                  # unless --enable-prompt-tokens-details (test_prefix_cache.py).
                  "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens}}
    assert r["usage"] == want_usage, (r["usage"], want_usage)
    assert r["choices"][0]["finish_reason"] == "length"
    # Streamed: each delta is reasoning or answer, never both; reasoning first.
    chunks = sse(srv, body)
    s_reason, s_text, seen_answer = "", "", False
    for ch in chunks[:-1]:
        assert len(ch["choices"]) == 1, ch
        d = ch["choices"][0]["delta"]
        assert not ("content" in d and "reasoning_content" in d), d
        if d.get("reasoning_content"):
            assert not seen_answer, chunks
            s_reason += d["reasoning_content"]
        if d.get("content"):
            seen_answer = True
            s_text += d["content"]
    assert chunks[0]["choices"][0]["delta"].get("role") == "assistant"
    assert s_reason == reasoning and s_text == text, (s_reason, s_text)
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == want_usage, chunks[-1]
    # A stop string in the answer cuts the answer only; the reasoning is whole.
    stop = text[len(text) // 3:len(text) // 3 + 4]
    assert stop and stop not in reasoning and stop not in text[:len(text) // 3], (stop, text)
    status, r = post(srv, {**body, "stop": [stop]})
    msg = r["choices"][0]["message"]
    assert r["choices"][0]["finish_reason"] == "stop", r
    assert msg["reasoning_content"] == reasoning and msg["content"] == text[:len(text) // 3], (msg, stop)
    assert r["usage"]["completion_tokens_details"]["reasoning_tokens"] == usage.reasoning_tokens


def test_r1_unlimited_is_all_reasoning(srv, vocab):
    msgs = [{"role": "user", "content": PROMPT}]
    status, r = post(srv, http_body(msgs, 6))
    assert status == 200, r
    m, u = r["choices"][0]["message"], r["usage"]
    assert m["content"] == "" and m["reasoning_content"], m
    assert u["completion_tokens"] == 6 and u["completion_tokens_details"]["reasoning_tokens"] == 6, u
    _, ids, text, reasoning = run_grpc(srv, grpc_chat(msgs, 6))
    assert CLOSE not in ids and text == "" and reasoning == m["reasoning_content"] == vocab.decode(ids)
    # max_reasoning_tokens beyond max_tokens closes nothing.
    _, ids, text, reasoning = run_grpc(srv, grpc_chat(msgs, 6, 7))
    assert CLOSE not in ids and text == "" and reasoning == m["reasoning_content"]
    # max_reasoning_tokens 1: the very first token is </think>, all the rest is answer.
    msgs_, ids, text, reasoning = run_grpc(srv, grpc_chat(msgs, 6, 1))
    assert ids[0] == CLOSE and reasoning == "" and text == vocab.decode(ids[1:]), ids
    assert msgs_[-1].usage.reasoning_tokens == 1
    status, r = post(srv, http_body(msgs, 6, 1))
    assert r["choices"][0]["message"]["reasoning_content"] is None and r["choices"][0]["message"]["content"] == text


def test_r1_user_typed_markers_change_nothing(srv):
    """Only the generation prompt decides where output starts: a user message
    holding "</think>" (which the prompt then carries as the marker token)
    still gets reasoning first."""
    msgs = [{"role": "user", "content": "Explain the </think> tag."}]
    status, r = post(srv, http_body(msgs, 4))
    assert status == 200, r
    m, u = r["choices"][0]["message"], r["usage"]
    assert m["content"] == "" and m["reasoning_content"], m
    assert u["completion_tokens_details"]["reasoning_tokens"] == 4, u


def test_r1_request_errors(srv):
    msgs = [{"role": "user", "content": PROMPT}]
    bad = [
        ("/v1/chat/completions", http_body(msgs, 8, -1), "max_reasoning_tokens"),
        ("/v1/completions", {"prompt": "hello", "max_tokens": 4, "max_reasoning_tokens": 4}, "max_reasoning_tokens"),
        ("/v1/chat/completions", http_body(msgs, 8, kwargs=[1, 2]), "chat_template_kwargs"),
        ("/v1/chat/completions", http_body(msgs, 8, kwargs="enable_thinking"), "chat_template_kwargs"),
        ("/v1/chat/completions", http_body(msgs, 8, kwargs={"messages": []}), "messages"),
        ("/v1/chat/completions", http_body(msgs, 8, kwargs={"add_generation_prompt": False}),
         "add_generation_prompt"),
        ("/v1/chat/completions", http_body(msgs, 8, kwargs={"bos_token": "x"}), "bos_token"),
    ]
    for path, body, needle in bad:
        status, r = post(srv, body, path)
        assert status == 400, (body, status, r)
        assert needle in r["error"]["message"] and r["error"]["type"] == "invalid_request_error", (needle, r)
    status, r = post(srv, http_body(msgs, 8, kwargs={"messages": []}))
    assert "chat_template_kwargs" in r["error"]["message"], r
    # gRPC: the same.
    expect_rpc_error(lambda: srv.stub.Generate(grpc_chat(msgs, 8, -1)), INVALID, "max_reasoning_tokens")
    expect_rpc_error(lambda: srv.stub.Generate(pb.GenerateRequest(
        text="hello", stopping=pb.StoppingCriteria(max_tokens=4, max_reasoning_tokens=4))),
        INVALID, "max_reasoning_tokens")
    expect_rpc_error(lambda: srv.stub.Generate(pb.GenerateRequest(
        tokens=pb.TokenIds(ids=[1, 2, 3]), stopping=pb.StoppingCriteria(max_tokens=4, max_reasoning_tokens=4))),
        INVALID, "max_reasoning_tokens")
    for name in ("messages", "add_generation_prompt", "eos_token"):
        expect_rpc_error(lambda: srv.stub.Generate(grpc_chat(msgs, 8, kwargs={name: 1})), INVALID, name)
    # Still serving.
    status, r = post(srv, http_body(msgs, 2))
    assert status == 200, r


# ---- 4: Qwen3's template over the R1 vocabulary (auto: qwen3) ----

def test_qwen3(srv, vocab):
    assert "reasoning_parser=qwen3" in srv.read_log(), srv.read_log()
    assert srv.stub.GetModelInfo(pb.GetModelInfoRequest()).reasoning_parser == "qwen3"
    msgs = [{"role": "user", "content": PROMPT}]
    chat = pb.ChatInput(messages=[pb.ChatMessage(role="user", content=PROMPT)])
    on = list(srv.stub.Tokenize(pb.TokenizeRequest(chat=chat)).ids)
    chat.chat_template_kwargs["enable_thinking"].CopyFrom(to_value(False))
    off = list(srv.stub.Tokenize(pb.TokenizeRequest(chat=chat)).ids)
    # Thinking off: the template writes an empty, closed block: '<think>\n\n</think>\n\n'.
    assert OPEN not in on and CLOSE not in on, on
    assert len(off) > len(on) and off[:len(on)] == on, (on, off)
    tail = off[len(on):]
    assert tail[0] == OPEN and CLOSE in tail, tail
    after = tail[tail.index(CLOSE) + 1:]
    assert after and vocab.decode(after) == "\n\n" and vocab.decode(tail) == "<think>\n\n</think>\n\n", tail
    assert vocab.decode(tail[1:tail.index(CLOSE)]) == "\n\n"
    # Generation with thinking off: all answer; max_reasoning_tokens closes nothing.
    status, r = post(srv, http_body(msgs, 12, 3, kwargs={"enable_thinking": False}))
    assert status == 200, r
    m, u = r["choices"][0]["message"], r["usage"]
    assert m["reasoning_content"] is None and m["content"], m
    assert u["completion_tokens_details"]["reasoning_tokens"] == 0 and u["completion_tokens"] == 12, u
    assert u["prompt_tokens"] == len(off), (u, len(off))
    grpc_msgs, ids, text, reasoning = run_grpc(srv, grpc_chat(msgs, 12, 3, kwargs={"enable_thinking": False}))
    assert CLOSE not in ids and reasoning == "" and text == m["content"] == vocab.decode(ids), (ids, text)
    assert grpc_msgs[-1].usage.reasoning_tokens == 0 and grpc_msgs[-1].usage.prompt_tokens == len(off)
    # Default (thinking on): Qwen3's generation prompt leaves no block open (the
    # model opens one itself), so qwen3 starts outside: this random model's output is answer.
    status, r = post(srv, http_body(msgs, 12))
    assert r["usage"]["prompt_tokens"] == len(on) and r["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0
    assert r["choices"][0]["message"]["reasoning_content"] is None, r
    # An assistant turn's reasoning_content reaches the template (both APIs).
    hist = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello.",
                                                "reasoning_content": "zebra quartz"}]
    ids = list(srv.stub.Tokenize(pb.TokenizeRequest(chat=pb.ChatInput(
        messages=[pb.ChatMessage(**m) for m in hist], add_generation_prompt=False))).ids)
    assert "<think>\nzebra quartz\n</think>\n\nHello." in vocab.decode(ids), vocab.decode(ids)
    plain = list(srv.stub.Tokenize(pb.TokenizeRequest(chat=pb.ChatInput(
        messages=[pb.ChatMessage(role=m["role"], content=m["content"]) for m in hist],
        add_generation_prompt=False))).ids)
    assert "zebra" not in vocab.decode(plain)
    # With the assistant turn last, its reasoning is rendered (HTTP path)...
    _, with_r = post(srv, http_body(hist, 2))
    _, without_r = post(srv, http_body([hist[0], {"role": "assistant", "content": "Hello."}], 2))
    assert with_r["usage"]["prompt_tokens"] > without_r["usage"]["prompt_tokens"], (with_r, without_r)
    # ...after a later user turn Qwen3's template drops it.
    _, later_r = post(srv, http_body(hist + [{"role": "user", "content": "again"}], 2))
    _, later = post(srv, http_body([hist[0], {"role": "assistant", "content": "Hello."},
                                    {"role": "user", "content": "again"}], 2))
    assert later_r["usage"]["prompt_tokens"] == later["usage"]["prompt_tokens"], (later_r, later)
    # kwargs of every JSON type are accepted (the gRPC map holds google.protobuf.Value).
    status, r = post(srv, http_body(msgs, 2, kwargs={"enable_thinking": True, "x": [1, "a", None], "y": {"z": 1.5}}))
    assert status == 200, r
    grpc_msgs = run_grpc(srv, grpc_chat(msgs, 2, kwargs={"enable_thinking": True, "x": [1, "a", None],
                                                     "y": {"z": 1.5}}))[0]
    assert grpc_msgs[-1].usage.prompt_tokens == len(on) == r["usage"]["prompt_tokens"], grpc_msgs[-1]


# ---- 5: generation prompts that open <think> ----

TINY = ("{%- if messages[0]['role'] != 'user' %}{{ raise_exception('first message must be from the user') }}"
        "{% endif -%}"
        "{%- for m in messages %}<｜User｜>{{ m['content'] }}{% endfor -%}"
        "{%- if add_generation_prompt %}<｜Assistant｜><think>\n{% endif %}")


def test_tiny_template_opens(srv, vocab):
    assert "reasoning_parser=qwen3" in srv.read_log(), srv.read_log()
    msgs = [{"role": "user", "content": PROMPT}]
    prompt = list(srv.stub.Tokenize(pb.TokenizeRequest(chat=pb.ChatInput(
        messages=[pb.ChatMessage(role="user", content=PROMPT)]))).ids)
    assert OPEN in prompt and prompt[prompt.index(OPEN) + 1:] and CLOSE not in prompt, prompt
    grpc_msgs, ids, text, reasoning = run_grpc(srv, grpc_chat(msgs, 12, 4))
    close = ids.index(CLOSE)
    assert close <= 3, ids
    check_split(grpc_msgs, close)
    assert grpc_msgs[-1].usage.reasoning_tokens == close + 1
    assert reasoning == vocab.decode(ids[:close]) and text == vocab.decode(ids[close + 1:]), (ids, reasoning, text)
    status, r = post(srv, http_body(msgs, 12, 4))
    assert r["choices"][0]["message"]["reasoning_content"] == reasoning and \
        r["choices"][0]["message"]["content"] == text, r
    # The template raising at request time: 400 / INVALID_ARGUMENT with its message.
    bad = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    status, r = post(srv, http_body(bad, 4))
    assert status == 400 and "first message must be from the user" in r["error"]["message"], r
    assert r["error"]["message"].startswith("messages"), r
    expect_rpc_error(lambda: srv.stub.Generate(grpc_chat(bad, 4)), INVALID, "first message must be from the user")
    expect_rpc_error(lambda: srv.stub.Tokenize(pb.TokenizeRequest(chat=pb.ChatInput(
        messages=[pb.ChatMessage(**m) for m in bad]))), INVALID, "first message must be from the user")
    status, r = post(srv, http_body(msgs, 3))
    assert status == 200 and r["usage"]["completion_tokens"] == 3, r
    assert len(run_grpc(srv, grpc_chat(msgs, 3))[1]) == 3


def test_qwq_enable_thinking(srv, vocab):
    """QwQ's (llama.cpp-edited) template: <think>\\n, then </think> unless
    enable_thinking; auto picks qwen3 (it names enable_thinking)."""
    assert srv.stub.GetModelInfo(pb.GetModelInfoRequest()).reasoning_parser == "qwen3"
    msgs = [{"role": "user", "content": PROMPT}]
    # Default: the prompt closes the block: all answer.
    _, ids, text, reasoning = run_grpc(srv, grpc_chat(msgs, 8, 3))
    assert reasoning == "" and text == vocab.decode(ids), ids
    # enable_thinking: the prompt ends inside the block: reasoning first, forced close.
    grpc_msgs, ids, text, reasoning = run_grpc(srv, grpc_chat(msgs, 8, 3, kwargs={"enable_thinking": True}))
    close = ids.index(CLOSE)
    assert close <= 2 and grpc_msgs[-1].usage.reasoning_tokens == close + 1, ids
    assert reasoning == vocab.decode(ids[:close]) and text == vocab.decode(ids[close + 1:])
    status, r = post(srv, http_body(msgs, 8, 3, kwargs={"enable_thinking": True}))
    assert r["choices"][0]["message"]["reasoning_content"] == reasoning, r
    assert r["usage"]["completion_tokens_details"]["reasoning_tokens"] == close + 1


# ---- 6: start-up errors ----

def test_startup_errors():
    d = tempfile.mkdtemp(prefix="beacon-reasoning-")
    broken = os.path.join(d, "broken.jinja")
    with open(broken, "w") as f:
        f.write("{% for m in messages %}x")
    out = failed_start("--model", DUMMY, "--tokenizer", VOCAB, "--chat-template", broken)
    assert "chat template" in out and "line 1" in out, out
    out = failed_start("--model", MODEL, "--reasoning-parser", "deepseek_r1")
    assert "--reasoning-parser" in out, out
    out = failed_start("--model", MODEL, "--reasoning-parser", "sideways")
    assert "--reasoning-parser" in out, out
    out = failed_start("--model", MODEL, "--tokenizer", VOCAB)
    assert "152064" in out and "vocab_size" in out, out


# ---- 7: the default model (no markers): unchanged ----

def test_default_model(srv):
    assert "reasoning_parser=none" in srv.read_log(), srv.read_log()
    assert srv.stub.GetModelInfo(pb.GetModelInfoRequest()).reasoning_parser == "none"
    msgs = [{"role": "user", "content": "Name three colors."}]
    status, r = post(srv, {"messages": msgs, "max_tokens": 6, "ignore_eos": True})
    assert status == 200, r
    assert "reasoning_content" not in r["choices"][0]["message"], r
    assert r["choices"][0]["message"]["content"], r
    assert "completion_tokens_details" not in r["usage"] and r["usage"]["completion_tokens"] == 6, r
    for ch in sse(srv, {"messages": msgs, "max_tokens": 6, "ignore_eos": True}):
        for c in ch["choices"]:
            assert "reasoning_content" not in c["delta"], ch
        if "usage" in ch and ch["usage"]:
            assert "completion_tokens_details" not in ch["usage"], ch
    _, ids, text, reasoning = run_grpc(srv, grpc_chat(msgs, 6))
    assert reasoning == "" and text and len(ids) == 6
    status, r = post(srv, {"messages": msgs, "max_tokens": 6, "max_reasoning_tokens": 4})
    assert status == 400 and "max_reasoning_tokens" in r["error"]["message"], r
    expect_rpc_error(lambda: srv.stub.Generate(grpc_chat(msgs, 6, 4)), INVALID, "max_reasoning_tokens")
    # chat_template_kwargs still work as template variables (no reasoning involved).
    status, r = post(srv, {"messages": msgs, "max_tokens": 2, "chat_template_kwargs": {"foo": 1}})
    assert status == 200, r


def timed(t, *args):
    t0 = time.time()
    out = t(*args)
    print(f"ok {t.__name__} ({time.time() - t0:.1f}s)", flush=True)
    return out


def main():
    t0 = time.time()
    vocab = Vocab(VOCAB)
    print(f"vocab read ({time.time() - t0:.1f}s)", flush=True)
    with Server("--tokenizer", VOCAB, model=DUMMY, threads=1) as srv:
        timed(test_r1_parser, srv)
        result = timed(test_r1_forced_close, srv, vocab)
        timed(test_r1_http_matches_grpc, srv, result)
        timed(test_r1_unlimited_is_all_reasoning, srv, vocab)
        timed(test_r1_user_typed_markers_change_nothing, srv)
        timed(test_r1_request_errors, srv)
        srv.wait_idle()
    with Server("--tokenizer", VOCAB, "--chat-template", os.path.join(TEMPLATES, "Qwen-Qwen3-0.6B.jinja"),
                model=DUMMY, threads=1) as srv:
        timed(test_qwen3, srv, vocab)
    tiny = os.path.join(tempfile.mkdtemp(prefix="beacon-reasoning-"), "opens.jinja")
    with open(tiny, "w") as f:
        f.write(TINY)
    with Server("--tokenizer", VOCAB, "--chat-template", tiny, "--reasoning-parser", "qwen3",
                model=DUMMY, threads=1) as srv:
        timed(test_tiny_template_opens, srv, vocab)
    with Server("--tokenizer", VOCAB, "--chat-template", os.path.join(TEMPLATES, "Qwen-QwQ-32B.jinja"),
                model=DUMMY, threads=1) as srv:
        timed(test_qwq_enable_thinking, srv, vocab)
    timed(test_startup_errors)
    with Server() as srv:
        timed(test_default_model, srv)
        srv.wait_idle()
    print(f"all ok ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
