"""The OpenAI-compatible HTTP API of beacon-serve, with the official `openai`
Python package as the client: chat and completions, streamed and not, stop
strings, seed reproducibility, extension fields, invalid requests with the
right status and the field named, unknown model and route, queue full (429),
draining (503), API key (401), a client that disconnects (blocks freed), and
the raw SSE framing checked with curl."""
import json
import socket
import subprocess
import threading
import time

import openai
from serve_util import Server, chat_request, collect, pb

MSG = [{"role": "user", "content": "Name three colors of the rainbow."}]


def client(srv, key="none"):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{srv.http_port}/v1", api_key=key, max_retries=0, timeout=120)


def test_models_and_chat(srv):
    c = client(srv)
    models = c.models.list()
    assert [m.id for m in models.data] == ["default"], models
    r = c.chat.completions.create(model="default", messages=MSG, max_tokens=24, temperature=0)
    ch = r.choices[0]
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert ch.message.role == "assistant" and len(ch.message.content) > 0
    assert ch.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 10 and 0 < r.usage.completion_tokens <= 24
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    # The same request over gRPC gives the same text (one engine, one validation path).
    _, text, _ = collect(srv.stub.Generate(pb.GenerateRequest(
        chat=pb.ChatInput(messages=[pb.ChatMessage(role="user", content=MSG[0]["content"])]),
        stopping=pb.StoppingCriteria(max_tokens=24), sampling=pb.SamplingParams(temperature=0))))
    assert text == ch.message.content, (text, ch.message.content)


def test_streaming(srv):
    c = client(srv)
    whole = c.chat.completions.create(model="default", temperature=0, messages=MSG, max_tokens=20,
                                      extra_body={"ignore_eos": True}).choices[0].message.content
    chunks = list(c.chat.completions.create(model="default", temperature=0, messages=MSG, max_tokens=20, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body={"ignore_eos": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == whole
    finals = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 20
    # Completions, streamed and not.
    plain = c.completions.create(model="default", temperature=0, prompt="The sky is", max_tokens=8, extra_body={"ignore_eos": True})
    assert plain.object == "text_completion" and plain.usage.completion_tokens == 8
    streamed = "".join(ch.choices[0].text for ch in c.completions.create(
        model="default", temperature=0, prompt="The sky is", max_tokens=8, stream=True, extra_body={"ignore_eos": True}))
    assert streamed == plain.choices[0].text
    # Token-id prompts.
    ids = c.completions.create(model="default", temperature=0, prompt=[504, 7273, 314], max_tokens=4)
    assert ids.usage.prompt_tokens == 3


def test_stop_seed_extensions(srv):
    c = client(srv)
    base = c.completions.create(model="default", temperature=0, prompt="Count: one, two, three,", max_tokens=24,
                                extra_body={"ignore_eos": True}).choices[0].text
    stop = base[6:10]
    r = c.completions.create(model="default", temperature=0, prompt="Count: one, two, three,", max_tokens=24, stop=[stop],
                             extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "stop" and stop not in r.choices[0].text
    assert base.startswith(r.choices[0].text)
    # A time limit is a limit: `length`, as the vLLM-named metrics count it (engine/finish_reason.h).
    r = c.completions.create(model="default", temperature=0, prompt="Count: one, two, three,", max_tokens=4000,
                             extra_body={"ignore_eos": True, "time_limit_ms": 300})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens < 4000, r
    kw = dict(model="default", messages=MSG, max_tokens=16, temperature=0.9, top_p=0.95, seed=42)
    a = c.chat.completions.create(**kw).choices[0].message.content
    b = c.chat.completions.create(**kw).choices[0].message.content
    assert a == b
    r = c.chat.completions.create(model="default", temperature=0, messages=MSG, max_tokens=64, max_completion_tokens=40,
                                  extra_body={"ignore_eos": True, "kv_policy": "beacon", "kv_budget": 32,
                                              "top_k": 5, "min_p": 0.05})
    assert r.usage.completion_tokens == 40  # max_completion_tokens wins


def test_errors(srv):
    c = client(srv)
    bad = [
        (dict(messages=MSG, temperature=5), "temperature"),
        (dict(messages=MSG, max_tokens=0), "max_tokens"),
        (dict(messages=MSG, n=65), "n"),
        (dict(messages=MSG, n=2, extra_body={"best_of": 3}), "best_of"),
        (dict(messages=MSG, logprobs=True, top_logprobs=21), "logprobs"),
        (dict(messages=MSG, tools=[{"type": "function", "function": {"name": "no spaces"}}]), "tools[0].function.name"),
        (dict(messages=MSG, extra_body={"temprature": 0.5}), "temprature"),
        (dict(messages=MSG, extra_body={"echo": True}), "echo"),
        (dict(messages=MSG, logit_bias={"49152": 1}), "logit_bias"),
        (dict(messages=MSG, extra_body={"min_tokens": 30}, max_tokens=10), "min_tokens"),
        (dict(messages=[{"role": "robot", "content": "hi"}]), "messages[0].role"),
        (dict(messages=[]), "messages"),
        (dict(messages=MSG, stop=[""]), "stop[0]"),
        (dict(messages=MSG, extra_body={"kv_policy": "lru"}), "kv_policy"),
        (dict(messages=MSG, extra_body={"kv_budget": 1}), "kv_budget"),
        (dict(messages=[{"role": "user", "content": "word " * 9000}]), "prompt"),
    ]
    for kw, field in bad:
        try:
            c.chat.completions.create(model="default", **kw)
            raise AssertionError(f"accepted {kw}")
        except openai.BadRequestError as e:
            assert e.status_code == 400 and field in e.message, (field, e.message)
            assert e.body["type"] == "invalid_request_error"
            # OpenAI's `param`: the field the message names.
            assert e.body["param"] is not None and e.body["param"].startswith(field.split("[")[0]), e.body
    try:
        c.completions.create(model="default", temperature=0, prompt=[1, 2, 10 ** 6])
        raise AssertionError("accepted an out-of-vocabulary token id")
    except openai.BadRequestError as e:
        assert "tokens[2]" in e.message
    try:
        c.chat.completions.create(model="gpt-4o", messages=MSG)
        raise AssertionError("accepted an unknown model")
    except openai.NotFoundError as e:
        assert "gpt-4o" in e.message
    status, body = srv.http_post("/v1/nope", "{}")
    assert status == 404 and "error" in body
    status, body = srv.http_post("/v1/chat/completions", "{not json")
    assert status == 400 and "JSON" in body["error"]["message"]
    status, body = srv.http_post("/v1/chat/completions", b'{"messages":[{"role":"user","content":"a\xc3\x28"}]}')
    assert status == 400, (status, body)


def test_disconnect_frees_blocks(srv):
    srv.wait_idle()
    body = json.dumps({"model": "default", "messages": MSG, "max_tokens": 2000, "stream": True,
                       "ignore_eos": True}).encode()
    s = socket.create_connection(("127.0.0.1", srv.http_port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    got = b""
    while got.count(b"data:") < 4:
        got += s.recv(4096)
    assert srv.stats()["running"] == 1
    s.close()
    srv.wait_idle(timeout=10)  # cancelled, blocks back


def test_sse_framing_with_curl(srv):
    out = subprocess.run(["curl", "-sN", f"http://127.0.0.1:{srv.http_port}/v1/chat/completions",
                          "-H", "Content-Type: application/json", "-d",
                          json.dumps({"model": "default", "messages": MSG, "max_tokens": 6, "stream": True,
                                      "ignore_eos": True})],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    events = out.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]", out[-200:]
    for ev in events[:-2]:
        assert ev.startswith("data: ") and "\n" not in ev, repr(ev)
        json.loads(ev[len("data: "):])
    headers = subprocess.run(["curl", "-sN", "-D", "-", "-o", "/dev/null",
                              f"http://127.0.0.1:{srv.http_port}/v1/completions",
                              "-H", "Content-Type: application/json", "-d",
                              json.dumps({"prompt": "hi", "max_tokens": 2, "stream": True})],
                             capture_output=True, text=True, timeout=60).stdout.lower()
    assert "content-type: text/event-stream" in headers and "transfer-encoding: chunked" in headers, headers


def test_queue_full_and_auth():
    with Server("--max-running", "1", "--max-waiting", "1", "--api-key", "k3y") as srv:
        c = client(srv, "k3y")
        try:
            client(srv, "wrong").chat.completions.create(model="default", temperature=0, messages=MSG, max_tokens=2)
            raise AssertionError("accepted a wrong key")
        except openai.AuthenticationError as e:
            assert e.status_code == 401
        # The key is checked on the headers: an unauthenticated 8 MB body is refused before it is sent.
        with socket.create_connection(("127.0.0.1", srv.http_port), timeout=10) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 8000000\r\n\r\n")
            head = s.recv(4096).decode(errors="replace")
            assert head.startswith("HTTP/1.1 401"), head
        stream = c.chat.completions.create(model="default", temperature=0, messages=MSG, max_tokens=500, stream=True,
                                           extra_body={"ignore_eos": True})
        next(iter(stream))
        waiting = threading.Thread(target=lambda: c.chat.completions.create(model="default", temperature=0, messages=MSG,
                                                                            max_tokens=2))
        waiting.start()
        auth = {"Authorization": "Bearer k3y"}
        while srv.http("/v1/engine/stats", headers=auth)[1]["waiting"] < 1:
            time.sleep(0.01)
        try:
            c.chat.completions.create(model="default", temperature=0, messages=MSG, max_tokens=2)
            raise AssertionError("accepted with a full queue")
        except openai.RateLimitError as e:
            assert e.status_code == 429 and "queue is full" in e.message
        stream.close()
        waiting.join(60)


def test_draining_503():
    srv = Server("--drain-timeout-s", "20")
    try:
        c = client(srv)
        done = {}

        def long_one():
            done["r"] = c.chat.completions.create(model="default", temperature=0, messages=MSG, max_tokens=80,
                                                  extra_body={"ignore_eos": True})

        t = threading.Thread(target=long_one)
        t.start()
        while srv.stats()["running"] < 1:
            time.sleep(0.01)
        srv.terminate()
        while srv.http("/ready")[0] != 503:
            time.sleep(0.01)
        try:
            c.chat.completions.create(model="default", temperature=0, messages=MSG, max_tokens=2)
            raise AssertionError("accepted while draining")
        except openai.APIStatusError as e:
            assert e.status_code == 503 and "draining" in e.message
        t.join(60)
        assert done["r"].usage.completion_tokens == 80  # the running one finished
        assert srv.proc.wait(30) == 0
    finally:
        srv.stop()


def main():
    with Server() as srv:
        for t in (test_models_and_chat, test_streaming, test_stop_seed_extensions, test_errors,
                  test_disconnect_frees_blocks, test_sse_framing_with_curl):
            t0 = time.time()
            t(srv)
            print(f"ok {t.__name__} ({time.time() - t0:.1f}s)")
        srv.wait_idle()
    for t in (test_queue_full_and_auth, test_draining_503):
        t0 = time.time()
        t()
        print(f"ok {t.__name__} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
