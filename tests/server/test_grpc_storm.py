"""A storm of gRPC streams against a real beacon-serve, three rounds (issue 15):
300 concurrent streams per round, a fifth cancelled after their first tokens,
a fifth with deadlines too short to finish, the rest run to max_tokens. After
each round every KV block is back in the pool and nothing is in flight; the
server's RSS after rounds 2 and 3 stays within a bound of round 1's (no growth
per round: leaked requests, streams or handler state would show here).

The bounded, in-CI form of tools/soak_grpc.py."""
import random
import threading
import time

from serve_util import Server, chat_request
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


def one_stream(stub, rng, outcomes, lock):
    kind = rng.choices(["cancel", "deadline", "full"], weights=[1, 1, 3])[0]
    req = chat_request(f"Tell me about the number {rng.randint(1, 999)}.", max_tokens=rng.randint(4, 16),
                       ignore_eos=True)
    outcome = "ok"
    try:
        call = stub.Generate(req, timeout=0.05 if kind == "deadline" else 300)
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
    rng = random.Random(seed)
    outcomes, lock = {}, threading.Lock()
    threads = [threading.Thread(target=one_stream, args=(srv.stub, random.Random(rng.random()), outcomes, lock))
               for _ in range(STREAMS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    bad = {k: v for k, v in outcomes.items() if k not in ("ok", "expected")}
    assert not bad, f"unexpected outcomes: {outcomes}"
    assert sum(outcomes.values()) == STREAMS, outcomes
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
    test_storm_rounds()
    print("test_storm_rounds: ok")
