"""Shared helpers of the beacon-serve end-to-end tests: start a real
beacon-serve on the default model, generate the beacon.v1 Python stubs with
grpc_tools, and small client helpers. Every test talks to the server over
real gRPC/HTTP on loopback."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

BIN = os.environ["BEACON_BIN"]
MODEL = os.environ["BEACON_MODEL"]
SRC = os.environ["BEACON_SOURCE_DIR"]

_STUBS = tempfile.mkdtemp(prefix="beacon-stubs-")
subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{SRC}/proto", f"--python_out={_STUBS}",
                f"--grpc_python_out={_STUBS}", f"{SRC}/proto/beacon/v1/beacon.proto"], check=True)
sys.path.insert(0, _STUBS)

import grpc  # noqa: E402
from beacon.v1 import beacon_pb2 as pb  # noqa: E402
from beacon.v1 import beacon_pb2_grpc as pb_grpc  # noqa: E402

READY = re.compile(r"ready grpc=\S+:(\d+) http=\S+:(\d+)")


class Server:
    """A beacon-serve process on ephemeral ports; stops on exit."""

    def __init__(self, *flags, env=None, threads=2, preexec_fn=None, model=None, binary="beacon-serve"):
        """`model`: the --model argument (default: BEACON_MODEL); `binary`: the server executable in BEACON_BIN
        (beacon-serve-emu: the same server on the emulated CUDA backend)."""
        args = [os.path.join(BIN, binary), "--model", model or MODEL, "--host", "127.0.0.1", "--grpc-port", "0",
                "--http-port", "0", "--threads", str(threads), *flags]
        self.log = tempfile.NamedTemporaryFile(prefix="beacon-serve-", suffix=".log", delete=False)
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=full_env,
                                     preexec_fn=preexec_fn)
        deadline = time.time() + 120
        while True:
            m = READY.search(self.read_log())
            if m:
                self.grpc_port, self.http_port = int(m.group(1)), int(m.group(2))
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"beacon-serve exited with {self.proc.returncode}:\n{self.read_log()}")
            if time.time() > deadline:
                raise RuntimeError(f"beacon-serve did not become ready:\n{self.read_log()}")
            time.sleep(0.05)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        self.stub = pb_grpc.BeaconServiceStub(self.channel)

    def read_log(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def http(self, path, headers=None):
        """(status, parsed JSON body) of GET path on the HTTP port."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def http_post(self, path, body, headers=None):
        """(status, parsed JSON body) of POST path with `body` (str or bytes)."""
        data = body.encode() if isinstance(body, str) else body
        req = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", data=data, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def stats(self):
        status, body = self.http("/v1/engine/stats")
        assert status == 200, (status, body)
        return body

    def wait_idle(self, timeout=30):
        """Waits until no request is in flight and every KV block is free."""
        end = time.time() + timeout
        while time.time() < end:
            s = self.stats()
            if s["inflight"] == 0 and s["kv_blocks_free"] == s["kv_blocks_total"] and s["running"] == 0:
                return s
            time.sleep(0.02)
        raise AssertionError(f"server not idle after {timeout}s: {self.stats()}")

    def terminate(self):
        self.proc.send_signal(signal.SIGTERM)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        if exc[0] is not None:
            sys.stderr.write("---- beacon-serve log ----\n" + self.read_log()[-5000:])


def chat_request(text, max_tokens=24, **kw):
    """A one-message chat request; greedy (temperature 0) unless `sampling` is given, since
    a request without a temperature samples at the server's default (1.0)."""
    kw.setdefault("sampling", pb.SamplingParams(temperature=0))
    stopping = pb.StoppingCriteria(max_tokens=max_tokens, ignore_eos=kw.pop("ignore_eos", False),
                                   stop=kw.pop("stop", []), time_limit_ms=kw.pop("time_limit_ms", 0))
    kv = kw.pop("kv", None)
    return pb.GenerateRequest(chat=pb.ChatInput(messages=[pb.ChatMessage(role="user", content=text)]),
                              stopping=stopping, kv=kv, **kw)


def collect(responses):
    """Drains a Generate stream: (token ids, text, last message)."""
    ids, text, last = [], "", None
    for r in responses:
        ids.extend(r.token_ids)
        text += r.text
        last = r
    return ids, text, last


def expect_rpc_error(fn, code, needle=""):
    try:
        out = fn()
        if hasattr(out, "__iter__") and not isinstance(out, (str, bytes)):
            for _ in out:
                pass
    except grpc.RpcError as e:
        assert e.code() == code, f"expected {code}, got {e.code()}: {e.details()}"
        assert needle in (e.details() or ""), f"{needle!r} not in {e.details()!r}"
        return e
    raise AssertionError(f"expected {code}, the call succeeded")


def beacon_run_ids(prompt, max_tokens, *flags):
    """Token ids beacon-run generates for a chat prompt (greedy)."""
    p = subprocess.run([os.path.join(BIN, "beacon-run"), "--model", MODEL, "--chat", "--prompt", prompt,
                        "--max-tokens", str(max_tokens), "--output-format", "jsonl", "--threads", "2", *flags],
                       capture_output=True, text=True, timeout=300, check=True)
    ids = []
    for line in p.stdout.splitlines():
        obj = json.loads(line)
        if "id" in obj:
            ids.append(obj["id"])
    return ids


def run_tests(srv, tests):
    """Runs each test(srv) in order, printing its time, then waits for the server to be idle."""
    for t in tests:
        t0 = time.time()
        t(srv)
        print(f"ok {t.__name__} ({time.time() - t0:.1f}s)")
    srv.wait_idle()
