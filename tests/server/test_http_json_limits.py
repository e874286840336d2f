"""Request parsing a hostile client cannot abuse (issue 15), against a real
beacon-serve on loopback: bodies nested deep or holding millions of values
are refused before a JSON tree is built, so they cost the server no memory;
JSON bodies must say so in Content-Type; range errors name the value sent
and the server's real limit; a request_id with a line break is refused over
HTTP and gRPC. Memory is read from /proc/<pid>/status (VmRSS)."""
import http.client
import json
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
from serve_util import Server, expect_rpc_error, pb

BODY_BYTES = 8 * 1000 * 1000  # under the 8 MiB body limit
PARALLEL = 4
# Before the fix four bodies of '[' raised RSS by ~2 GB (8 million nested
# arrays each), four arrays of 4 million zeros and four of a million `{}` by
# hundreds of MB; the bodies themselves are 32 MB, paid for by the warm-up.
MAX_GROWTH_KB = 64 * 1024


def rss_kb(srv):
    with open(f"/proc/{srv.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def post(srv, path, body, content_type="application/json"):
    """(status, parsed JSON body); content_type None sends no Content-Type."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=60)
    headers = {"Content-Type": content_type} if content_type is not None else {}
    data = body.encode() if isinstance(body, str) else body
    conn.request("POST", path, body=data, headers=headers)
    r = conn.getresponse()
    out = r.status, json.loads(r.read() or b"null")
    conn.close()
    return out


def post_parallel(srv, body):
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(lambda _: post(srv, "/v1/completions", body), range(PARALLEL)))


def message(body):
    return body["error"]["message"]


def test_hostile_bodies_cost_no_memory(srv):
    # Warm-up: rounds of four 8 MB bodies at once that parse cheaply, so that
    # the baseline includes the connections, handler threads and body
    # buffers (a round can still move RSS by a few bodies' worth).
    for _ in range(3):
        for status, body in post_parallel(srv, " " * (BODY_BYTES - 2) + "{}"):
            assert status == 400 and "prompt" in message(body), (status, body)
    before = rss_kb(srv)
    rounds = [
        ("deep", "[" * BODY_BYTES, "JSON nesting deeper than 64 levels"),
        ("wide", "[" + "0," * (BODY_BYTES // 2 - 1) + "0]", "JSON with more than 1048576 values"),
        # Within the value count: 3 MB that made a tree of ~80 MB.
        ("objects", "[" + "{}," * ((1 << 20) - 3) + "{}]",
         "JSON with more than 262144 strings (keys included), arrays and objects"),
    ]
    for name, hostile, needle in rounds:
        replies = post_parallel(srv, hostile)
        growth = rss_kb(srv) - before
        print(f"  {name}: RSS {before} kB before, +{growth} kB after")
        assert growth < MAX_GROWTH_KB, f"RSS grew by {growth} kB after {PARALLEL} {name} bodies"
        for status, body in replies:
            assert status == 400 and needle in message(body), (name, status, body)


def test_content_type(srv):
    body = json.dumps({"prompt": "hi", "max_tokens": 1})
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                  "application/jsonx", None):
        for path in ("/v1/completions", "/v1/chat/completions"):
            status, out = post(srv, path, body, ctype)
            assert status == 415, (ctype, path, status, out)
            assert "Content-Type must be application/json" in message(out), out
            assert out["error"]["code"] == 415, out
    # What was sent is shown, as printable ASCII and cut short.
    status, out = post(srv, "/v1/completions", body, "text/\xff" + "x" * 500)
    assert status == 415 and "(got 'text/?xxx" in message(out) and "x...')" in message(out), (status, out)
    # Parameters and any letter case are fine.
    for ctype in ("application/json; charset=utf-8", "Application/JSON", " application/json ;charset=UTF-8"):
        status, out = post(srv, "/v1/completions", body, ctype)
        assert status == 200 and out["usage"]["completion_tokens"] == 1, (ctype, status, out)


def test_errors_name_the_sent_value_and_the_real_limit(srv):
    limit = srv.stub.GetModelInfo(pb.GetModelInfoRequest()).max_tokens_limit
    assert 0 < limit < 2 ** 31
    for sent in ("2147483648", "18446744073709551615"):
        status, out = post(srv, "/v1/completions", '{"prompt": "hi", "max_tokens": %s}' % sent)
        assert status == 400, (status, out)
        assert f"max_tokens: {sent} is outside [1, {limit}]" in message(out), out
    status, out = post(srv, "/v1/completions", json.dumps({"prompt": [1.5, 2], "max_tokens": 1}))
    assert status == 400 and "prompt[0]: must be a token id (integer)" in message(out), (status, out)
    status, out = post(srv, "/v1/completions", json.dumps({"prompt": "hi", "top_k": 2 ** 64 - 1}))
    assert status == 400 and f"top_k: {2 ** 64 - 1} is outside" in message(out), (status, out)


def test_request_id_and_repeated_fields(srv):
    status, out = post(srv, "/v1/completions", json.dumps({"prompt": "hi", "max_tokens": 1, "request_id": "a\nb"}))
    assert status == 400 and "request_id: has the control character U+000A" in message(out), (status, out)
    status, out = post(srv, "/v1/chat/completions",
                       json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1,
                                   "request_id": "x" * 257}))
    assert status == 400 and "request_id: is 257 bytes; at most 256" in message(out), (status, out)
    status, out = post(srv, "/v1/completions", json.dumps({"prompt": "hi", "max_tokens": 1, "request_id": "mine-1"}))
    assert status == 200 and out["id"] == "mine-1", (status, out)

    ia = grpc.StatusCode.INVALID_ARGUMENT
    g = srv.stub.Generate
    expect_rpc_error(lambda: g(pb.GenerateRequest(text="hi", request_id="a\nb")), ia,
                     "request_id: has the control character U+000A")
    expect_rpc_error(lambda: g(pb.GenerateRequest(text="hi", request_id="a\0b")), ia, "U+0000")
    expect_rpc_error(lambda: g(pb.GenerateRequest(
        text="hi", stopping=pb.StoppingCriteria(stop_token_ids=[1] * 65))), ia, "stop_token_ids: has 65 ids; at most 64")
    many = [pb.ChatMessage(role="user", content="hi")] * 4097
    expect_rpc_error(lambda: g(pb.GenerateRequest(chat=pb.ChatInput(messages=many))), ia,
                     "messages: has 4097 messages; at most 4096")
    expect_rpc_error(lambda: srv.stub.Tokenize(pb.TokenizeRequest(chat=pb.ChatInput(messages=many))), ia,
                     "at most 4096")


def main():
    with Server() as srv:
        for t in (test_hostile_bodies_cost_no_memory, test_content_type,
                  test_errors_name_the_sent_value_and_the_real_limit, test_request_id_and_repeated_fields):
            t0 = time.time()
            t(srv)
            print(f"ok {t.__name__} ({time.time() - t0:.1f}s)")
        srv.wait_idle()


if __name__ == "__main__":
    main()
