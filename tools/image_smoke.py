#!/usr/bin/env python3
"""Smoke test of a running beacon-serve container, from outside it (tools/image-check.sh
starts the container and calls this). Everything goes over the published ports on
loopback, as a client of the replica would:

  1. /ready turns 200 (the model loaded) and /health is 200;
  2. gRPC Generate streams a greedy chat answer (beacon.v1, stubs made from proto/);
  3. an OpenAI chat completion over HTTP returns an assistant message and usage;
  4. /metrics is Prometheus text with the serving families, on the admin port
     (BEACON_ADMIN_PORT in the images) and not on the client port;
  5. SIGTERM during a running stream drains: /ready says 503 while the stream
     goes on, the stream ends normally (not cancelled), the process exits 0.

Usage: tools/python tools/image_smoke.py --http PORT --grpc PORT --admin PORT --container NAME [--podman podman]
Exit 0 when every check passed; each check prints one line.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stubs():
    out = tempfile.mkdtemp(prefix="beacon-stubs-")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}/proto", f"--python_out={out}",
                    f"--grpc_python_out={out}", f"{ROOT}/proto/beacon/v1/beacon.proto"], check=True)
    sys.path.insert(0, out)


def http(port, path, body=None, timeout=60):
    """(status, body text) of a GET, or of a JSON POST when body is given."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        return 0, str(e)


def check(ok, what, detail=""):
    print(f"image-smoke: {'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--http", type=int, required=True, help="the container's HTTP port as published on loopback")
    ap.add_argument("--grpc", type=int, required=True, help="the container's gRPC port as published on loopback")
    ap.add_argument("--admin", type=int, required=True, help="the container's admin port as published on loopback")
    ap.add_argument("--container", required=True, help="the container's name (SIGTERM goes to it)")
    ap.add_argument("--podman", default="podman", help="the container CLI")
    ap.add_argument("--ready-timeout", type=float, default=180, help="seconds to wait for /ready")
    a = ap.parse_args()

    deadline = time.time() + a.ready_timeout
    status = 0
    while time.time() < deadline:
        status, _ = http(a.http, "/ready", timeout=5)
        if status == 200:
            break
        time.sleep(0.5)
    check(status == 200, "/ready 200", f"after {a.ready_timeout - (deadline - time.time()):.1f} s")
    check(http(a.http, "/health")[0] == 200, "/health 200")

    stubs()
    import grpc
    from beacon.v1 import beacon_pb2 as pb
    from beacon.v1 import beacon_pb2_grpc as pb_grpc
    stub = pb_grpc.BeaconServiceStub(grpc.insecure_channel(f"127.0.0.1:{a.grpc}"))

    def chat(text, max_tokens, ignore_eos=False):
        return pb.GenerateRequest(chat=pb.ChatInput(messages=[pb.ChatMessage(role="user", content=text)]),
                                  sampling=pb.SamplingParams(temperature=0),
                                  stopping=pb.StoppingCriteria(max_tokens=max_tokens, ignore_eos=ignore_eos))

    text, n, last = "", 0, None
    for r in stub.Generate(chat("What is the capital of France?", 24), timeout=120):
        text += r.text
        n += len(r.token_ids)
        last = r
    check(n > 0 and last is not None and last.finish_reason != pb.FINISH_REASON_UNSPECIFIED,
          "gRPC Generate", f"{n} tokens, finish {pb.FinishReason.Name(last.finish_reason)}: {text.strip()[:60]!r}")

    st, body = http(a.http, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Name three colours."}], "max_tokens": 24, "temperature": 0})
    ok = st == 200
    if ok:
        j = json.loads(body)
        msg = j["choices"][0]["message"]
        ok = msg["role"] == "assistant" and msg["content"] and j["usage"]["completion_tokens"] > 0
    check(ok, "OpenAI chat completion", f"HTTP {st}: {body[:120]!r}")

    st, body = http(a.admin, "/metrics")
    families = ["beacon_num_requests_running", "beacon_kv_cache_usage_perc", "beacon_generation_tokens_total"]
    missing = [f for f in families if f not in body]
    check(st == 200 and not missing, "/metrics (admin port)",
          f"HTTP {st}, {len(body.splitlines())} lines, missing {missing}")
    st = http(a.http, "/metrics")[0]
    check(st == 404, "no /metrics on the client port", f"HTTP {st}")

    # Drain: a long stream is running when SIGTERM arrives; it must finish as asked.
    got = {"tokens": 0, "finish": None, "error": None}

    def long_stream():
        try:
            for r in stub.Generate(chat("Count from one to one hundred in words.", 160, ignore_eos=True),
                                   timeout=300):
                got["tokens"] += len(r.token_ids)
                if r.finish_reason != pb.FINISH_REASON_UNSPECIFIED:
                    got["finish"] = pb.FinishReason.Name(r.finish_reason)
        except grpc.RpcError as e:
            got["error"] = f"{e.code()}: {e.details()}"

    t = threading.Thread(target=long_stream)
    t.start()
    while got["tokens"] < 8 and t.is_alive():
        time.sleep(0.05)
    subprocess.run([a.podman, "kill", "--signal", "TERM", a.container], check=True, capture_output=True)
    time.sleep(0.5)
    ready_during = http(a.http, "/ready", timeout=5)[0]
    t.join(300)
    check(ready_during == 503, "/ready 503 while draining", f"HTTP {ready_during}")
    check(got["error"] is None and got["finish"] == "FINISH_REASON_LENGTH" and got["tokens"] == 160,
          "running stream finished through the drain", f"{got}")
    rc = subprocess.run([a.podman, "wait", a.container], capture_output=True, text=True, timeout=120)
    check(rc.stdout.strip() == "0", "process exited 0 after the drain", f"podman wait: {rc.stdout.strip()}")


if __name__ == "__main__":
    main()
