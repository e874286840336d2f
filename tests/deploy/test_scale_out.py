"""Scale-out on one machine: three beacon-serve replicas on loopback behind a
real HTTP/2 load balancer (Debian's haproxy 2.6 with deploy/haproxy/haproxy.cfg:
h2c front and back, health checks on each replica's /ready, retries of
requests that never reached a replica), under a steady load of concurrent
gRPC Generate streams (beacon-loadtest).

1. Every replica serves part of the load.
2. SIGKILL of one replica with streams in flight (a probe stream known to run
   there, by haproxy's x-served-by header, and the load's): those streams end
   with an error at their clients within a bounded time (never hang); every request
   sent after the kill succeeds; the two others take the traffic. The replica
   is then started again on the same ports and back in rotation.
3. Rolling restart, one replica at a time, as Kubernetes does it: take it out
   of the load balancer (the endpoint removal, here the runtime API's `drain`
   state), wait a little (the preStop sleep), SIGTERM, wait for the exit
   (running streams finish: the server's drain), start it on the same ports,
   wait for /ready and for the load balancer's health checks to put it back.
   Not one request fails.
4. The same without step "take it out first": SIGTERM alone. The load
   balancer learns of the drain from /ready within its check interval; the
   replicas run with --drain-delay-s 1, so they keep accepting requests for
   that long after /ready turns 503 and nothing sent in the gap is refused:
   not one request fails either (without the delay, requests sent in the gap
   would be refused with UNAVAILABLE: the gap that the preStop sleep closes
   on Kubernetes, docs/deploy.md).

Replicas use one engine thread and a small KV pool: the machine has 2 cores.
The load is beacon-loadtest ($BEACON_LOADTEST, else $BEACON_BIN/beacon-loadtest);
without it, a pool of Python gRPC clients (lb_util.ClientPool) drives it.
"""
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lb_util import (ClientPool, HAProxy, LoadtestLoad, Probe, Replica, burst, free_ports, grpc,  # noqa: E402
                     loadtest_binary)

MAX_TOKENS = 32
WORKERS = 6
# --drain-delay-s: after SIGTERM a replica answers /ready with 503 at once
# but keeps accepting requests for a second, longer than haproxy needs to see
# it (fall 1, inter 200 ms), so SIGTERM alone loses nothing either.
REPLICA_FLAGS = ["--threads", "1", "--http-threads", "1", "--kv-pool-tokens", "2048", "--max-running", "8",
                 "--drain-timeout-s", "20", "--drain-delay-s", "1"]
# How long a client may wait for the failure of a stream whose replica died:
# the connection reset reaches haproxy at once, so this is generous.
KILL_FAILURE_BOUND_S = 5.0
# beacon-loadtest's times, placed on this process's clock, may be late by
# the few milliseconds its exit takes (lb_util.LoadtestLoad).
TIME_TOLERANCE_S = 0.25
# The preStop-like pause between taking a replica out of the load balancer
# and SIGTERM: longer than the health-check interval (200 ms) plus a request
# in transit through haproxy.
PRE_STOP_S = 0.5
# Requests sent at once right after each SIGTERM of the rolling restarts.
BURST = 6
BURST_TOKENS = 4


def wait_until(pred, timeout, what):
    end = time.time() + timeout
    while not pred():
        assert time.time() < end, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.02)


def describe(results):
    codes = {}
    for r in results:
        codes[str(r.code)] = codes.get(str(r.code), 0) + 1
    return codes


class Cluster:
    def __init__(self, workdir):
        ports = free_ports(9)
        self.replicas = [Replica(f"r{i + 1}", ports[2 * i], ports[2 * i + 1], workdir, REPLICA_FLAGS)
                         for i in range(3)]
        self.lb = None
        try:
            for r in self.replicas:
                r.start()
            self.lb = HAProxy(self.replicas, ports[6], ports[7], ports[8], workdir)
            for r in self.replicas:
                self.lb.wait_status(r.name, "UP")
        except BaseException:
            sys.stderr.write(self.dump() + "\n")
            self.stop()
            raise
        self.target, self.http_port = f"127.0.0.1:{ports[6]}", ports[7]

    def restart(self, r):
        """Starts r again on its ports and waits until haproxy routes to it."""
        r.start()
        self.lb.wait_status(r.name, "UP")

    def stop(self):
        if self.lb:
            self.lb.stop()
        for r in self.replicas:
            r.stop()

    def dump(self):
        out = ["---- haproxy log (tail) ----", self.lb.log()[-4000:]] if self.lb else []
        for r in self.replicas:
            if r.log_path:
                out += [f"---- {r.name} log ----", r.log()[-2000:]]
        return "\n".join(out)


STARTED_LOADS = []


def make_load(cluster, workdir):
    """beacon-loadtest when there is one, else the Python client pool."""
    def new(tag):
        if loadtest_binary():
            load = LoadtestLoad(cluster.target, WORKERS, MAX_TOKENS, workdir, tag=tag)
        else:
            load = ClientPool(cluster.target, WORKERS, MAX_TOKENS)
        STARTED_LOADS.append(load)
        return load
    return new


def phase_spread(cluster, load):
    before = [r.finished_requests() for r in cluster.replicas]
    load.start()
    wait_until(lambda: all(r.finished_requests() >= b + 3 for r, b in zip(cluster.replicas, before)), 30,
               "every replica to finish 3 requests")
    results = load.stop()
    bad = [r for r in results if not r.ok(MAX_TOKENS)]
    assert not bad, f"requests failed with all replicas up: {bad[:5]}"
    print(f"  spread: {len(results)} requests, all ok; finished per replica "
          f"{[int(r.finished_requests() - b) for r, b in zip(cluster.replicas, before)]}")


def phase_kill(cluster, load):
    load.start()
    time.sleep(1.0)
    # A stream whose first tokens are already at its client, beside the
    # load's; the replica serving it (haproxy's x-served-by header says
    # which) is the one to kill.
    probe = Probe(cluster.target)
    try:
        on_victim = probe.open_one()
        victim = next(r for r in cluster.replicas if r.name == on_victim.replica)
        others = [r for r in cluster.replicas if r is not victim]
        others_before = [r.finished_requests() for r in others]
        t_kill = time.time()
        victim.signal(signal.SIGKILL)
        victim.wait(10)
        # The load goes on with one replica gone, until the two others have
        # finished two rounds of the load's requests (what was running on
        # them at the kill, and some sent after it).
        wait_until(lambda: sum(r.finished_requests() - b for r, b in zip(others, others_before)) >= 2 * WORKERS + 2,
                   60, "the survivors to serve the load")
    finally:
        probes = probe.close()
    results = load.stop()
    # The victim's stream ends with an error at its client, at once; the
    # probes on the others were unaffected.
    assert on_victim.end is not None and on_victim.code != grpc.StatusCode.OK, on_victim
    assert on_victim.end - t_kill < KILL_FAILURE_BOUND_S, f"the killed replica's stream hung: {on_victim}"
    for r in probes:
        if r is not on_victim:
            assert r.code == grpc.StatusCode.CANCELLED and r.replica != victim.name, r
    # Of the load, only requests sent before the kill may fail, each at once;
    # every request sent after the kill succeeds, on the two others (haproxy
    # retries a refused connection on another replica until its health check
    # marks the dead one DOWN).
    failed = [r for r in results if not r.ok(MAX_TOKENS)]
    for r in failed:
        assert r.start < t_kill + TIME_TOLERANCE_S, f"a request sent after the kill failed: {r}"
        assert r.end - t_kill < KILL_FAILURE_BOUND_S, f"a failed request took {r.end - t_kill:.1f}s to end: {r}"
        assert r.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), r
    late = [r for r in results if r.start >= t_kill + TIME_TOLERANCE_S]
    assert late and all(r.ok(MAX_TOKENS) for r in late), [r for r in late if not r.ok(MAX_TOKENS)][:5]
    gained = [r.finished_requests() - b for r, b in zip(others, others_before)]
    assert all(g >= 1 for g in gained), gained
    assert sum(gained) >= len(late), (gained, len(late))
    assert cluster.lb.servers()[victim.name][0].startswith("DOWN")
    print(f"  kill: the stream running on {victim.name} ended with {on_victim.code.name} "
          f"({on_victim.details!r}) {on_victim.end - t_kill:.2f}s after SIGKILL; load: {len(failed)} of "
          f"{len(results)} requests failed ({describe(failed)}), all in flight at the kill, within "
          f"{max([r.end - t_kill for r in failed] or [0]):.2f}s; all {len(late)} sent after it succeeded, on the "
          f"others, which finished {[int(g) for g in gained]} more")
    # Back on the same ports and in rotation.
    cluster.restart(victim)
    return victim


def phase_back(cluster, load, victim):
    before = victim.finished_requests()
    load.start()
    wait_until(lambda: victim.finished_requests() >= before + 2, 30, f"{victim.name} to serve again")
    results = load.stop()
    assert results and all(r.ok(MAX_TOKENS) for r in results), [r for r in results if not r.ok(MAX_TOKENS)][:5]
    print(f"  kill: {victim.name} restarted on the same ports, back in rotation ({len(results)} requests, all ok)")


def phase_rolling(cluster, load, take_out_first):
    drained, bursts, http_bursts = [], [], []
    load.start()
    time.sleep(1.0)
    t0 = time.time()
    for r in cluster.replicas:
        if take_out_first:
            # The endpoint removal and the preStop sleep of Kubernetes.
            cluster.lb.set_state(r.name, "drain")
            time.sleep(PRE_STOP_S)
        running = r.stats()["running"]
        t_term = time.time()
        r.signal(signal.SIGTERM)
        # Requests arriving right at the SIGTERM, on new connections: gRPC,
        # and the OpenAI API through haproxy's HTTP frontend.
        b, hb = burst(cluster.target, BURST, BURST_TOKENS, http_port=cluster.http_port)
        bursts += b
        http_bursts += hb
        rc = r.wait(30)
        assert rc == 0, (r.name, rc, r.log()[-2000:])
        assert "draining" in r.log() and "drain timeout" not in r.log(), r.log()[-2000:]
        drained.append((r.name, running, round(time.time() - t_term, 2)))
        r.start()
        if take_out_first:
            cluster.lb.set_state(r.name, "ready")
        cluster.lb.wait_status(r.name, "UP")
    t1 = time.time()
    time.sleep(1.0)
    results = load.stop()
    during = [r for r in results if r.end >= t0 and r.start <= t1]
    assert len(during) >= 10, len(during)
    failed = [r for r in results if not r.ok(MAX_TOKENS)] + [r for r in bursts if not r.ok(BURST_TOKENS)]
    # The HTTP API loses nothing either way: haproxy retries a draining
    # replica's 503 on another one.
    http_failed = [h for h in http_bursts if h[0] != 200 or h[2] != BURST_TOKENS]
    assert not http_failed, f"{len(http_failed)} of {len(http_bursts)} OpenAI-API requests failed: {http_failed[:5]}"
    return t1 - t0, during + bursts, failed, drained, len(http_bursts)


def main():
    workdir = tempfile.mkdtemp(prefix="beacon-scale-out-")
    t_start = time.time()
    cluster = Cluster(workdir)
    new_load = make_load(cluster, workdir)
    kind = "beacon-loadtest" if loadtest_binary() else "Python gRPC client pool"
    print(f"  load: {kind}, {WORKERS} concurrent streams of {MAX_TOKENS} tokens, "
          f"through haproxy at {cluster.target}")
    ok = False
    try:
        phase_spread(cluster, new_load("spread"))
        print(f"ok test_spread ({time.time() - t_start:.1f}s)")

        t = time.time()
        victim = phase_kill(cluster, new_load("kill"))
        phase_back(cluster, new_load("back"), victim)
        print(f"ok test_sigkill_one_replica ({time.time() - t:.1f}s)")

        t = time.time()
        span, results, failed, drained, n_http = phase_rolling(cluster, new_load("rolling"), take_out_first=True)
        assert not failed, f"{len(failed)} of {len(results)} requests failed during the rolling restart: {failed[:5]}"
        print(f"  rolling: {len(results)} gRPC requests over {span:.1f}s ({BURST} sent right at each SIGTERM) and "
              f"{n_http} OpenAI-API ones, none failed; (replica, running at SIGTERM, exited after s): {drained}")
        print(f"ok test_rolling_restart ({time.time() - t:.1f}s)")

        t = time.time()
        span, results, failed, drained, n_http = phase_rolling(cluster, new_load("sigterm-only"),
                                                               take_out_first=False)
        assert not failed, f"{len(failed)} of {len(results)} requests failed on SIGTERM alone: {failed[:5]}"
        print(f"  SIGTERM alone (--drain-delay-s 1): {len(results)} gRPC requests and {n_http} OpenAI-API ones, "
              f"none failed; (replica, running at SIGTERM, exited after s): {drained}")
        print(f"ok test_rolling_restart_sigterm_only ({time.time() - t:.1f}s)")
        print(f"  {time.time() - t_start:.1f}s in all")
        ok = True
    finally:
        for load in STARTED_LOADS:
            load.abort()
        if not ok:
            sys.stderr.write(cluster.dump() + f"\n(logs in {workdir})\n")
        cluster.stop()
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
