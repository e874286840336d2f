"""A storm of gRPC streams against a real beacon-serve, three rounds (issue 15):
300 concurrent streams per round, a fifth cancelled after their first tokens,
a fifth with deadlines too short to finish, the rest run to max_tokens. After
each round every KV block is back in the pool and nothing is in flight; the
server's RSS after rounds 2 and 3 stays within a bound of round 1's (no growth
per round: leaked requests, streams or handler state would show here).

The bounded, in-CI form of tools/soak_grpc.py."""
import os
import random
import sys
import threading
import time
import traceback

from serve_util import Server, chat_request, pb_grpc
import grpc

STREAMS = 300
ROUNDS = 3
RSS_GROWTH_LIMIT_KB = 48 * 1024  # per round after the first; a leak of 300 streams' state shows well above


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


# The deadline of the streams that run to max_tokens: a round serves all 300 in 15-45 s on 2 busy cores.
# It also bounds what a stream the client loses (below) costs: the deadline and a minute.
STREAM_TIMEOUT_S = 120


def one_stream(stub, rng, outcomes, lock):
    kind = rng.choices(["cancel", "deadline", "full"], weights=[1, 1, 3])[0]
    req = chat_request(f"Tell me about the number {rng.randint(1, 999)}.", max_tokens=rng.randint(4, 16),
                       ignore_eos=True)
    outcome = "ok"
    try:
        call = stub.Generate(req, timeout=0.05 if kind == "deadline" else STREAM_TIMEOUT_S)
        n = 0
        for msg in call:
            n += len(msg.token_ids)
            if kind == "cancel" and n >= 1:
                call.cancel()
                break
    except grpc.RpcError as e:
        expected = {"cancel": grpc.StatusCode.CANCELLED, "deadline": grpc.StatusCode.DEADLINE_EXCEEDED}.get(kind)
        outcome = "expected" if e.code() == expected else f"{kind}:{e.code().name}"
    with lock:
        outcomes[outcome] = outcomes.get(outcome, 0) + 1


def storm_round(srv, seed):
    """One round on a channel of its own. Every stream has a deadline, so a client thread alive a minute past
    the longest is one the gRPC Python client lost: it happened twice (2026-12-06 in CI, 2026-12-07 in fresh-ci,
    under load: one of 300 threads never returned while the server had nothing in flight and its log showed the
    round served; in the second the client's own deadline never fired either, past 13 minutes), and
    the non-daemon thread then hung the test until ctest's timeout. Threads are daemons and the wait is
    bounded; one such thread is reported and its stream not counted, provided the server is idle with every
    block free (what this test is about); more than one fails the round."""
    rng = random.Random(seed)
    outcomes, lock = {}, threading.Lock()
    channel = grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}")
    stub = pb_grpc.BeaconServiceStub(channel)
    threads = [threading.Thread(target=one_stream, args=(stub, random.Random(rng.random()), outcomes, lock),
                                daemon=True)
               for _ in range(STREAMS)]
    for t in threads:
        t.start()
    end = time.time() + STREAM_TIMEOUT_S + 60
    for t in threads:
        t.join(timeout=max(0.0, end - time.time()))
    stuck = sum(1 for t in threads if t.is_alive())
    if not stuck:
        channel.close()
    else:
        # Not closed: Channel.close() waits for every call on the channel, and the lost call never completes
        # (2026-12-07, fresh-ci: close() blocked 13 minutes after the round, the server idle and its
        # connection gone; grpc/grpc#20026). The channel is left to the process's exit (os._exit below).
        s = srv.wait_idle(timeout=60)
        assert stuck <= 1, f"{stuck} client streams alive a minute past their deadline; server: {s}"
        print(f"warning: 1 client stream alive a minute past its deadline (the gRPC client's; the server is "
              f"idle: {s})", flush=True)
    bad = {k: v for k, v in outcomes.items() if k not in ("ok", "expected")}
    assert not bad, f"unexpected outcomes: {outcomes}"
    assert sum(outcomes.values()) == STREAMS - stuck, outcomes
    return outcomes


def test_storm_rounds():
    with Server("--max-running", "64", "--max-waiting", "1024", "--kv-pool-tokens", "16384") as srv:
        rss = []
        for r in range(ROUNDS):
            t0 = time.time()
            outcomes = storm_round(srv, seed=r)
            s = srv.wait_idle(timeout=60)
            assert s["kv_blocks_free"] == s["kv_blocks_total"] and s["inflight"] == 0, s
            time.sleep(0.5)
            rss.append(rss_kb(srv.proc.pid))
            print(f"round {r + 1}: {outcomes} in {time.time() - t0:.1f} s, RSS {rss[-1] / 1024:.0f} MiB", flush=True)
        for r in range(1, ROUNDS):
            assert rss[r] - rss[0] < RSS_GROWTH_LIMIT_KB * r, f"RSS grows per round: {rss} kB"
        assert srv.http("/ready")[0] == 200


if __name__ == "__main__":
    # os._exit, not a return: a lost client call (above) would block the interpreter's exit in the
    # channel's finalizer, and ctest would time the test out after it had passed or failed.
    try:
        test_storm_rounds()
        print("test_storm_rounds: ok", flush=True)
        code = 0
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
