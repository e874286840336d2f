"""Tokenize and Detokenize, whose replies grow with their input, are bounded on both APIs (issue 46):
token ids in or out (--max-tokenize-tokens, default the context length) and bytes of text out
(--max-detokenize-bytes), each refusal naming the field and the limit. Env: BEACON_BIN, BEACON_MODEL."""
import json
import urllib.error
import urllib.request

from serve_util import Server, expect_rpc_error, pb, run_tests
import grpc

LIMIT, TEXT_LIMIT = 64, 100


def http(srv, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{srv.http_port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        r = urllib.request.urlopen(req, timeout=30)
        return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_grpc_tokenize_and_detokenize(srv):
    ok = srv.stub.Tokenize(pb.TokenizeRequest(text="a few words"))
    assert 0 < len(ok.ids) <= LIMIT
    # Each digit is a token: 200 digits make more tokens than the limit.
    e = expect_rpc_error(lambda: srv.stub.Tokenize(pb.TokenizeRequest(text="7" * 200)),
                         grpc.StatusCode.INVALID_ARGUMENT, "text: makes 20")  # 200 or 201 with a BOS
    assert f"tokens; at most {LIMIT}" in e.details(), e.details()
    chat = pb.ChatInput(messages=[pb.ChatMessage(role="user", content="7" * 200)])
    expect_rpc_error(lambda: srv.stub.Tokenize(pb.TokenizeRequest(chat=chat)), grpc.StatusCode.INVALID_ARGUMENT,
                     "messages: makes")
    expect_rpc_error(lambda: srv.stub.Detokenize(pb.DetokenizeRequest(ids=[ok.ids[-1]] * (LIMIT + 1))),
                     grpc.StatusCode.INVALID_ARGUMENT, f"ids: has {LIMIT + 1} token ids; at most {LIMIT}")
    # Few ids, long text: the token with the longest piece, repeated past the byte limit.
    long_ids = srv.stub.Tokenize(pb.TokenizeRequest(text="internationalization responsibilities " * 4))
    piece, tid = max(zip(long_ids.pieces, long_ids.ids), key=lambda p: len(p[0].encode()))
    n = TEXT_LIMIT // len(piece.encode()) + 1
    assert n <= LIMIT, (piece, n)
    expect_rpc_error(lambda: srv.stub.Detokenize(pb.DetokenizeRequest(ids=[tid] * n)),
                     grpc.StatusCode.INVALID_ARGUMENT, f"ids: decode to {n * len(piece.encode())} bytes")
    assert srv.stub.Detokenize(pb.DetokenizeRequest(ids=[tid] * (n - 1))).text == piece * (n - 1)


def test_http_tokenize_and_detokenize(srv):
    status, body = http(srv, "/tokenize", {"prompt": "7" * 200})
    assert status == 400 and f"at most {LIMIT}" in body["error"]["message"], body
    status, body = http(srv, "/tokenize", {"prompt": "7" * 20})
    assert status == 200 and body["count"] <= LIMIT, body
    status, body = http(srv, "/detokenize", {"tokens": [body["tokens"][-1]] * (LIMIT + 1)})
    assert status == 400 and body["error"]["param"] == "tokens" and f"at most {LIMIT}" in body["error"]["message"]


def main():
    with Server("--max-tokenize-tokens", str(LIMIT), "--max-detokenize-bytes", str(TEXT_LIMIT)) as srv:
        run_tests(srv, (test_grpc_tokenize_and_detokenize, test_http_tokenize_and_detokenize))


if __name__ == "__main__":
    main()
