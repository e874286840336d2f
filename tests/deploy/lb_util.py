"""Helpers of the scale-out test: beacon-serve replicas on fixed loopback
ports (so a replica can be restarted on the same address), haproxy with
deploy/haproxy/haproxy.cfg and its runtime API, and a pool of gRPC clients
that records the outcome and timing of every request."""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.environ["BEACON_SOURCE_DIR"], "tests", "server"))
import serve_util  # noqa: E402  (generates the beacon.v1 stubs)
from serve_util import BIN, MODEL, SRC, READY, chat_request, grpc, pb, pb_grpc  # noqa: E402,F401


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (held together while chosen)."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def http_get(port, path, timeout=2.0):
    """(status, body) of GET path on 127.0.0.1:port; (0, error) when unreachable."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


class Replica:
    """One beacon-serve on fixed ports; start() again after it exits restarts
    it on the same addresses, with a new log file."""

    def __init__(self, name, grpc_port, http_port, workdir, flags):
        self.name, self.grpc_port, self.http_port = name, grpc_port, http_port
        self.workdir, self.flags = workdir, list(flags)
        self.proc, self.incarnation, self.log_path = None, 0, None

    def start(self, timeout=60):
        self.incarnation += 1
        self.log_path = os.path.join(self.workdir, f"{self.name}-{self.incarnation}.log")
        args = [os.path.join(BIN, "beacon-serve"), "--model", MODEL, "--host", "127.0.0.1",
                "--grpc-port", str(self.grpc_port), "--http-port", str(self.http_port), *self.flags]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        end = time.time() + timeout
        while not READY.search(self.log()):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
            if time.time() > end:
                raise RuntimeError(f"{self.name} not ready after {timeout}s:\n{self.log()}")
            time.sleep(0.02)
        assert http_get(self.http_port, "/ready")[0] == 200, self.log()

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout):
        return self.proc.wait(timeout=timeout)

    def stats(self):
        status, body = http_get(self.http_port, "/v1/engine/stats")
        assert status == 200, (self.name, status, body)
        import json
        return json.loads(body)

    def finished_requests(self):
        """beacon_request_success_total summed over finish reasons (every
        request this incarnation finished), from /metrics."""
        status, body = http_get(self.http_port, "/metrics")
        assert status == 200, (self.name, status)
        return sum(float(v) for v in re.findall(r"^beacon_request_success_total\{[^}]*\} (\S+)$", body, re.M))

    def stop(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()


class HAProxy:
    """haproxy -db (foreground) with deploy/haproxy/haproxy.cfg, addresses
    from the environment; `cmd` speaks its runtime API."""

    BACKENDS = ("beacon_grpc", "beacon_http")

    def __init__(self, replicas, grpc_port, http_port, stats_port, workdir):
        exe = os.environ.get("HAPROXY") or shutil.which("haproxy") or "/usr/sbin/haproxy"
        assert os.path.exists(exe), "haproxy not found: tools/bootstrap.sh installs Debian's haproxy package"
        self.cfg = os.path.join(SRC, "deploy", "haproxy", "haproxy.cfg")
        self.sock = os.path.join(workdir, "haproxy.sock")
        self.grpc_port, self.http_port = grpc_port, http_port
        env = dict(os.environ, BEACON_LB_ADMIN_SOCKET=self.sock, BEACON_LB_ADDR="127.0.0.1",
                   BEACON_LB_PORT=str(grpc_port), BEACON_LB_HTTP_PORT=str(http_port),
                   BEACON_LB_STATS_PORT=str(stats_port))
        self.names = []
        for i, r in enumerate(replicas, 1):
            env[f"BEACON_R{i}_HOST"] = "127.0.0.1"
            env[f"BEACON_R{i}_GRPC_PORT"] = str(r.grpc_port)
            env[f"BEACON_R{i}_HTTP_PORT"] = str(r.http_port)
            self.names.append(f"r{i}")
        check = subprocess.run([exe, "-c", "-f", self.cfg], env=env, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        self.log_path = os.path.join(workdir, "haproxy.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([exe, "-db", "-f", self.cfg], env=env, stdout=log, stderr=subprocess.STDOUT)
        end = time.time() + 10
        while not os.path.exists(self.sock):
            assert self.proc.poll() is None, self.log()
            assert time.time() < end, "haproxy did not start:\n" + self.log()
            time.sleep(0.02)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def cmd(self, line):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(self.sock)
        s.sendall(line.encode() + b"\n")
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        s.close()
        return out.decode()

    def servers(self, backend="beacon_grpc"):
        """{name: (status, current sessions, total sessions)} from `show stat`."""
        lines = self.cmd("show stat").splitlines()
        header = lines[0].lstrip("# ").split(",")
        out = {}
        for line in lines[1:]:
            row = dict(zip(header, line.split(",")))
            if row.get("pxname") == backend and row.get("svname") in self.names:
                out[row["svname"]] = (row["status"], int(row["scur"] or 0), int(row["stot"] or 0))
        return out

    def wait_status(self, name, prefix, timeout=10):
        """Waits until `name` is `prefix` (UP, DOWN, ...) in both backends."""
        end = time.time() + timeout
        while True:
            status = [self.servers(b)[name][0] for b in self.BACKENDS]
            if all(st.startswith(prefix) for st in status):
                return
            assert time.time() < end, f"{name} is {status}, not {prefix} after {timeout}s"
            time.sleep(0.02)

    def set_state(self, name, state):
        """drain (no new requests; running ones go on) / ready, in both backends."""
        for b in self.BACKENDS:
            out = self.cmd(f"set server {b}/{name} state {state}")
            assert out.strip() == "", out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Result:
    """One request: times (s since the epoch), status, streamed tokens, finish
    reason, and the replica that served it (haproxy's x-served-by header),
    when the response started."""
    __slots__ = ("worker", "start", "first", "end", "code", "details", "tokens", "finish", "replica")

    def __init__(self, worker, start):
        self.worker, self.start, self.first, self.end = worker, start, None, None
        self.code, self.details, self.tokens, self.finish, self.replica = grpc.StatusCode.OK, "", 0, None, None

    def ttft(self):
        return None if self.first is None else self.first - self.start

    def ok(self, max_tokens):
        return self.code == grpc.StatusCode.OK and self.tokens == max_tokens and \
            self.finish == pb.FINISH_REASON_LENGTH

    def __repr__(self):
        first = f"{self.first - self.start:.3f}" if self.first else None
        end = f"{self.end - self.start:.3f}" if self.end else None
        return (f"Result(worker={self.worker}, replica={self.replica}, start={self.start:.3f}, first=+{first}, "
                f"end=+{end}, code={self.code}, details={self.details!r}, tokens={self.tokens}, "
                f"finish={self.finish})")


def run_request(stub, req, result, deadline_s):
    """Runs one Generate stream, filling `result` as it goes."""
    try:
        call = stub.Generate(req, timeout=deadline_s)
        for msg in call:
            if result.first is None:
                result.replica = dict(call.initial_metadata()).get("x-served-by")
                result.first = time.time()
            result.tokens += len(msg.token_ids)
            if msg.finish_reason:
                result.finish = msg.finish_reason
    except grpc.RpcError as e:
        result.code, result.details = e.code(), e.details() or ""
    result.end = time.time()
    return result


def _http_completion(port, i, max_tokens, timeout):
    """(HTTP status, x-served-by, completion tokens or error text, seconds) of
    one POST /v1/completions."""
    import json
    body = json.dumps({"prompt": f"Burst {i}: name a colour.", "max_tokens": max_tokens, "ignore_eos": True})
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    t = time.time()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            out = json.loads(r.read())
            return r.status, r.headers.get("x-served-by"), out["usage"]["completion_tokens"], time.time() - t
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("x-served-by"), e.read().decode(errors="replace"), time.time() - t
    except OSError as e:
        return 0, None, str(e), time.time() - t


def burst(target, n, max_tokens, http_port=None, deadline_s=30.0):
    """Sends n gRPC requests at once, each on a fresh connection, and as many
    OpenAI-API requests to `http_port` at the same moment; (gRPC Results,
    HTTP outcomes) once all have ended."""
    out, http_out, lock = [], [], threading.Lock()

    def one(i):
        channel = grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
        req = chat_request(f"Burst {i}: name a colour.", max_tokens=max_tokens, ignore_eos=True)
        result = run_request(pb_grpc.BeaconServiceStub(channel), req, Result(-1, time.time()), deadline_s)
        channel.close()
        with lock:
            out.append(result)

    def one_http(i):
        r = _http_completion(http_port, i, max_tokens, deadline_s)
        with lock:
            http_out.append(r)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    if http_port:
        threads += [threading.Thread(target=one_http, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out, http_out


class ClientPool:
    """The load when beacon-loadtest is not there: `workers` threads, each its own gRPC channel (its own HTTP/2
    connection to the load balancer), sending Generate requests back to back
    until stopped. Every request has a deadline, so none can hang: a result's
    end time says how long its client waited."""

    def __init__(self, target, workers, max_tokens, deadline_s=30.0):
        self.target, self.max_tokens, self.deadline_s = target, max_tokens, deadline_s
        self.results, self.lock, self.stopping = [], threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(workers)]

    name = "Python gRPC client pool"

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def _run(self, i):
        # A local subchannel pool: one connection per worker, as separate clients have.
        channel = grpc.insecure_channel(self.target, options=[("grpc.use_local_subchannel_pool", 1)])
        stub = pb_grpc.BeaconServiceStub(channel)
        n = 0
        while not self.stopping.is_set():
            n += 1
            req = chat_request(f"Client {i} request {n}: list some fruits.", max_tokens=self.max_tokens,
                               ignore_eos=True)
            result = run_request(stub, req, Result(i, time.time()), self.deadline_s)
            with self.lock:
                self.results.append(result)
        channel.close()

    def snapshot(self):
        with self.lock:
            return list(self.results)

    def abort(self):
        self.stopping.set()

    def stop(self, timeout=None):
        """Stops issuing, lets the requests in flight finish; every Result."""
        self.stopping.set()
        for t in self.threads:
            t.join(timeout if timeout is not None else self.deadline_s + 5)
        return self.snapshot()


def loadtest_binary():
    """beacon-loadtest: $BEACON_LOADTEST, else $BEACON_BIN/beacon-loadtest; None without one."""
    for c in (os.environ.get("BEACON_LOADTEST"), os.path.join(BIN, "beacon-loadtest")):
        if c and os.access(c, os.X_OK):
            return c
    return None


class LoadtestLoad:
    """beacon-loadtest as the load: a closed loop of `workers` concurrent
    Generate streams on as many connections, until stop(). Its per-request
    JSON records come back as Results on this process's clock: a record's
    start is relative to the run's start, which is placed so that the last
    request ends when the process exits (that overestimates every time by the
    few milliseconds the exit takes, never underestimates it)."""

    name = "beacon-loadtest"

    def __init__(self, target, workers, max_tokens, workdir, deadline_s=30.0, tag="load"):
        self.exe, self.max_tokens, self.deadline_s = loadtest_binary(), max_tokens, deadline_s
        self.json_path = os.path.join(workdir, f"loadtest-{tag}.json")
        self.log_path = os.path.join(workdir, f"loadtest-{tag}.log")
        self.args = [self.exe, "run", "--server", target, "--concurrency", str(workers), "--connections",
                     str(workers), "--duration-s", "600", "--timeout-s", str(deadline_s), "--prompt-len", "fixed:24",
                     "--output-len", f"fixed:{max_tokens}", "--ignore-eos", "--json", self.json_path, "--quiet"]

    def start(self):
        if os.path.exists(self.json_path):
            os.remove(self.json_path)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT)
        return self

    def abort(self):
        if getattr(self, "proc", None) is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        """SIGINT (beacon-loadtest stops issuing and cancels what is in flight),
        then every record but those cancelled by this stop."""
        t_stop = time.time()
        self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(timeout=60)
        t_exit = time.time()
        log = open(self.log_path, errors="replace").read()
        # 130: interrupted, after writing what ran (its documented exit status).
        assert rc in (0, 130) and os.path.exists(self.json_path), f"beacon-loadtest exited with {rc}:\n{log[-3000:]}"
        import json
        records = json.load(open(self.json_path))["requests"]
        assert records, log[-3000:]
        offset = t_exit - max(r["start_s"] + r["e2e_ms"] / 1e3 for r in records)
        out = []
        for r in records:
            res = Result(r["index"], offset + r["start_s"])
            res.end = res.start + r["e2e_ms"] / 1e3
            res.code = getattr(grpc.StatusCode, r["status"])
            res.details, res.tokens = r.get("error", ""), r["output_tokens"]
            res.finish = pb.FINISH_REASON_LENGTH if r["finish_reason"] == "length" else r["finish_reason"]
            if res.ttft() is None and r["ttft_ms"] is not None:
                res.first = res.start + r["ttft_ms"] / 1e3
            # In flight when this stop cancelled it: not the server's doing.
            if res.code == grpc.StatusCode.CANCELLED and res.end >= t_stop - 0.05:
                continue
            out.append(res)
        return out


class Probe:
    """Long streams through the load balancer, each on its own connection,
    whose replica haproxy's x-served-by header names: the streams a replica
    failure must cut, observed exactly."""

    def __init__(self, target, max_tokens=2000, deadline_s=60.0):
        self.target, self.max_tokens, self.deadline_s = target, max_tokens, deadline_s
        self.streams = []  # (Result, call, thread)

    def _open(self, i):
        channel = grpc.insecure_channel(self.target, options=[("grpc.use_local_subchannel_pool", 1)])
        call = pb_grpc.BeaconServiceStub(channel).Generate(
            chat_request(f"Probe {i}: write a long story.", max_tokens=self.max_tokens, ignore_eos=True),
            timeout=self.deadline_s)
        result = Result(-1, time.time())

        def read():
            try:
                for msg in call:
                    if result.first is None:
                        result.replica = dict(call.initial_metadata()).get("x-served-by")
                        result.first = time.time()
                    result.tokens += len(msg.token_ids)
            except grpc.RpcError as e:
                result.code, result.details = e.code(), e.details() or ""
            result.end = time.time()
            channel.close()

        t = threading.Thread(target=read, daemon=True)
        t.start()
        self.streams.append((result, call, t))
        return result

    def open_one(self, timeout=30):
        """Opens a stream and waits for its first tokens; its Result (with the
        replica that serves it)."""
        r = self._open(len(self.streams))
        end = time.time() + timeout
        while r.first is None and r.end is None:
            assert time.time() < end, f"no token on the probe stream after {timeout}s: {r}"
            time.sleep(0.01)
        assert r.replica, f"the probe stream failed: {r}"
        return r

    def close(self):
        for result, call, t in self.streams:
            call.cancel()
            t.join(10)
        return [s[0] for s in self.streams]
