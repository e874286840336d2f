"""Hostile clients against beacon-serve's gRPC port (issue 15), over real
sockets on loopback:

* a connection burst that exhausts the process's file descriptors: gRPC 1.51
  stops accepting for good after one EMFILE. /ready must say not-ready while
  the listener cannot serve, gRPC must serve again within seconds of the burst
  ending, and a stream running on an old connection must finish unharmed;
* idle connections (HTTP/2 preface and SETTINGS, then silence) and connections
  that never finish the handshake are closed by the server;
* invalid UTF-8 in request strings cannot flood the log;
* /metrics takes its own key (--metrics-api-key); --api-key alone leaves it open;
* one connection holds at most --grpc-max-concurrent-streams streams (the
  server's HTTP/2 SETTINGS say so, and 64 streams on one channel never put more
  than that in flight) while another client's request completes.
"""
import http.client
import resource
import socket
import threading
import time

from serve_util import Server, chat_request, collect, pb, pb_grpc
import grpc

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # length 0, type SETTINGS, no flags, stream 0


def low_fd_limit(n):
    """preexec_fn: soft and hard RLIMIT_NOFILE of the server at `n`, so that
    raising the soft limit to the hard one cannot help and a few hundred
    connections exhaust it."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def ready_over(conn):
    """(status, body) of GET /ready over an open keep-alive connection: it needs
    no new descriptor in the server, so it answers while they are exhausted."""
    conn.request("GET", "/ready")
    r = conn.getresponse()
    return r.status, r.read().decode()


def fresh_stub(port):
    """A stub on a channel of its own (its own connection, not a pooled one)."""
    ch = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
    return ch, pb_grpc.BeaconServiceStub(ch)


def grpc_serves(port, timeout=3):
    ch, stub = fresh_stub(port)
    try:
        stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=timeout)
        return True
    except grpc.RpcError:
        return False
    finally:
        ch.close()


def flood(port, n):
    """n connections that send the HTTP/2 preface and SETTINGS, then nothing."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(PREFACE + EMPTY_SETTINGS)
        except OSError:
            pass
        socks.append(s)
    return socks


def test_connection_burst_recovers():
    with Server("--grpc-self-check-ms", "300", preexec_fn=low_fd_limit(256)) as srv:
        probe = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=10)
        assert ready_over(probe)[0] == 200
        # A stream that runs through the burst on a connection made before it.
        result = {}

        def long_stream():
            ids, _, last = collect(srv.stub.Generate(chat_request("Count to one hundred.", 160, ignore_eos=True),
                                                     timeout=120))
            result["n"], result["reason"] = len(ids), last.finish_reason

        t = threading.Thread(target=long_stream)
        t.start()
        time.sleep(0.5)

        socks = flood(srv.grpc_port, 400)
        try:
            end = time.time() + 15
            saw_not_ready = None
            while time.time() < end:
                status, body = ready_over(probe)
                if status == 503:
                    saw_not_ready = body
                    break
                time.sleep(0.2)
            assert saw_not_ready and "gRPC" in saw_not_ready, f"/ready stayed 200 while gRPC could not accept"
        finally:
            for s in socks:
                s.close()

        # Serves again within seconds of the burst ending, readiness with it.
        end = time.time() + 20
        while time.time() < end and not grpc_serves(srv.grpc_port, timeout=2):
            time.sleep(0.2)
        assert grpc_serves(srv.grpc_port), "gRPC does not serve after the burst"
        end = time.time() + 10
        while time.time() < end and ready_over(probe)[0] != 200:
            time.sleep(0.2)
        assert ready_over(probe)[0] == 200
        # A full generation over a new connection.
        ch, stub = fresh_stub(srv.grpc_port)
        ids, _, last = collect(stub.Generate(chat_request("Say hello.", 8), timeout=60))
        assert len(ids) > 0 and last.finish_reason != pb.FINISH_REASON_ERROR
        ch.close()
        t.join(timeout=120)
        assert result.get("n") == 160, result  # the old connection's stream finished whole
        log = srv.read_log()
        assert "rebuilding" in log and "serves again" in log, log[-3000:]
        srv.wait_idle()
        probe.close()


def test_idle_and_stalled_connections_closed():
    with Server("--grpc-max-connection-idle-s", "1", "--grpc-handshake-timeout-s", "1") as srv:
        idle = socket.create_connection(("127.0.0.1", srv.grpc_port))
        idle.sendall(PREFACE + EMPTY_SETTINGS)
        stalled = socket.create_connection(("127.0.0.1", srv.grpc_port))  # sends nothing
        for s in (idle, stalled):
            s.settimeout(10)
            t0 = time.time()
            while True:  # the server's SETTINGS / GOAWAY frames, then EOF
                try:
                    chunk = s.recv(4096)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    break
            assert time.time() - t0 < 8, "connection not closed by the server"
            s.close()
        assert grpc_serves(srv.grpc_port)


def test_invalid_utf8_does_not_flood_log():
    with Server() as srv:
        ch = grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}")
        raw = ch.unary_stream("/beacon.v1.BeaconService/Generate", request_serializer=lambda b: b,
                              response_deserializer=lambda b: b)
        bad_text = b"\x12\x02\xff\xfe"  # field 2 (text), 2 bytes that are not UTF-8
        codes = set()
        for _ in range(60):
            try:
                for _ in raw(bad_text, timeout=10):
                    pass
            except grpc.RpcError as e:
                codes.add(e.code())
        assert codes and grpc.StatusCode.OK not in codes, codes
        ch.close()
        lines = [l for l in srv.read_log().splitlines() if "libprotobuf" in l]
        assert len(lines) <= 6, f"{len(lines)} protobuf log lines for 60 bad requests"
        assert grpc_serves(srv.grpc_port)


def test_metrics_key():
    with Server("--api-key", "client-key") as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=10)
        conn.request("GET", "/metrics")
        assert conn.getresponse().status == 200  # documented: --api-key does not cover /metrics
        conn.close()
    with Server("--api-key", "client-key", "--metrics-api-key", "scrape-key") as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=10)
        for headers, want in (({}, 401), ({"Authorization": "Bearer client-key"}, 401),
                              ({"Authorization": "Bearer scrape-key"}, 200)):
            conn.request("GET", "/metrics", headers=headers)
            r = conn.getresponse()
            r.read()
            assert r.status == want, (headers, r.status)
        conn.close()


def server_settings(port):
    """The server's first HTTP/2 SETTINGS frame, as {identifier: value}."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(PREFACE + EMPTY_SETTINGS)
        buf = b""
        while True:
            while len(buf) < 9:
                chunk = s.recv(4096)
                assert chunk, "connection closed before the server's SETTINGS"
                buf += chunk
            length, ftype, flags = int.from_bytes(buf[:3], "big"), buf[3], buf[4]
            while len(buf) < 9 + length:
                buf += s.recv(4096)
            payload, buf = buf[9:9 + length], buf[9 + length:]
            if ftype == 4 and not flags & 1:  # SETTINGS, not an ACK
                return {int.from_bytes(payload[i:i + 2], "big"): int.from_bytes(payload[i + 2:i + 6], "big")
                        for i in range(0, len(payload), 6)}


def test_streams_per_connection_capped():
    limit = 8
    with Server("--grpc-max-concurrent-streams", str(limit), "--max-running", "64") as srv:
        assert server_settings(srv.grpc_port).get(3) == limit  # SETTINGS_MAX_CONCURRENT_STREAMS
        # A connection of its own (grpcio shares one between channels to the same target otherwise).
        ch = grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}", options=[("grpc.use_local_subchannel_pool", 1)])
        stub = pb_grpc.BeaconServiceStub(ch)
        streams = [stub.Generate(chat_request("Count to a hundred.", 200, ignore_eos=True)) for _ in range(64)]
        def first(s):
            try:
                next(s, None)
            except grpc.RpcError:  # cancelled below
                pass

        firsts = [threading.Thread(target=first, args=(s,)) for s in streams]
        for t in firsts:
            t.start()
        peak, end = 0, time.time() + 3
        while time.time() < end:
            peak = max(peak, srv.stats()["inflight"])
            time.sleep(0.02)
        # Another client's request runs to the end meanwhile.
        ids, _, last = collect(srv.stub.Generate(chat_request("Hi.", 8, ignore_eos=True), timeout=60))
        assert len(ids) == 8 and last.finish_reason == pb.FINISH_REASON_LENGTH
        assert 0 < peak <= limit + 1, peak  # this connection's streams, and perhaps the other client's
        for s in streams:
            s.cancel()
        for t in firsts:
            t.join(10)
        ch.close()
        srv.wait_idle(60)


if __name__ == "__main__":
    for t in (test_connection_burst_recovers, test_idle_and_stalled_connections_closed,
              test_invalid_utf8_does_not_flood_log, test_metrics_key, test_streams_per_connection_capped):
        t0 = time.time()
        t()
        print(f"{t.__name__}: ok ({time.time() - t0:.1f} s)")
