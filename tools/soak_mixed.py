#!/usr/bin/env python3
"""The mixed soak of issue 35 (not in CI): one beacon-serve on loopback under
everything at once, for --duration seconds, with checks throughout.

  tools/python tools/soak_mixed.py --duration 3600 --out soak.json

It starts its own server on the default model with an undersized KV pool and
optimistic admission (preemption pressure), the prefix cache on, an admin port,
and runs bounded loops that stop by themselves at the deadline:
- OpenAI streams (chat and completions): a shared system prompt or a unique
  one, n = 1 or 2, logprobs, reasoning-style chat; some read only part of the
  stream and hang up (client disconnect), some carry a short time_limit_ms;
- gRPC streams: unique prompts under full, beacon and snapkv, some cancelled
  after a few tokens, some with a short deadline;
- greedy repeats: four fixed greedy prompts, asked again and again under load;
  every answer must equal the first, token for token;
- hostile clients (all within the fd limit): slowloris connections, bursts of
  connections opened and dropped, bodies over the size limit, JSON nested past
  the depth limit, prompts with invalid UTF-8;
- tenants (issue 46): the server takes three API keys (so each key is a
  prefix-cache partition of its own, the default with several keys); every
  client sends one of them, 2% of requests a wrong one (401 /
  UNAUTHENTICATED expected), and 30% carry a cache_salt;
- tokenizer calls: /tokenize (prompt or messages) and /detokenize over HTTP,
  Tokenize and Detokenize over gRPC, each answer checked; and large gRPC
  messages: 3.9 MiB Tokenize texts (refused past the token limit, or busy)
  and 5 MiB ones (past gRPC's 4 MiB receive limit), each with a clear status;
- a monitor sampling every 5 s: /ready on the admin port, the server's
  resident memory (/proc), KV blocks, in-flight requests.

Checks (the summary's "failures" lists each one broken):
- the process never exits;
- every well-formed request ends with a complete answer or a clear error
  (an HTTP error body naming what is wrong, a gRPC status with a message);
  cancels, disconnects and deadlines we cause are counted apart;
- greedy repeats are identical;
- after the run, once idle, every KV block is free;
- resident memory after warm-up (the first fifth of the run) does not climb:
  the median of the last fifth is within 10% of the median of the second
  fifth (levels, not peaks: several large messages in flight at once lift a
  sample for seconds; the peak and the curve are in the output);
- /ready answers 200 at every sample;
- the server's token counters agree: beacon_generation_tokens_total equals
  the sum of every finished request's generated tokens
  (beacon_request_generation_tokens_sum), and the completion tokens clients
  saw in usage are no more than that.
Exit status 0 when every check holds."""
import argparse
import http.client
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUBS = tempfile.mkdtemp(prefix="beacon-soak-")
subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}/proto", f"--python_out={STUBS}",
                f"--grpc_python_out={STUBS}", f"{ROOT}/proto/beacon/v1/beacon.proto"], check=True)
sys.path.insert(0, STUBS)
import grpc  # noqa: E402
from beacon.v1 import beacon_pb2 as pb, beacon_pb2_grpc as pb_grpc  # noqa: E402

SYSTEM = "You are a careful assistant. Answer briefly and cite the plan you wrote at the start. " * 3
TOPICS = ["the ocean", "prime numbers", "baking bread", "chess", "the moon", "tea", "rivers", "bridges"]
GREEDY = ["List three prime numbers.", "Name a color.", "What is 2 + 2?", "Say hello in French."]
KEYS = ["soak-key-tenant-a", "soak-key-tenant-b", "soak-key-tenant-c"]
ADMIN = {"Authorization": f"Bearer {KEYS[0]}"}  # the stats take a key too
SALTS = ["salt-3f9a1c77d2e84b06", "salt-b81e5a0cc93f4d21", "salt-0d7e6b55a1f2c348"]


def auth(rng):
    """(headers, gRPC metadata) with one of the keys, or (2%) a wrong one; and whether it is right."""
    good = rng.random() >= 0.02
    key = rng.choice(KEYS) if good else "soak-wrong-key"
    return {"Authorization": f"Bearer {key}"}, [("authorization", f"Bearer {key}")], good


class Tally:
    """Thread-safe counters and the list of broken checks."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.failures = []
        self.usage_tokens = 0

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def fail(self, what):
        with self.lock:
            if len(self.failures) < 50:
                self.failures.append(what)
            self.counts["failures"] = self.counts.get("failures", 0) + 1


def http_json(port, method, path, body=None, timeout=120, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def clear_error(status, raw):
    """An HTTP error that says what is wrong: a JSON body with error.message."""
    try:
        return status >= 400 and bool(json.loads(raw)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return False


def openai_worker(port, end, rng, t):
    while time.time() < end:
        chat = rng.random() < 0.7
        shared = rng.random() < 0.5
        body = {"model": "default", "max_tokens": rng.randint(8, 96), "stream": True,
                "stream_options": {"include_usage": True}, "temperature": 0.8, "seed": rng.randint(0, 1 << 30),
                "n": rng.choice([1, 1, 2])}
        if rng.random() < 0.3:
            body["logprobs"] = True if chat else 2
            if chat:
                body["top_logprobs"] = 2
        if rng.random() < 0.1:
            body["time_limit_ms"] = rng.randint(50, 500)
        if rng.random() < 0.3:
            body["cache_salt"] = rng.choice(SALTS)
        headers, _, key_ok = auth(rng)
        system = SYSTEM if shared else f"{SYSTEM} Session {rng.random()}."
        question = f"Tell me about {rng.choice(TOPICS)}."
        if chat:
            body["messages"] = [{"role": "system", "content": system}, {"role": "user", "content": question}]
            path = "/v1/chat/completions"
        else:
            body["prompt"] = f"{system}\n{question}\n"
            path = "/v1/completions"
        hang_up = rng.random() < 0.1
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **headers})
            r = conn.getresponse()
            if not key_ok:
                raw = r.read()
                t.add("openai_auth_refused" if r.status == 401 and clear_error(r.status, raw) else "openai_auth_wrong")
                if r.status != 401:
                    t.fail(f"a wrong API key got {r.status}")
                continue
            if r.status != 200:
                raw = r.read()
                t.add("openai_error_clear" if clear_error(r.status, raw) else "openai_error_unclear")
                if not clear_error(r.status, raw):
                    t.fail(f"openai {r.status} without a clear error: {raw[:200]!r}")
                continue
            finishes, usage, lines = [], None, 0
            for line in r:
                lines += 1
                if hang_up and lines > 3:
                    break
                if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                    continue
                ev = json.loads(line[6:])
                if "error" in ev:
                    t.add("openai_stream_error")
                    break
                for c in ev.get("choices", []):
                    if c.get("finish_reason"):
                        finishes.append(c["finish_reason"])
                if ev.get("usage"):
                    usage = ev["usage"]
            if hang_up:
                t.add("openai_disconnect")
            elif len(finishes) == body["n"] and usage:
                t.add("openai_complete")
                with t.lock:
                    t.usage_tokens += usage["completion_tokens"]
            elif "time_limit_ms" in body:
                t.add("openai_time_limit")
            else:
                t.fail(f"openai stream ended without every finish and usage: {finishes} {usage}")
        except (OSError, http.client.HTTPException) as e:
            t.fail(f"openai request failed at the transport: {e!r}")
        finally:
            conn.close()


def grpc_worker(stub, end, rng, t):
    while time.time() < end:
        cancel, deadline = rng.random() < 0.15, rng.random() < 0.05
        kv = rng.choice([pb.KvOptions(policy="full"), pb.KvOptions(policy="beacon", budget=32),
                         pb.KvOptions(policy="snapkv", budget=32)])
        req = pb.GenerateRequest(
            chat=pb.ChatInput(messages=[pb.ChatMessage(role="user",
                                                       content=f"Write about {rng.choice(TOPICS)} {rng.random()}")]),
            stopping=pb.StoppingCriteria(max_tokens=rng.randint(16, 160)),
            sampling=pb.SamplingParams(temperature=0.7, seed=rng.randint(0, 1 << 30)), kv=kv)
        if rng.random() < 0.3:
            req.cache_salt = rng.choice(SALTS)
        _, metadata, key_ok = auth(rng)
        n, last = 0, None
        try:
            call = stub.Generate(req, timeout=0.3 if deadline else 300, metadata=metadata)
            for msg in call:
                n += len(msg.token_ids)
                last = msg
                if cancel and n >= 4:
                    call.cancel()
                    break
            if cancel and n >= 4:
                t.add("grpc_cancelled")
            elif last is not None and last.finish_reason != pb.FINISH_REASON_UNSPECIFIED:
                t.add("grpc_complete")
                with t.lock:
                    t.usage_tokens += last.usage.completion_tokens
            else:
                t.fail(f"grpc stream ended without a finish: {last}")
        except grpc.RpcError as e:
            code = e.code()
            if not key_ok:
                t.add("grpc_auth_refused" if code == grpc.StatusCode.UNAUTHENTICATED else "grpc_auth_wrong")
                if code != grpc.StatusCode.UNAUTHENTICATED:
                    t.fail(f"a wrong API key got {code}")
            elif code == grpc.StatusCode.CANCELLED and cancel:
                t.add("grpc_cancelled")
            elif code == grpc.StatusCode.DEADLINE_EXCEEDED and deadline:
                t.add("grpc_deadline")
            elif e.details():
                t.add("grpc_error_clear")
            else:
                t.fail(f"grpc error without a message: {code}")


def greedy_worker(port, end, t, first):
    i = 0
    while time.time() < end:
        prompt = GREEDY[i % len(GREEDY)]
        i += 1
        body = {"model": "default", "messages": [{"role": "user", "content": prompt}], "max_tokens": 80,
                "temperature": 0, "kv_policy": "beacon", "kv_budget": 32, "return_tokens_as_token_ids": True,
                "logprobs": True}
        status, raw = http_json(port, "POST", "/v1/chat/completions", json.dumps(body),
                                headers={"Authorization": f"Bearer {KEYS[0]}"})
        if status != 200:
            t.add("greedy_error_clear" if clear_error(status, raw) else "greedy_error_unclear")
            if not clear_error(status, raw):
                t.fail(f"greedy {status} without a clear error")
            continue
        reply = json.loads(raw)
        tokens = [e["token"] for e in reply["choices"][0]["logprobs"]["content"]]
        with t.lock:
            want = first.setdefault(prompt, tokens)
        if tokens != want:
            t.fail(f"greedy answer changed under load for {prompt!r}")
        t.add("greedy_same" if tokens == want else "greedy_changed")


def tokenize_worker(port, stub, end, rng, t):
    """/tokenize, /detokenize and the gRPC Tokenize / Detokenize, checked; and large gRPC messages."""
    headers, metadata = {"Authorization": f"Bearer {KEYS[1]}"}, [("authorization", f"Bearer {KEYS[1]}")]
    while time.time() < end:
        kind = rng.choice(["http", "http", "grpc", "grpc", "large", "oversized"])
        text = f"Tell me about {rng.choice(TOPICS)}, {rng.random()}."
        try:
            if kind == "http":
                body = {"prompt": text} if rng.random() < 0.5 else {"messages": [{"role": "user", "content": text}]}
                status, raw = http_json(port, "POST", "/tokenize", json.dumps(body), headers=headers)
                ids = json.loads(raw)["tokens"] if status == 200 else None
                if ids is None or json.loads(raw)["count"] != len(ids):
                    t.fail(f"/tokenize answered {status}: {raw[:200]!r}")
                    continue
                status, raw = http_json(port, "POST", "/detokenize", json.dumps({"tokens": ids}), headers=headers)
                if status != 200 or not json.loads(raw)["prompt"]:
                    t.fail(f"/detokenize answered {status}: {raw[:200]!r}")
                    continue
                t.add("tokenize_http")
            elif kind == "grpc":
                ids = stub.Tokenize(pb.TokenizeRequest(text=text), timeout=60, metadata=metadata).ids
                back = stub.Detokenize(pb.DetokenizeRequest(ids=ids), timeout=60, metadata=metadata).text
                if not ids or text not in back:
                    t.fail(f"gRPC Tokenize/Detokenize did not round-trip {text!r}: {back!r}")
                    continue
                t.add("tokenize_grpc")
            else:  # 3.9 MiB: within gRPC's receive limit, past the token limit; 5 MiB: past the receive limit
                size = (39 << 20) // 10 if kind == "large" else 5 << 20
                stub.Tokenize(pb.TokenizeRequest(text="a " * (size // 2)), timeout=120, metadata=metadata)
                t.fail(f"a {size}-byte Tokenize was answered OK")
        except grpc.RpcError as e:
            expected = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
            if kind in ("large", "oversized") and e.code() in expected and e.details():
                t.add(f"tokenize_{kind}_{e.code().name.lower()}")
            else:
                t.fail(f"gRPC tokenizer call ({kind}) failed: {e.code()} {e.details()!r}")
        except (OSError, ValueError, KeyError) as e:
            t.fail(f"tokenizer call ({kind}) failed: {e!r}")
        time.sleep(rng.uniform(0.05, 0.5))


def hostile_worker(port, end, rng, t):
    """Hostile bodies from a client holding a key (so they reach the body checks), and large bodies without
    one (refused 401 before the body is read)."""
    key = {"Authorization": f"Bearer {KEYS[2]}"}
    while time.time() < end:
        kind = rng.choice(["slowloris", "burst", "oversized", "nested", "utf8", "unauthenticated"])
        try:
            if kind == "slowloris":
                socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(20)]
                for s in socks:
                    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
                time.sleep(2)
                for s in socks:
                    s.close()
            elif kind == "burst":
                socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(100)]
                for s in socks:
                    s.close()
            elif kind == "oversized":
                status, _ = http_json(port, "POST", "/v1/completions", b"{" + b" " * (9 << 20) + b"}", headers=key)
                t.add(f"hostile_oversized_{status}")
            elif kind == "unauthenticated":
                status, _ = http_json(port, "POST", "/v1/completions", b"{" + b" " * (7 << 20) + b"}")
                t.add(f"hostile_unauthenticated_{status}")
                if status != 401:
                    t.fail(f"a body without a key got {status}")
            elif kind == "nested":
                status, raw = http_json(port, "POST", "/v1/completions", "[" * 100000 + "]" * 100000, headers=key)
                t.add(f"hostile_nested_{status}")
                if status != 400:
                    t.fail(f"nested JSON got {status}")
            else:
                body = b'{"prompt": "bad \xff\xfe bytes", "max_tokens": 4}'
                status, raw = http_json(port, "POST", "/v1/completions", body, headers=key)
                t.add(f"hostile_utf8_{status}")
            t.add(f"hostile_{kind}")
        except OSError as e:
            t.add(f"hostile_{kind}_transport_{type(e).__name__}")  # the server may refuse or close: that is its job
        time.sleep(rng.uniform(0.5, 2.0))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def metric(text, name):
    m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=3600)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"))
    ap.add_argument("--openai-workers", type=int, default=6)
    ap.add_argument("--grpc-workers", type=int, default=6)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    log = tempfile.NamedTemporaryFile(prefix="beacon-soak-", suffix=".log", delete=False)
    keys = tempfile.NamedTemporaryFile("w", prefix="beacon-soak-", suffix=".keys", delete=False)
    keys.write("\n".join(KEYS) + "\n")
    keys.close()
    proc = subprocess.Popen([os.path.join(a.bin, "beacon-serve"), "--model", a.model, "--host", "127.0.0.1",
                             "--grpc-port", "0", "--http-port", "0", "--admin-port", "0", "--threads", "2",
                             "--kv-pool-tokens", "3072", "--admission", "optimistic", "--max-running", "24",
                             "--http-max-connections-per-client", "0", "--http-header-timeout-s", "2",
                             "--api-key-file", keys.name],
                            stdout=log, stderr=subprocess.STDOUT)
    ports = None
    for _ in range(1200):
        m = re.search(r"ready grpc=\S+:(\d+) http=\S+:(\d+) admin=\S+:(\d+)", open(log.name).read())
        if m:
            ports = [int(g) for g in m.groups()]
            break
        if proc.poll() is not None:
            sys.exit(f"beacon-serve exited: {open(log.name).read()[-2000:]}")
        time.sleep(0.1)
    grpc_port, http_port, admin = ports
    stub = pb_grpc.BeaconServiceStub(grpc.insecure_channel(f"127.0.0.1:{grpc_port}"))
    t, first = Tally(), {}
    start = time.time()
    end = start + a.duration
    workers = [threading.Thread(target=openai_worker, args=(http_port, end, random.Random(i), t))
               for i in range(a.openai_workers)]
    workers += [threading.Thread(target=grpc_worker, args=(stub, end, random.Random(100 + i), t))
                for i in range(a.grpc_workers)]
    workers += [threading.Thread(target=greedy_worker, args=(http_port, end, t, first)),
                threading.Thread(target=hostile_worker, args=(http_port, end, random.Random(7), t)),
                threading.Thread(target=tokenize_worker, args=(http_port, stub, end, random.Random(11), t))]
    for w in workers:
        w.start()
    samples = []
    while time.time() < end and proc.poll() is None:
        try:
            ready = http_json(admin, "GET", "/ready", timeout=10)[0]
            stats = json.loads(http_json(admin, "GET", "/v1/engine/stats", timeout=10, headers=ADMIN)[1])
        except OSError as e:
            ready, stats = f"transport: {e!r}", {}
        samples.append({"t": round(time.time() - start, 1), "rss_kib": rss_kib(proc.pid), "ready": ready,
                        "inflight": stats.get("inflight"), "kv_blocks_free": stats.get("kv_blocks_free")})
        if ready != 200:
            t.fail(f"/ready answered {ready} at {samples[-1]['t']} s")
        time.sleep(5)
    for w in workers:
        w.join(600)
    summary = {"duration_s": a.duration, "counts": t.counts, "samples": samples}
    if proc.poll() is not None:
        t.fail(f"beacon-serve exited with {proc.returncode}")
    else:
        idle = None
        for _ in range(600):
            idle = json.loads(http_json(admin, "GET", "/v1/engine/stats", headers=ADMIN)[1])
            if idle["inflight"] == 0 and idle["running"] == 0 and idle["kv_blocks_free"] == idle["kv_blocks_total"]:
                break
            time.sleep(0.1)
        if idle["kv_blocks_free"] != idle["kv_blocks_total"] or idle["inflight"]:
            t.fail(f"not idle after the run: {idle}")
        text = http_json(admin, "GET", "/metrics", headers=ADMIN)[1].decode()
        generated = metric(text, "beacon_generation_tokens_total")
        per_request = metric(text, "beacon_request_generation_tokens_sum")
        summary["tokens"] = {"counter": generated, "per_request_sum": per_request, "client_usage": t.usage_tokens}
        summary["engine"] = {k: metric(text, f"beacon_{k}_total") for k in
                             ("preemptions", "kv_evictions", "prefix_cache_hits", "prefix_cache_queries")}
        if generated != per_request or t.usage_tokens > (generated or 0):
            t.fail(f"token counters disagree: {summary['tokens']}")
        warm = [s["rss_kib"] for s in samples if s["t"] >= a.duration / 5]
        second = [s["rss_kib"] for s in samples if a.duration / 5 <= s["t"] < 2 * a.duration / 5]
        last = [s["rss_kib"] for s in samples if s["t"] >= 4 * a.duration / 5]
        if second and last and statistics.median(last) > 1.1 * statistics.median(second):
            t.fail(f"resident memory climbed from a median of {statistics.median(second)} KiB (second fifth) to "
                   f"{statistics.median(last)} KiB (last fifth)")
        summary["rss_kib"] = {"after_warmup": warm[0] if warm else None, "max": max(warm) if warm else None,
                              "median_second_fifth": statistics.median(second) if second else None,
                              "median_last_fifth": statistics.median(last) if last else None,
                              "end": samples[-1]["rss_kib"] if samples else None}
        proc.terminate()
        proc.wait(60)
    summary["failures"] = t.failures
    if a.out:
        with open(a.out, "w") as f:
            json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "samples"}, indent=1))
    sys.exit(1 if t.failures else 0)


if __name__ == "__main__":
    main()
