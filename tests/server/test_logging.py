"""beacon-serve's logs as a log collector reads them (--log-format json): every
line of a real server's stderr is one JSON object; each request gets a
`finished` record carrying its id (the client's over gRPC and OpenAI, the
server's own when none was sent, which is the id the response carries); a
refused request gets a `refused` record with its id; `debug` adds the arrival
record and `warning` drops the per-request lines; a bad level is refused at
start-up naming the flag."""
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request

from serve_util import BIN, MODEL, Server, chat_request, collect, pb_grpc
import grpc


def records(srv):
    out = []
    for line in srv.read_log().splitlines():
        if line.strip():
            out.append(json.loads(line))  # every line is JSON, start-up and shutdown included
    return out


def about(recs, request_id):
    return [r for r in recs if r.get("request_id") == request_id]


def test_json_records_carry_request_ids():
    with Server("--log-format", "json", "--log-level", "debug") as srv:
        collect(srv.stub.Generate(chat_request("Say hi.", 8, request_id="grpc-client-id-1")))
        status, body = srv.http_post("/v1/completions", json.dumps(
            {"prompt": "Once upon a time", "max_tokens": 6, "request_id": "http-client-id-2"}))
        assert status == 200, body
        status, generated = srv.http_post("/v1/completions", json.dumps({"prompt": "Hello", "max_tokens": 4}))
        assert status == 200, generated
        status, refused = srv.http_post("/v1/completions", json.dumps(
            {"prompt": "x", "max_tokens": 4, "kv_policy": "nope", "request_id": "bad-request-3"}))
        assert status == 400, refused
        srv.wait_idle()
        recs = records(srv)
        assert all({"time", "level", "logger", "message"} <= r.keys() for r in recs), recs
        assert any(r["message"].startswith("ready grpc=") for r in recs), recs
        for rid in ("grpc-client-id-1", "http-client-id-2", generated["id"]):
            mine = about(recs, rid)
            msgs = [r["message"] for r in mine]
            assert any(m.startswith("received: prompt_tokens=") for m in msgs), (rid, msgs)
            fin = [r for r in mine if r["message"].startswith("finished: ")]
            assert len(fin) == 1 and fin[0]["level"] == "info", (rid, mine)
            assert "completion_tokens=" in fin[0]["message"] and "kv_policy=" in fin[0]["message"], fin
        bad = about(recs, "bad-request-3")
        assert len(bad) == 1 and bad[0]["message"].startswith("refused: INVALID_ARGUMENT") and \
            "kv_policy" in bad[0]["message"], bad


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_levels_filter_per_request_lines():
    # At warning even the ready line (info) is not written: find the server by
    # its ports and /ready instead of by its log.
    grpc_port, http_port = free_port(), free_port()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([os.path.join(BIN, "beacon-serve"), "--model", MODEL, "--host", "127.0.0.1",
                                 "--grpc-port", str(grpc_port), "--http-port", str(http_port), "--threads", "2",
                                 "--log-format", "json", "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 120
            while True:
                assert proc.poll() is None and time.time() < deadline, "beacon-serve did not become ready"
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/ready", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    time.sleep(0.1)
            with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
                collect(pb_grpc.BeaconServiceStub(ch).Generate(chat_request("Say hi.", 4, request_id="quiet-1")))
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        log.seek(0)
        text = log.read().decode(errors="replace")
        assert proc.returncode == 0, text
        recs = [json.loads(l) for l in text.splitlines() if l.strip()]
        assert all(r["level"] in ("warning", "error") for r in recs), recs
        assert not about(recs, "quiet-1"), recs
    with Server() as srv:  # the default: text, info
        collect(srv.stub.Generate(chat_request("Say hi.", 4, request_id="text-1")))
        srv.wait_idle()
        lines = [l for l in srv.read_log().splitlines() if "[text-1] finished: reason=" in l]
        assert len(lines) == 1 and " info [text-1] " in lines[0], srv.read_log()[-2000:]


def test_bad_log_flags_are_refused_by_name():
    for flags, needle in ((["--log-level", "verbose"], "--log-level"), (["--log-format", "yaml"], "--log-format")):
        p = subprocess.run([os.path.join(BIN, "beacon-serve"), "--model", MODEL, *flags], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 2 and needle in p.stderr, (flags, p.returncode, p.stderr)


if __name__ == "__main__":
    test_bad_log_flags_are_refused_by_name()
    test_json_records_carry_request_ids()
    test_levels_filter_per_request_lines()
    print("logging: ok")
