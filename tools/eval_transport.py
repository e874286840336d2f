"""How tools/reasoning_eval.py talks to beacon-serve: the gRPC API (KvStats per request,
GetModelInfo), the OpenAI API (KV figures from the server's log), and a server started
on ephemeral loopback ports. grpc is imported when a Grpc client is made, not before."""
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READY = re.compile(r"ready grpc=\S+:(\d+) http=\S+:(\d+)")


class Grpc:
    def __init__(self, target):
        import grpc  # noqa: PLC0415
        stubs = tempfile.mkdtemp(prefix="beacon-stubs-")
        proto = os.path.join(ROOT, "proto")
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{proto}", f"--python_out={stubs}",
                        f"--grpc_python_out={stubs}", os.path.join(proto, "beacon/v1/beacon.proto")], check=True)
        sys.path.insert(0, stubs)
        from beacon.v1 import beacon_pb2, beacon_pb2_grpc  # noqa: PLC0415
        self.pb = beacon_pb2
        self.channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", 64 << 20)])
        self.stub = beacon_pb2_grpc.BeaconServiceStub(self.channel)
        self.grpc = grpc

    def model_info(self):
        """{policy: what a request naming it (and no budget) runs with}, from GetModelInfo."""
        info = self.stub.GetModelInfo(self.pb.GetModelInfoRequest(), timeout=60)
        return {p.name: {"allowed": p.allowed, "budget": p.budget, "interval": p.interval, "sinks": p.sinks,
                         "window": p.window, "keep_prompt": p.keep_prompt, "recent_queries": p.recent_queries,
                         "beacons": p.beacons, "fps_bound": p.fps_bound} for p in info.kv_policies}

    def bytes_per_slot(self):
        """Bytes of one KV slot, what KvOptions.budget_bytes counts in (0: the server takes no byte budgets)."""
        return self.stub.GetModelInfo(self.pb.GetModelInfoRequest(), timeout=60).kv_bytes_per_slot

    def chat(self, content, policy, budget, max_tokens, request_id, budget_bytes=None):
        pb = self.pb
        kv = pb.KvOptions(policy=policy)
        if budget_bytes:
            kv.budget_bytes = budget_bytes
        elif budget:
            kv.budget = budget
        req = pb.GenerateRequest(request_id=request_id,
                                 chat=pb.ChatInput(messages=[pb.ChatMessage(role="user", content=content)]),
                                 sampling=pb.SamplingParams(temperature=0),
                                 stopping=pb.StoppingCriteria(max_tokens=max_tokens), kv=kv)
        text, last = [], None
        for r in self.stub.Generate(req, timeout=24 * 3600):
            text.append(r.reasoning_text + r.text)
            last = r
        fr = pb.FinishReason.Name(last.finish_reason)
        if fr == "FINISH_REASON_ERROR":
            raise RuntimeError(f"request {request_id} failed: {last.error}")
        finish = "length" if fr in ("FINISH_REASON_LENGTH", "FINISH_REASON_TIME_LIMIT") else (
            "stop" if fr in ("FINISH_REASON_STOP", "FINISH_REASON_EOS", "FINISH_REASON_STOP_SEQUENCE") else fr)
        return {"text": "".join(text), "finish_reason": finish, "prompt_tokens": last.usage.prompt_tokens,
                "completion_tokens": last.usage.completion_tokens, "cached_tokens": last.usage.cached_tokens,
                "kv_policy": last.kv.policy, "kv_budget": last.kv.budget,
                "peak_cached_tokens": last.kv.peak_cached_tokens, "evictions": last.kv.evictions,
                "evicted_tokens": last.kv.evicted_tokens, "reserved_tokens": last.kv.reserved_tokens,
                "preemptions": last.kv.preemptions, "total_seconds": last.timings.total_seconds,
                # Bytes of one KV slot and of the policy's own state at the peak (issue 45's bytes
                # accounting). A slot always has bytes, so bytes_per_slot 0 is a server that does
                # not report them (proto3 has no presence): both None then.
                **_kv_bytes(last.kv), "kv_options": _kv_options(last.kv)}


def _kv_bytes(kv):
    per_slot = getattr(kv, "bytes_per_slot", 0)
    return {"bytes_per_slot": per_slot or None, "state_bytes": getattr(kv, "state_bytes", 0) if per_slot else None}


def _kv_options(kv):
    """KvStats.options as a dict (every field, defaults included): the options the request ran with, as the
    server resolved them; None from a server that does not report them, or under full."""
    from google.protobuf import json_format  # noqa: PLC0415
    if not kv.HasField("options"):
        return None
    o = json_format.MessageToDict(kv.options, preserving_proto_field_name=True,
                                  always_print_fields_with_no_presence=True)
    o["seed"] = int(o.get("seed", 0))  # uint64 is a string in proto JSON
    return {"policy": kv.policy, **o}


class OpenAi:
    FINISHED = re.compile(r"(\S+).*finished: reason=\S+ prompt_tokens=\d+ completion_tokens=\d+ .*kv_policy=(\S+) "
                          r"kv_budget=(-?\d+) peak_cached_tokens=(\d+) evictions=(\d+) preemptions=(\d+)")

    def __init__(self, base_url, log_path=None):
        self.base = base_url.rstrip("/")
        self.log_path = log_path

    def _kv_from_log(self, request_id):
        if not self.log_path:
            return {}
        for _ in range(50):  # the log line is written as the response is sent
            with open(self.log_path, errors="replace") as f:
                for line in f:
                    if f"[{request_id}]" in line and "finished:" in line:
                        m = self.FINISHED.search(line)
                        if m:
                            return {"peak_cached_tokens": int(m.group(4)), "evictions": int(m.group(5)),
                                    "preemptions": int(m.group(6))}
            time.sleep(0.1)
        return {}

    def chat(self, content, policy, budget, max_tokens, request_id):
        body = {"messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": max_tokens,
                "kv_policy": policy, "request_id": request_id}
        if budget:
            body["kv_budget"] = budget
        req = urllib.request.Request(self.base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=24 * 3600) as r:
                out = json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"HTTP {e.code}: {e.read()[:500]!r}") from e
        ch = out["choices"][0]
        msg = ch["message"]
        text = (msg.get("reasoning_content") or "") + (msg.get("content") or "")
        rec = {"text": text, "finish_reason": ch["finish_reason"], "prompt_tokens": out["usage"]["prompt_tokens"],
               "completion_tokens": out["usage"]["completion_tokens"],
               "cached_tokens": (out["usage"].get("prompt_tokens_details") or {}).get("cached_tokens"),
               "peak_cached_tokens": None, "evictions": None, "evicted_tokens": None, "reserved_tokens": None,
               "preemptions": None}
        rec.update(self._kv_from_log(request_id))
        return rec


class Server:
    """A beacon-serve started here on ephemeral loopback ports; stopped on close."""

    def __init__(self, binary, model, log_path, flags, tag="reasoning_eval"):
        args = [binary, "--model", model, "--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0", *flags]
        self.args = args
        print(f"[{tag}] starting: " + " ".join(args), file=sys.stderr, flush=True)
        self.log_path = log_path
        self.log = open(log_path, "ab")
        start = self.log.tell()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 600
        while True:
            with open(log_path, "rb") as f:
                f.seek(start)
                m = READY.search(f.read().decode(errors="replace"))
            if m:
                self.grpc_port, self.http_port = int(m.group(1)), int(m.group(2))
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"beacon-serve exited with {self.proc.returncode}; see {log_path}")
            if time.time() > deadline:
                self.close()
                raise RuntimeError(f"beacon-serve did not become ready; see {log_path}")
            time.sleep(0.2)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def run_pool(todo, one, concurrency, server, tag):
    """Runs one(item) for every item of `todo` on `concurrency` threads. A
    failure is logged and left unrecorded (a rerun resumes it); if the
    server died, the rest is cancelled and the run stops. Exits non-zero
    when any item failed."""
    import concurrent.futures
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(one, item) for item in todo]
        for fut in concurrent.futures.as_completed(futures):
            try:
                fut.result()
            except Exception as e:  # noqa: BLE001 (logged; the record stays missing and resumes later)
                failed += 1
                print(f"[{tag}] request failed: {e!r}", file=sys.stderr, flush=True)
                if server is not None and server.proc.poll() is not None:
                    for f in futures:
                        f.cancel()
                    raise RuntimeError("beacon-serve exited; rerun to resume") from e
    if failed:
        sys.exit(f"{failed} requests failed; rerun to retry them")


def print_summary(text, markdown=None):
    """Prints a summary, and writes it to `markdown` too when given."""
    print(text)
    if markdown:
        with open(markdown, "w") as f:
            f.write(text + "\n")


def add_records_args(run_parser, subparsers):
    """The arguments every eval tool's records share: --allow-mixed-binaries on
    `run`, and the `summary RECORDS [--markdown OUT]` command."""
    run_parser.add_argument("--allow-mixed-binaries", action="store_true",
                            help="append to a records file whose earlier rows name another beacon-serve binary")
    s = subparsers.add_parser("summary", help="tables of a records file, recounted from its records")
    s.add_argument("records")
    s.add_argument("--markdown", help="also write the tables to this file")
