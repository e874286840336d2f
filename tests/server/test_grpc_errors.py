"""beacon-serve's handling of bad input and of requests that end early, over
real gRPC: INVALID_ARGUMENT naming the field for each kind of bad input, a
request that can never fit, a full queue (RESOURCE_EXHAUSTED), cancellation
mid-stream, the gRPC deadline and the request's time limit, the API key. After
each the KV pool is back to baseline and the server still serves."""
import threading
import time

from serve_util import Server, chat_request, collect, expect_rpc_error, pb
import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

IA = grpc.StatusCode.INVALID_ARGUMENT


def test_invalid_inputs(srv):
    g = srv.stub.Generate
    msg = lambda role, content: pb.ChatMessage(role=role, content=content)  # noqa: E731
    cases = [
        (pb.GenerateRequest(), "input"),
        (pb.GenerateRequest(text=""), "text"),
        (pb.GenerateRequest(chat=pb.ChatInput()), "messages"),
        (pb.GenerateRequest(chat=pb.ChatInput(messages=[msg("robot", "hi")])), "messages[0].role"),
        (pb.GenerateRequest(tokens=pb.TokenIds(ids=[1, 2, 49152])), "tokens[2]"),
        (pb.GenerateRequest(tokens=pb.TokenIds(ids=[-5])), "tokens[0]"),
        (pb.GenerateRequest(text="x " * 9000), "prompt"),  # longer than the context
        (pb.GenerateRequest(text="hi", stopping=pb.StoppingCriteria(max_tokens=-1)), "max_tokens"),
        (pb.GenerateRequest(text="hi", stopping=pb.StoppingCriteria(max_tokens=10 ** 7)), "max_tokens"),
        (pb.GenerateRequest(text="hi", stopping=pb.StoppingCriteria(stop=[""])), "stop[0]"),
        (pb.GenerateRequest(text="hi", stopping=pb.StoppingCriteria(stop_token_ids=[10 ** 6])), "stop_token_ids"),
        (pb.GenerateRequest(text="hi", sampling=pb.SamplingParams(temperature=-1)), "temperature"),
        (pb.GenerateRequest(text="hi", sampling=pb.SamplingParams(top_p=0)), "top_p"),
        (pb.GenerateRequest(text="hi", sampling=pb.SamplingParams(top_k=-3)), "top_k"),
        (pb.GenerateRequest(text="hi", kv=pb.KvOptions(policy="lru")), "lru"),
        (pb.GenerateRequest(text="hi", kv=pb.KvOptions(budget=1)), "kv_budget"),
        (pb.GenerateRequest(text="hi", kv=pb.KvOptions(budget=10 ** 8)), "kv_budget"),
    ]
    for req, needle in cases:
        expect_rpc_error(lambda: g(req), IA, needle)
    expect_rpc_error(lambda: srv.stub.Tokenize(pb.TokenizeRequest()), IA, "input")
    # google.rpc rich details: the field violation names the field.
    for req, field in [(cases[3][0], "messages[0].role"), (cases[4][0], "tokens[2]"), (cases[11][0], "temperature")]:
        e = expect_rpc_error(lambda: g(req), IA, field)
        violations = [v for v in bad_requests(e) for v in v.field_violations]
        assert [v.field for v in violations] == [field], violations
        assert violations[0].description and field not in violations[0].description[:len(field)], violations


def rich_details(e, kind):
    """The google.rpc details of type `kind` an RpcError carries."""
    status = rpc_status.from_call(e)
    assert status is not None, f"no google.rpc.Status in the trailers of {e.details()!r}"
    out = []
    for d in status.details:
        if d.Is(kind.DESCRIPTOR):
            m = kind()
            d.Unpack(m)
            out.append(m)
    return out


def bad_requests(e):
    return rich_details(e, error_details_pb2.BadRequest)


def test_invalid_utf8(srv):
    # Python's protobuf cannot build a string field with invalid UTF-8, so the
    # request is encoded by hand: field 2 (text), wire type 2, 3 bytes.
    raw = bytes([0x12, 0x03, 0x61, 0xC3, 0x28])
    call = srv.channel.unary_stream("/beacon.v1.BeaconService/Generate", request_serializer=lambda b: b,
                                    response_deserializer=pb.GenerateResponse.FromString)
    try:
        for _ in call(raw):
            pass
        raise AssertionError("invalid UTF-8 accepted")
    except grpc.RpcError as e:
        # proto3 strings must be UTF-8: gRPC's protobuf runtime refuses the
        # message before the service sees it (gRPC C++ 1.51 answers
        # UNIMPLEMENTED). The service's own check (serve_request_test.cc)
        # guards the HTTP API, where JSON can carry such text.
        assert e.code() != grpc.StatusCode.OK
    ids, _, _ = collect(srv.stub.Generate(chat_request("still there?", 4, ignore_eos=True)))
    assert len(ids) == 4


def test_never_fits(srv):
    # The pool holds 1024 slots; a full-cache request for 2000 tokens can never run.
    e = expect_rpc_error(lambda: srv.stub.Generate(
        chat_request("hi", 2000, kv=pb.KvOptions(policy="full"))), IA, "KV pool")
    assert "compressing kv_policy" in e.details()
    # The same request under a compressing policy fits: its footprint is constant.
    ids, _, last = collect(srv.stub.Generate(chat_request("hi", 40, ignore_eos=True,
                                                          kv=pb.KvOptions(policy="beacon", budget=64))))
    assert len(ids) == 40


def test_cancel_mid_stream(srv):
    base = srv.wait_idle()
    stream = srv.stub.Generate(chat_request("Tell me a very long story.", 600, ignore_eos=True))
    got = 0
    for r in stream:
        got += len(r.token_ids)
        if got >= 5:
            break
    assert srv.stats()["kv_blocks_free"] < base["kv_blocks_total"]
    stream.cancel()
    s = srv.wait_idle(timeout=10)
    assert s["kv_blocks_free"] == base["kv_blocks_total"]


def test_deadline_and_time_limit(srv):
    t0 = time.time()
    expect_rpc_error(lambda: srv.stub.Generate(chat_request("Tell a story.", 900, ignore_eos=True), timeout=0.5),
                     grpc.StatusCode.DEADLINE_EXCEEDED)
    assert time.time() - t0 < 5
    srv.wait_idle(timeout=10)
    ids, _, last = collect(srv.stub.Generate(chat_request("Tell a story.", 900, ignore_eos=True,
                                                          time_limit_ms=400)))
    assert last.finish_reason == pb.FINISH_REASON_TIME_LIMIT, last
    assert 0 < len(ids) < 900 and last.timings.total_seconds < 3
    srv.wait_idle(timeout=10)


def test_queue_full():
    # One running, one waiting; the third is refused.
    with Server("--max-running", "1", "--max-waiting", "1", "--max-step-tokens", "256") as srv:
        first = srv.stub.Generate(chat_request("Tell a long story.", 400, ignore_eos=True))
        next(iter(first))
        results = {}

        def run_second():
            results["second"] = collect(srv.stub.Generate(chat_request("Count to five.", 8, ignore_eos=True)))

        t = threading.Thread(target=run_second)
        t.start()
        end = time.time() + 10
        while srv.stats()["waiting"] < 1 and time.time() < end:
            time.sleep(0.01)
        assert srv.stats()["waiting"] == 1
        e = expect_rpc_error(lambda: srv.stub.Generate(chat_request("hello", 8)),
                             grpc.StatusCode.RESOURCE_EXHAUSTED, "queue is full")
        retry = rich_details(e, error_details_pb2.RetryInfo)
        assert len(retry) == 1 and retry[0].retry_delay.seconds == 1, retry
        first.cancel()
        t.join(60)
        assert len(results["second"][0]) == 8  # the waiting one ran once the first was cancelled
        srv.wait_idle()


def test_api_key():
    with Server("--api-key", "s3cret") as srv:
        expect_rpc_error(lambda: srv.stub.GetModelInfo(pb.GetModelInfoRequest()), grpc.StatusCode.UNAUTHENTICATED)
        expect_rpc_error(lambda: srv.stub.Generate(chat_request("hi", 4)), grpc.StatusCode.UNAUTHENTICATED,
                         "API key")
        expect_rpc_error(lambda: srv.stub.Generate(chat_request("hi", 4), metadata=[("authorization", "Bearer no")]),
                         grpc.StatusCode.UNAUTHENTICATED)
        ids, _, _ = collect(srv.stub.Generate(chat_request("hi", 4, ignore_eos=True),
                                              metadata=[("authorization", "Bearer s3cret")]))
        assert len(ids) == 4
        assert srv.http("/health")[0] == 200  # probes stay open
        assert srv.http("/ready")[0] == 200
        status, body = srv.http("/v1/engine/stats")
        assert status == 401 and body["error"]["type"] == "authentication_error", (status, body)
        status, body = srv.http("/v1/engine/stats", headers={"Authorization": "Bearer s3cret"})
        assert status == 200 and body["inflight"] == 0, (status, body)


def main():
    with Server("--kv-pool-tokens", "1024", "--max-tokens-limit", "4096") as srv:
        for t in (test_invalid_inputs, test_invalid_utf8, test_never_fits, test_cancel_mid_stream,
                  test_deadline_and_time_limit):
            t0 = time.time()
            t(srv)
            print(f"ok {t.__name__} ({time.time() - t0:.1f}s)")
        # Still serving after all that, and nothing leaked.
        ids, _, _ = collect(srv.stub.Generate(chat_request("hi", 8, ignore_eos=True)))
        assert len(ids) == 8
        srv.wait_idle()
    for t in (test_queue_full, test_api_key):
        t0 = time.time()
        t()
        print(f"ok {t.__name__} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
