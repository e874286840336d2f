"""HTTP/2 rapid reset through the shipped load balancer (deploy/haproxy/haproxy.cfg, Debian's HAProxy 2.6):
one beacon-serve replica behind it, and the flood of tests/server/test_grpc_rapid_reset.py (100,000
Generate streams opened, each with its whole request, and reset at once on one connection) sent to
HAProxy's gRPC port instead of the replica's.

Sent to the replica directly, gRPC 1.51 makes other clients wait behind the flood's backlog, 3-21 s in
about half the runs (that test's docstring). HAProxy terminates the attacker's HTTP/2 connection, but it
forwards each stream's request before the reset comes, on its own connections to the replica, so on its
own it moves the backlog to the replica (one run in two of a first try waited 7.9 s). The configuration
therefore counts streams per client connection and refuses, with 429, those past
BEACON_LB_MAX_STREAM_RATE a second (500 by default). This test requires that HAProxy refused most of the
flood itself (measured: 99,500 of 100,000), that every GetModelInfo through HAProxy meanwhile answers
within 1 s (measured 6-28 ms on 2 cores), that a well-behaved Generate through
HAProxy completes, that the replica is never rebuilt, and that afterwards nothing is left in flight and
every KV block is free."""
import tempfile
import threading
import time

import lb_util as L
import test_grpc_rapid_reset as flood  # tests/server, on the path through lb_util
from serve_util import collect

BOUND_S = 1.0


def denied_requests(lb, frontend):
    """The frontend's requests refused by `http-request deny` (dreq in `show stat`)."""
    lines = lb.cmd("show stat").splitlines()
    header = lines[0].lstrip("# ").split(",")
    for line in lines[1:]:
        row = dict(zip(header, line.split(",")))
        if row.get("pxname") == frontend and row.get("svname") == "FRONTEND":
            return int(row["dreq"] or 0)
    raise AssertionError(f"no frontend {frontend} in show stat")


def main():
    grpc_port, http_port, lb_grpc, lb_http, lb_stats = L.free_ports(5)
    workdir = tempfile.mkdtemp(prefix="beacon-haproxy-rr-")
    replica = L.Replica("r1", grpc_port, http_port, workdir, ["--max-running", "64", "--threads", "2"])
    replica.start()
    lb = L.HAProxy([replica], lb_grpc, lb_http, lb_stats, workdir)
    try:
        lb.wait_status("r1", "UP", timeout=20)
        stub = L.pb_grpc.BeaconServiceStub(L.grpc.insecure_channel(f"127.0.0.1:{lb_grpc}"))
        stub.GetModelInfo(L.pb.GetModelInfoRequest(), timeout=10)
        result = {}
        attacker = threading.Thread(target=flood.attack, args=(lb_grpc, result))
        attacker.start()
        slowest, calls, served, quiet_until, t_end = 0.0, 0, 0, None, time.time() + 90
        while time.time() < t_end and (quiet_until is None or time.time() < quiet_until):
            if quiet_until is None and not attacker.is_alive():
                quiet_until = time.time() + 10  # the backlog, if any reached the replica
            t = time.time()
            stub.GetModelInfo(L.pb.GetModelInfoRequest(), timeout=60)
            slowest = max(slowest, time.time() - t)
            calls += 1
            if served == 0 or attacker.is_alive():
                ids, _, last = collect(stub.Generate(L.chat_request("Hi.", 4, ignore_eos=True), timeout=30))
                assert len(ids) == 4 and last.finish_reason == L.pb.FINISH_REASON_LENGTH, last
                served += 1
            time.sleep(0.05)
        attacker.join(60)
        assert not attacker.is_alive(), "the flood did not end"
        assert result.get("sent", 0) > 0, result
        assert slowest < BOUND_S, f"GetModelInfo through HAProxy took {slowest:.2f} s during the flood"
        assert served >= 1
        # The stream limit is what held it: HAProxy refused most of the flood itself.
        denied = denied_requests(lb, "grpc_in")
        assert denied > result["sent"] // 2, f"HAProxy refused only {denied} of {result['sent']} streams"
        forwarded = lb.servers()["r1"][2]
        end = time.time() + 60
        while True:  # idle: nothing in flight, every KV block free (serve_util's wait_idle, by HTTP port)
            stats = replica.stats()
            idle = stats["inflight"] == 0 and stats["running"] == 0
            if idle and stats["kv_blocks_free"] == stats["kv_blocks_total"]:
                break
            assert time.time() < end, f"replica not idle after the flood: {stats}"
            time.sleep(0.05)
        assert "rebuilding it" not in replica.log(), "the replica's listener was rebuilt"
        assert replica.alive()
    finally:
        lb.stop()
        replica.stop()
    print(f"haproxy rapid reset: OK ({result['sent']} streams opened and reset through HAProxy in "
          f"{result['seconds']:.1f} s; HAProxy refused {denied} and forwarded {forwarded} calls in all; {calls} "
          f"GetModelInfo through it, slowest {slowest * 1000:.0f} ms (bound {BOUND_S:.0f} s); {served} Generates "
          f"completed; replica never rebuilt, every KV block free)")


if __name__ == "__main__":
    main()
