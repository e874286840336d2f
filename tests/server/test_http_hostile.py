"""beacon-serve's HTTP port against hostile clients, end to end on loopback.

Phase 1 (slowloris): 80 connections from 127.0.0.2 trickle one header byte
every 0.5 s and reconnect as soon as the server drops them, against a server
whose 64 connections (--http-max-connections 64) they more than fill (the
per-client cap raised out of the way). While the attack runs, /health and
/ready from 127.0.0.1 must answer 200 (the probe reserve), and every slow
connection must be dropped by the server within the 2 s header deadline plus
a margin, not the 60 s idle timeout.

Phase 2 (one address hoarding connections): with the default per-client cap
(64), 80 connections from 127.0.0.2 that never finish a request: exactly 64
are held, 8 more sit in the probe reserve (an address over its cap may take a
quarter of it, for probes only, and is dropped at the reserve's 2 s deadline),
the other 8 get 503 naming max_connections_per_client, and a client from
127.0.0.1 is still served, probes and API alike. A probe from 127.0.0.2 at its
cap is answered 200.

Phase 3 (the admin port, issue 35): 400 slow connections from 127.0.0.1, the
address the probes come from (kubelet behind SNAT), flood the HTTP port (128
connections and its reserve, no per-client cap, as behind a proxy). The
admin port (--admin-port) answers /health, /ready and /metrics from that same
address with 200 throughout, /ready truthfully (503 "draining" once SIGTERM
arrives), and it serves no API route.

Linux routes all of 127/8 to loopback, so 127.0.0.2 is a second client
address on the same machine."""
import re
import select
import socket
import threading
import time
import urllib.error
import urllib.request

from serve_util import Server

ATTACKER = "127.0.0.2"
HEADER_TIMEOUT_S = 2
MARGIN_S = 3  # timer granularity, a loaded machine, and the 0.5 s poll below
SLOW_HEAD = b"GET /v1/models HTTP/1.1\r\nHost: victim\r\nX-Pad: " + b"a" * 4000  # never finished


def get(port, path, timeout=5):
    """(status, seconds) of GET path from 127.0.0.1 on a fresh connection."""
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        e.read()
        status = e.code
    return status, time.monotonic() - t0


def connect_from(source, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


def slowloris(port, stop, lives, lock):
    """One attacker: trickles SLOW_HEAD; when the server answers or drops the
    connection, records (outcome, lifetime) and reconnects."""
    while not stop.is_set():
        try:
            s = connect_from(ATTACKER, port)
        except OSError:
            time.sleep(0.1)
            continue
        opened, sent, outcome = time.monotonic(), 0, "open"
        try:
            while not stop.is_set() and sent < len(SLOW_HEAD):
                readable, _, _ = select.select([s], [], [], 0.5)
                if readable:
                    try:
                        data = s.recv(4096)
                    except OSError:
                        data = b""
                    outcome = "refused" if data.startswith(b"HTTP/1.1 503") else "dropped" if not data else "answered"
                    break
                try:
                    s.send(SLOW_HEAD[sent:sent + 1])
                    sent += 1
                except OSError:
                    outcome = "dropped"
                    break
        finally:
            s.close()
        with lock:
            lives.append((outcome, time.monotonic() - opened))


def test_slowloris_leaves_probes_alive():
    flags = ["--http-max-connections", "64", "--http-max-connections-per-client", "1000",
             "--http-header-timeout-s", str(HEADER_TIMEOUT_S)]
    with Server(*flags) as srv:
        port = srv.http_port
        stop, lock, lives = threading.Event(), threading.Lock(), []
        attackers = [threading.Thread(target=slowloris, args=(port, stop, lives, lock), daemon=True)
                     for _ in range(80)]
        for t in attackers:
            t.start()
        try:
            time.sleep(1.0)  # the cap is full of slow clients by now
            probes = []
            end = time.monotonic() + 3 * HEADER_TIMEOUT_S + 1  # across several waves of reconnects
            while time.monotonic() < end:
                for path in ("/health", "/ready"):
                    probes.append((path, *get(port, path)))
                time.sleep(0.3)
        finally:
            stop.set()
            for t in attackers:
                t.join(10)
        assert probes and all(status == 200 for _, status, _ in probes), probes
        worst_probe = max(seconds for _, _, seconds in probes)
        dropped = [life for outcome, life in lives if outcome == "dropped"]
        # Every slow connection, dropped or still open when the attack stopped,
        # lived no longer than the header deadline allows.
        longest = max(life for _, life in lives)
        assert len(dropped) >= 64, f"the server should have dropped the slow connections: {len(dropped)} dropped"
        assert longest <= HEADER_TIMEOUT_S + MARGIN_S, f"a slow connection lived {longest:.1f}s"
        assert not [o for o, _ in lives if o == "answered"], "a slow request must never be answered"
        status, _ = get(port, "/v1/models")  # the port serves normally after the attack
        assert status == 200, status
        print(f"  {len(probes)} probes all 200 (slowest {worst_probe:.2f}s); {len(dropped)} slow connections "
              f"dropped, longest life {longest:.1f}s; "
              f"{sum(1 for o, _ in lives if o == 'refused')} refused with 503")


def test_one_address_cannot_hold_more_than_its_cap():
    # A long header deadline: the held connections stay for the whole phase.
    with Server("--http-header-timeout-s", "30") as srv:
        port = srv.http_port
        socks = []
        try:
            for _ in range(80):
                s = connect_from(ATTACKER, port)
                s.sendall(b"GET /v1/models HTTP/1.1\r\n")  # and never the rest
                socks.append(s)
            time.sleep(1.0)  # refusals are written at once
            held, refused = 0, []
            for s in socks:
                if select.select([s], [], [], 0)[0]:
                    refused.append(s.recv(4096).decode(errors="replace"))
                else:
                    held += 1
            assert held == 72 and len(refused) == 8, (held, refused[:1])
            for text in refused:
                assert text.startswith("HTTP/1.1 503") and "max_connections_per_client is 64" in text, text
            # The reserve's over-cap share drops its silent connections at its deadline.
            time.sleep(HEADER_TIMEOUT_S + 0.5)
            dropped = sum(1 for s in socks if select.select([s], [], [], 0)[0] and s.recv(4096) == b"")
            assert dropped >= 8, dropped
            # Other clients are unaffected, API routes included.
            for path in ("/health", "/ready", "/v1/models"):
                status, _ = get(port, path)
                assert status == 200, (path, status)
        finally:
            for s in socks:
                s.close()
        # The address gets its connections back once it lets go.
        deadline = time.monotonic() + 10
        while True:
            try:
                s = connect_from(ATTACKER, port)
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                reply = s.recv(4096)
                s.close()
                if reply.startswith(b"HTTP/1.1 200"):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "127.0.0.2 never got a connection back"
            time.sleep(0.05)
        print(f"  held {held} (8 of them in the probe reserve), refused {len(refused)} with 503 naming "
              f"max_connections_per_client")


def test_probe_at_cap_is_answered():
    """A probe from an address at its cap is answered from the reserve."""
    with Server("--http-max-connections-per-client", "4") as srv:
        socks = []
        try:
            for _ in range(4):
                s = connect_from(ATTACKER, srv.http_port)
                s.sendall(b"GET /v1/models HTTP/1.1\r\n")
                socks.append(s)
            time.sleep(0.3)
            for path, want in (("/health", b"HTTP/1.1 200"), ("/ready", b"HTTP/1.1 200"), ("/v1/models", b"HTTP/1.1 503")):
                s = connect_from(ATTACKER, srv.http_port)
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                reply = s.recv(4096)
                s.close()
                assert reply.startswith(want), (path, reply[:200])
                if want.endswith(b"503"):
                    assert b"max_connections_per_client is 4" in reply, reply
        finally:
            for s in socks:
                s.close()


def get_admin(port, path):
    return get(port, path, timeout=5)[0]


def test_admin_port_serves_probes_under_a_flood_from_their_address():
    # The client port as behind a proxy (no per-client cap), small enough that 400 connections fill it
    # and its probe reserve.
    with Server("--admin-port", "0", "--drain-delay-s", "3", "--http-max-connections", "128",
                "--http-max-connections-per-client", "0") as srv:
        m = re.search(r" admin=\S+:(\d+)", srv.read_log())
        assert m, srv.read_log()[-2000:]
        admin = int(m.group(1))
        assert get_admin(admin, "/v1/models") == 404  # no API on the admin port
        # Every tenant's figures are the operator's: the stats and the metrics on the admin port only (issue 46).
        assert get_admin(admin, "/metrics") == 200 and get_admin(admin, "/v1/engine/stats") == 200
        assert srv.http("/v1/engine/stats")[0] == 404 and get(srv.http_port, "/metrics", timeout=5)[0] == 404
        socks, refused = [], 0
        try:
            for _ in range(400):  # from 127.0.0.1, the probes' own address
                try:
                    s = socket.create_connection(("127.0.0.1", srv.http_port), timeout=5)
                    s.sendall(b"GET /v1/models HTTP/1.1\r\nX-Pad: ")  # never finished
                    socks.append(s)
                except OSError:
                    refused += 1
            time.sleep(0.5)
            statuses = []
            end = time.monotonic() + 4
            while time.monotonic() < end:
                statuses += [get_admin(admin, p) for p in ("/health", "/ready", "/metrics")]
                time.sleep(0.2)
            assert statuses and all(s == 200 for s in statuses), statuses
            try:  # the flooded port, same address: 503 or no answer, whichever comes
                status = get(srv.http_port, "/ready", timeout=2)[0]
            except OSError as e:
                status = type(e).__name__
            srv.terminate()  # /ready turns 503 at once (then 3 s of drain delay): the admin port tells it too
            deadline = time.monotonic() + 5
            while get_admin(admin, "/ready") != 503:
                assert time.monotonic() < deadline, "admin /ready stayed 200 while draining"
                time.sleep(0.05)
        finally:
            for s in socks:
                s.close()
        print(f"  {len(statuses)} admin probes all 200 while {len(socks)} slow connections flooded the HTTP port "
              f"({refused} refused at connect; its own /ready meanwhile: {status}); admin /ready 503 once draining")


def main():
    for t in (test_slowloris_leaves_probes_alive, test_one_address_cannot_hold_more_than_its_cap,
              test_probe_at_cap_is_answered,
              test_admin_port_serves_probes_under_a_flood_from_their_address):
        t0 = time.time()
        t()
        print(f"ok {t.__name__} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
