"""beacon-serve end to end over real gRPC: greedy results token-identical to
beacon-run, concurrent streams each equal to their solo run, the final
message's contents, Tokenize, GetModelInfo, the standard health service and
server reflection."""
import concurrent.futures
import json
import os
import subprocess
import time

from serve_util import BIN, Server, beacon_run_ids, chat_request, collect, pb
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

PROMPTS = [
    "Write a short plan for learning to bake bread.",
    "List three prime numbers and explain why they are prime.",
    "What is the capital of France? Answer in one sentence.",
    "Count from one to ten in words.",
]


def spread_phase(ids, interval):
    """EvictionSchedule::SpreadPhase for one sample: FNV-1a over the ids' little-endian bytes."""
    h = 0xcbf29ce484222325
    for i in ids:
        for b in (i & 0xFFFFFFFF).to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h % interval


def test_greedy_matches_beacon_run(srv):
    n = 96
    for policy_flags, kv in ((["--kv-policy", "full"], pb.KvOptions(policy="full")),
                             (["--kv-policy", "beacon", "--kv-budget", "32", "--kv-interval", "16"],
                              pb.KvOptions(policy="beacon", budget=32))):
        expected = beacon_run_ids(PROMPTS[0], n, "--ignore-eos", *policy_flags)
        ids, text, last = collect(srv.stub.Generate(chat_request(PROMPTS[0], n, ignore_eos=True, kv=kv)))
        assert ids == expected, f"{kv.policy}: server {ids}\n beacon-run {expected}"
        assert last.finish_reason == pb.FINISH_REASON_LENGTH
        assert last.usage.completion_tokens == n
        assert last.kv.policy == kv.policy
        if kv.policy == "beacon":
            # keep_prompt: bound = prompt + 32; an eviction each time the cache
            # reaches bound + 16 slots (decode step k sees prompt + k - 1),
            # the first one `phase` steps early (--kv-eviction-phase spread,
            # the default: a hash of the prompt's ids, EvictionSchedule::SpreadPhase).
            prompt_ids = srv.stub.Tokenize(pb.TokenizeRequest(chat=pb.ChatInput(
                messages=[pb.ChatMessage(role="user", content=PROMPTS[0])]))).ids
            phase = spread_phase(prompt_ids, 16)
            first = 32 + 16 - phase + 1
            assert last.kv.evictions == (n - first) // 16 + 1 and last.kv.budget == 32, last.kv
            # Each eviction drops 16 slots, the first only 16 - phase.
            assert last.kv.evicted_tokens == 16 * last.kv.evictions - phase, last.kv
            assert last.kv.peak_cached_tokens <= last.usage.prompt_tokens + 32 + 16, last.kv


def test_concurrent_streams_equal_solo_runs(srv):
    solo = {}
    for p in PROMPTS:
        solo[p], _, _ = collect(srv.stub.Generate(chat_request(p, 32, ignore_eos=True)))

    def run(p):
        return p, collect(srv.stub.Generate(chat_request(p, 32, ignore_eos=True, request_id=f"c-{p[:8]}")))

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        results = list(ex.map(run, PROMPTS * 2))
    for p, (ids, text, last) in results:
        # Batch-invariant kernels: a sequence's tokens do not depend on its batch.
        assert ids == solo[p], f"{p!r}: batched {ids} != solo {solo[p]}"
        assert last.request_id == f"c-{p[:8]}"
    srv.wait_idle()


def test_final_message(srv):
    ids, text, last = collect(srv.stub.Generate(chat_request(PROMPTS[2], 64)))
    assert last.finish_reason in (pb.FINISH_REASON_EOS, pb.FINISH_REASON_LENGTH), last
    if last.finish_reason == pb.FINISH_REASON_EOS:  # the EOS token is named, not streamed
        info = srv.stub.GetModelInfo(pb.GetModelInfoRequest())
        assert last.matched_stop_token_id in info.eos_token_ids and last.matched_stop_token_id not in ids
    assert last.usage.prompt_tokens > 10
    assert last.usage.completion_tokens >= len(ids)
    assert len(text) > 0
    t = last.timings
    assert 0 <= t.queue_seconds <= t.time_to_first_token_seconds <= t.total_seconds, t
    assert last.request_id.startswith("beacon-"), last.request_id  # assigned when the client gives none
    # Every message carries the request id; only the last a finish reason.
    msgs = list(srv.stub.Generate(chat_request(PROMPTS[3], 16, ignore_eos=True, request_id="abc")))
    assert all(m.request_id == "abc" for m in msgs)
    assert all(m.finish_reason == pb.FINISH_REASON_UNSPECIFIED for m in msgs[:-1])
    assert sum(len(m.token_ids) for m in msgs) == 16


def test_stop_strings_and_token_input(srv):
    ids, text, _ = collect(srv.stub.Generate(chat_request(PROMPTS[3], 48, ignore_eos=True)))
    assert len(text) > 10
    stop = text[5:9]
    _, stopped_text, last = collect(srv.stub.Generate(chat_request(PROMPTS[3], 48, ignore_eos=True, stop=[stop])))
    assert last.finish_reason == pb.FINISH_REASON_STOP_SEQUENCE, last
    assert last.matched_stop == stop and not last.HasField("matched_stop_token_id"), last
    assert stop not in stopped_text and text.startswith(stopped_text), (stopped_text, text)
    # Token-id input: the same ids Tokenize gives for the chat input.
    tok = srv.stub.Tokenize(pb.TokenizeRequest(chat=pb.ChatInput(messages=[pb.ChatMessage(role="user",
                                                                                         content=PROMPTS[3])])))
    assert len(tok.ids) == len(tok.pieces) > 5
    by_ids, _, _ = collect(srv.stub.Generate(pb.GenerateRequest(
        tokens=pb.TokenIds(ids=tok.ids), stopping=pb.StoppingCriteria(max_tokens=48, ignore_eos=True),
        sampling=pb.SamplingParams(temperature=0))))
    assert by_ids == ids
    # Seeded sampling is reproducible.
    samp = pb.SamplingParams(temperature=0.9, top_p=0.95, seed=1234)
    a, _, _ = collect(srv.stub.Generate(chat_request(PROMPTS[0], 24, sampling=samp, ignore_eos=True)))
    b, _, _ = collect(srv.stub.Generate(chat_request(PROMPTS[0], 24, sampling=samp, ignore_eos=True)))
    assert a == b
    # Without a seed the server picks one and reports it: sending it back reproduces the output.
    unseeded = pb.SamplingParams(temperature=0.9, top_p=0.95)
    c, _, last_c = collect(srv.stub.Generate(chat_request(PROMPTS[0], 24, sampling=unseeded, ignore_eos=True)))
    again = pb.SamplingParams(temperature=0.9, top_p=0.95, seed=last_c.seed)
    d, _, last_d = collect(srv.stub.Generate(chat_request(PROMPTS[0], 24, sampling=again, ignore_eos=True)))
    assert c == d and last_d.seed == last_c.seed


def test_model_info_health_reflection(srv):
    info = srv.stub.GetModelInfo(pb.GetModelInfoRequest())
    assert info.architecture == "llama" and info.vocab_size == 49152 and info.context_length >= 2048, info
    assert info.default_kv_policy == "beacon" and info.admission == "reserve"
    policies = {p.name: p for p in info.kv_policies}
    assert set(policies) >= {"full", "beacon", "snapkv", "h2o"}
    assert policies["beacon"].is_default and policies["beacon"].budget == 64 and policies["beacon"].interval == 16
    assert policies["beacon"].beacons == 8 and policies["full"].budget == 0 and policies["snapkv"].allowed
    assert len(info.eos_token_ids) >= 1
    health = health_pb2_grpc.HealthStub(srv.channel)
    for service in ("", "beacon.v1.BeaconService"):
        r = health.Check(health_pb2.HealthCheckRequest(service=service))
        assert r.status == health_pb2.HealthCheckResponse.SERVING
    refl = reflection_pb2_grpc.ServerReflectionStub(srv.channel)
    resp = next(refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
    names = {s.name for s in resp.list_services_response.service}
    assert "beacon.v1.BeaconService" in names and "grpc.health.v1.Health" in names, names
    status, body = srv.http("/health")
    assert status == 200 and body["status"] == "ok"
    status, body = srv.http("/ready")
    assert status == 200 and body["status"] == "ready"


def test_beacon_client(srv):
    client = os.path.join(BIN, "beacon-client")
    addr = f"127.0.0.1:{srv.grpc_port}"
    p = subprocess.run([client, "--server", addr, "--max-tokens", "16", "--ignore-eos", "--output-format", "jsonl", PROMPTS[1]],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(l) for l in p.stdout.splitlines()]
    assert sum(len(l["token_ids"]) for l in lines) == 16 and lines[-1]["finish_reason"] == "length", lines[-1]
    p = subprocess.run([client, "--server", addr, "--kv-policy", "lru", "hi"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "kv_policy" in p.stderr, (p.returncode, p.stderr)
    p = subprocess.run([client, "--server", addr, "tokenize", "hello world"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and json.loads(p.stdout)["pieces"] == ["hello", " world"], p.stdout


def main():
    with Server("--kv-policy", "beacon", "--kv-budget", "64", "--kv-interval", "16") as srv:
        for t in (test_greedy_matches_beacon_run, test_concurrent_streams_equal_solo_runs, test_final_message,
                  test_stop_strings_and_token_input, test_model_info_health_reflection, test_beacon_client):
            t0 = time.time()
            t(srv)
            print(f"ok {t.__name__} ({time.time() - t0:.1f}s)")
        srv.wait_idle()


if __name__ == "__main__":
    main()
