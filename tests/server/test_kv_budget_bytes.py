"""Budgets in bytes over gRPC and the OpenAI API (issue 45): kv.budget_bytes gives each policy the KV slots
that remain after its own state, and the final KvStats reports the bytes (bytes_per_slot, state_bytes).
The expected slot counts are computed here from the model's shape, independently of kv/policy/policy_bytes.cc."""
import json
import os
import sys
import urllib.error
import urllib.request

from serve_util import Server, chat_request, collect, expect_rpc_error, pb, run_tests
import grpc

# SmolLM2-135M (the default model): 30 layers, 9 query heads, 3 KV heads, head_dim 64, bf16 KV cache.
LAYERS, HEADS, KV_HEADS, D = 30, 9, 3, 64
SLOT = LAYERS * KV_HEADS * (2 * D * 2 + 4)  # K and V rows in bf16 and an int32 position: 23,400 bytes


def query_rows(rows, elem=2):
    return rows * LAYERS * (HEADS * D * elem + 4)


BEACON_ROWS = 4 + 16  # R + U, BeaconKV's defaults since issue 45 (16 + 64 before)
STATE = {"beacon": query_rows(BEACON_ROWS), "snapkv": query_rows(32), "rkv": query_rows(8), "streaming": 0}
PER_SLOT_STATE = {"h2o": LAYERS * KV_HEADS * 4}


def expected_budget(policy, budget_bytes):
    fixed = STATE.get(policy, 0)
    return (budget_bytes - fixed) // (SLOT + PER_SLOT_STATE.get(policy, 0))


def test_each_policy_gets_the_slots_its_state_leaves(srv):
    budget_bytes = STATE["beacon"] + 100 * SLOT
    for policy in ("beacon", "snapkv", "rkv", "h2o", "streaming"):
        _, _, last = collect(srv.stub.Generate(chat_request(
            "Count from one to twenty.", 8, ignore_eos=True, kv=pb.KvOptions(policy=policy, budget_bytes=budget_bytes))))
        want = expected_budget(policy, budget_bytes)
        assert last.kv.policy == policy and last.kv.budget == want, (policy, want, last.kv)
        assert last.kv.bytes_per_slot == SLOT, last.kv
        peak = last.kv.peak_cached_tokens
        want_state = STATE.get(policy, 0) + PER_SLOT_STATE.get(policy, 0) * peak
        assert last.kv.state_bytes == want_state, (policy, want_state, last.kv)
    assert expected_budget("beacon", budget_bytes) == 100
    assert expected_budget("streaming", budget_bytes) == 129  # 693,600 bytes of beacon state = 29.6 slots


def test_full_reports_bytes_and_no_state(srv):
    _, _, last = collect(srv.stub.Generate(chat_request("Hi.", 4, ignore_eos=True, kv=pb.KvOptions(policy="full"))))
    assert last.kv.bytes_per_slot == SLOT and last.kv.state_bytes == 0, last.kv


def test_model_info_names_a_slots_bytes(srv):
    info = srv.stub.GetModelInfo(pb.GetModelInfoRequest())
    assert info.kv_bytes_per_slot == SLOT, info.kv_bytes_per_slot
    # What a request naming each policy runs with: BeaconKV's R, K, U (the last 0 for the others).
    policies = {p.name: p for p in info.kv_policies}
    b = policies["beacon"]
    assert (b.recent_queries, b.beacons, b.fps_bound) == (4, 8, 16), b
    assert (policies["snapkv"].recent_queries, policies["snapkv"].fps_bound) == (32, 0), policies["snapkv"]


def test_final_stats_carry_the_resolved_options(srv):
    """KvStats.options: what each request ran with, as the server resolved it: the server's flags for its own
    policy (beacon: budget 64, interval 16), published defaults for the others (snapkv: R 32, pool 7; rkv: R 8,
    pool 7), the slots a byte budget gave, and the recent slots each policy protects in fact (docs/fidelity.md:
    SnapKV max(window, R), H2O max(window, budget / 2))."""
    def run(kv):
        _, _, last = collect(srv.stub.Generate(chat_request("Count from one to twenty.", 4, ignore_eos=True, kv=kv)))
        return last.kv
    o = run(pb.KvOptions(policy="beacon")).options
    assert (o.budget, o.interval, o.sinks, o.window, o.protected_window) == (64, 16, 4, 32, 32), o
    assert (o.recent_queries, o.beacons, o.fps_bound, o.beacon_filter, o.beacon_bf16_state) == (4, 8, 16, "all",
                                                                                                 True), o
    assert 0 <= o.eviction_phase < 16, o
    o = run(pb.KvOptions(policy="snapkv", budget=128)).options
    assert (o.budget, o.recent_queries, o.pool_kernel, o.window, o.protected_window) == (128, 32, 7, 32, 32), o
    o = run(pb.KvOptions(policy="h2o", budget=128)).options
    assert (o.budget, o.window, o.protected_window) == (128, 32, 64), o
    o = run(pb.KvOptions(policy="rkv", budget_bytes=STATE["rkv"] + 100 * SLOT)).options
    assert (o.budget, o.recent_queries, o.pool_kernel, abs(o.__getattribute__("lambda") - 0.1) < 1e-6) == (
        100, 8, 7, True), o
    assert not run(pb.KvOptions(policy="full")).HasField("options")


def test_eval_harness_records_what_the_server_reports(srv):
    """tools/eval_transport.py's gRPC client (what reasoning_eval records): a byte budget goes as budget_bytes,
    and the reply's kv_options are the server's KvStats.options."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    import eval_transport  # noqa: PLC0415
    client = eval_transport.Grpc(f"127.0.0.1:{srv.grpc_port}")
    assert client.bytes_per_slot() == SLOT
    out = client.chat("Hi.", "beacon", 288, 4, "harness-bytes", budget_bytes=STATE["beacon"] + 70 * SLOT)
    assert out["kv_budget"] == 70 and out["kv_options"]["budget"] == 70, out
    assert out["kv_options"]["policy"] == "beacon" and out["kv_options"]["fps_bound"] == 16, out
    assert out["kv_options"]["protected_window"] == 32 and out["kv_options"]["beacon_filter"] == "all", out
    assert out["state_bytes"] == STATE["beacon"] and out["bytes_per_slot"] == SLOT, out
    assert client.chat("Hi.", "full", None, 2, "harness-full")["kv_options"] is None


def test_refusals_name_the_field(srv):
    req = lambda kv: chat_request("Hi.", 4, kv=kv)
    # The state alone leaves fewer slots than the server's minimum budget (32).
    e = expect_rpc_error(lambda: srv.stub.Generate(req(pb.KvOptions(policy="beacon", budget_bytes=STATE["beacon"]))),
                         grpc.StatusCode.INVALID_ARGUMENT, "kv_budget_bytes")
    assert str(STATE["beacon"]) in e.details(), e.details()
    expect_rpc_error(lambda: srv.stub.Generate(req(pb.KvOptions(policy="beacon", budget=64, budget_bytes=10 ** 8))),
                     grpc.StatusCode.INVALID_ARGUMENT, "kv_budget_bytes")
    expect_rpc_error(lambda: srv.stub.Generate(req(pb.KvOptions(policy="full", budget_bytes=10 ** 8))),
                     grpc.StatusCode.INVALID_ARGUMENT, "kv_budget_bytes")
    expect_rpc_error(lambda: srv.stub.Generate(req(pb.KvOptions(policy="streaming", budget_bytes=-1))),
                     grpc.StatusCode.INVALID_ARGUMENT, "kv_budget_bytes")
    # Past the server's largest budget (--kv-max-budget 4096 here).
    expect_rpc_error(lambda: srv.stub.Generate(req(pb.KvOptions(policy="streaming", budget_bytes=5000 * SLOT))),
                     grpc.StatusCode.INVALID_ARGUMENT, "kv_budget_bytes")


def test_openai_field(srv):
    body = {"messages": [{"role": "user", "content": "Hi."}], "max_tokens": 2, "kv_policy": "beacon",
            "kv_budget_bytes": STATE["beacon"] + 64 * SLOT}
    post = lambda: urllib.request.urlopen(urllib.request.Request(
        f"http://127.0.0.1:{srv.http_port}/v1/chat/completions", json.dumps(body).encode(),
        {"Content-Type": "application/json"}), timeout=60)
    assert post().status == 200
    body["kv_budget_bytes"] = 1000  # less than the state: refused, naming the field
    try:
        post()
        raise AssertionError("a budget too small for the state must be refused")
    except urllib.error.HTTPError as e:
        assert e.code == 400 and "kv_budget_bytes" in e.read().decode()


def test_group_shared_state(srv):
    """--kv-beacon-group-queries: one state row per KV head (the group's mean query), so beacon's query rows are
    a group (3 here) smaller and a byte budget leaves it more slots; the resolved options say so, and a policy
    the request names keeps its own state."""
    state = BEACON_ROWS * LAYERS * (KV_HEADS * D * 2 + 4)  # R + U rows of 3 KV heads, and their positions
    positions = BEACON_ROWS * LAYERS * 4
    assert query_rows(BEACON_ROWS) - positions == 3 * (state - positions)
    budget_bytes = query_rows(BEACON_ROWS) + 100 * SLOT  # per-head state: 100 slots
    _, _, last = collect(srv.stub.Generate(chat_request(
        "Count from one to twenty.", 8, ignore_eos=True, kv=pb.KvOptions(policy="beacon", budget_bytes=budget_bytes))))
    assert last.kv.budget == 119, last.kv  # (693,600 + 2,340,000 - 232,800) // 23,400
    assert last.kv.state_bytes == state and last.kv.options.beacon_group_queries, last.kv
    # It evicts: 80 tokens past a budget of 40 slots.
    _, _, last = collect(srv.stub.Generate(chat_request(
        "Count from one to a hundred.", 80, ignore_eos=True,
        kv=pb.KvOptions(policy="beacon", budget_bytes=state + 40 * SLOT))))
    assert last.kv.budget == 40 and last.kv.evictions > 0 and last.kv.state_bytes == state, last.kv
    _, _, last = collect(srv.stub.Generate(chat_request(
        "Hi.", 4, ignore_eos=True, kv=pb.KvOptions(policy="snapkv", budget_bytes=budget_bytes))))
    assert last.kv.state_bytes == STATE["snapkv"] and not last.kv.options.beacon_group_queries, last.kv


def main():
    with Server("--kv-policy", "beacon", "--kv-budget", "64", "--kv-interval", "16", "--kv-max-budget", "4096") as srv:
        run_tests(srv, (test_each_policy_gets_the_slots_its_state_leaves, test_full_reports_bytes_and_no_state,
                        test_model_info_names_a_slots_bytes, test_final_stats_carry_the_resolved_options,
                        test_eval_harness_records_what_the_server_reports,
                        test_refusals_name_the_field, test_openai_field))
    with Server("--kv-policy", "beacon", "--kv-beacon-group-queries", "--kv-interval", "16",
                "--kv-max-budget", "4096") as srv:
        run_tests(srv, (test_group_shared_state,))


if __name__ == "__main__":
    main()
