"""A flood of expensive gRPC requests (issue 46): rendering and tokenizing run on the PrepPool
(server/grpc/prep_pool.h), off gRPC's callback threads, behind a bounded queue. With one preparing thread
and a queue of 4, 48 concurrent Tokenize calls of ~400 KB each (and Generates of the same text) must:
- be answered each: OK, the token limit's INVALID_ARGUMENT, or RESOURCE_EXHAUSTED naming
  --grpc-prepare-queue, at once, for the calls past the queue;
- leave the listener responsive: GetModelInfo (not on the pool) and the HTTP /ready answer within a
  second throughout;
- leave a well-behaved Generate that comes after to complete normally."""
import concurrent.futures
import time

from serve_util import Server, chat_request, collect, pb
import grpc

BIG = "the quick brown fox jumps over the lazy dog " * 9000  # ~400 KB, ~90K tokens: past the token limit


def main():
    with Server("--grpc-prepare-threads", "1", "--grpc-prepare-queue", "4") as srv:
        codes, slowest = {}, 0.0
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as watch:
            futures = [srv.stub.Tokenize.future(pb.TokenizeRequest(text=BIG), timeout=120) for _ in range(40)]
            futures += [srv.stub.Generate(chat_request(BIG, 4), timeout=120) for _ in range(8)]
            # While the flood is being prepared, the listener answers.
            deadline = time.time() + 3
            while time.time() < deadline:
                t = time.time()
                srv.stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=5)
                status, _ = srv.http("/ready")
                assert status == 200, status
                slowest = max(slowest, time.time() - t)
                time.sleep(0.05)
            busy_message = None
            for f in futures:
                try:
                    if isinstance(f, grpc.Future):
                        f.result()
                    else:
                        collect(f)
                    code = grpc.StatusCode.OK
                except grpc.RpcError as e:
                    code = e.code()
                    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                        busy_message = e.details()
                codes[code] = codes.get(code, 0) + 1
        assert slowest < 1.0, f"the listener stalled for {slowest:.2f} s during the flood"
        assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT,
                              grpc.StatusCode.RESOURCE_EXHAUSTED}, codes
        assert codes.get(grpc.StatusCode.RESOURCE_EXHAUSTED, 0) >= 10, codes
        assert "--grpc-prepare-queue" in busy_message, busy_message
        _, _, last = collect(srv.stub.Generate(chat_request("Say hi.", 8), timeout=60))
        assert last.finish_reason in (pb.FINISH_REASON_LENGTH, pb.FINISH_REASON_STOP, pb.FINISH_REASON_EOS), last
        srv.wait_idle()
    print(f"gRPC prepare flood: OK ({ {c.name: n for c, n in codes.items()} }; the listener's slowest answer "
          f"{slowest * 1000:.0f} ms; a Generate after the flood completed)")


if __name__ == "__main__":
    main()
