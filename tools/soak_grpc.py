#!/usr/bin/env python3
"""Soak test of beacon-serve (not in CI): many concurrent gRPC streams for
minutes, then checks that nothing failed and the KV pool is back to baseline.

  tools/soak_grpc.py --streams 256 --duration 300            # starts its own server
  tools/soak_grpc.py --server 127.0.0.1:50051 --http 127.0.0.1:8080 ...

Each of --streams workers loops: a random chat prompt, max_tokens in
[16, 256], a random KV policy (the server's default, full, snapkv), and in
--cancel-fraction of requests a cancel after a few tokens. A request counts as
an error when it ends with a gRPC error or a finish reason other than eos,
length, stop_sequence (or cancelled for the ones we cancel)."""
import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUBS = tempfile.mkdtemp(prefix="beacon-soak-")
subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}/proto", f"--python_out={STUBS}",
                f"--grpc_python_out={STUBS}", f"{ROOT}/proto/beacon/v1/beacon.proto"], check=True)
sys.path.insert(0, STUBS)
import grpc  # noqa: E402
from beacon.v1 import beacon_pb2 as pb, beacon_pb2_grpc as pb_grpc  # noqa: E402

TOPICS = ["the ocean", "a mountain trip", "learning piano", "baking bread", "prime numbers", "the moon",
          "a city at night", "gardening", "chess openings", "the history of tea"]


def stats(http):
    with urllib.request.urlopen(f"http://{http}/v1/engine/stats", timeout=10) as r:
        return json.loads(r.read())


def worker(stub, end, cancel_fraction, rng, out, lock):
    while time.time() < end:
        cancel = rng.random() < cancel_fraction
        req = pb.GenerateRequest(
            chat=pb.ChatInput(messages=[pb.ChatMessage(role="user",
                                                       content=f"Write about {rng.choice(TOPICS)}.")]),
            stopping=pb.StoppingCriteria(max_tokens=rng.randint(16, 256)),
            sampling=pb.SamplingParams(temperature=0.7, seed=rng.randint(0, 1 << 30)),
            kv=rng.choice([None, pb.KvOptions(policy="full"), pb.KvOptions(policy="snapkv", budget=64)]))
        t0 = time.time()
        outcome, n = "ok", 0
        try:
            call = stub.Generate(req, timeout=600)
            for msg in call:
                n += len(msg.token_ids)
                if cancel and n >= 4:
                    call.cancel()
                    break
                if msg.finish_reason not in (pb.FINISH_REASON_UNSPECIFIED, pb.FINISH_REASON_EOS,
                                             pb.FINISH_REASON_LENGTH, pb.FINISH_REASON_STOP_SEQUENCE):
                    outcome = "finish:" + pb.FinishReason.Name(msg.finish_reason)
        except grpc.RpcError as e:
            if not (cancel and e.code() == grpc.StatusCode.CANCELLED):
                outcome = "grpc:" + e.code().name
        with lock:
            out["outcomes"][outcome] += 1
            out["tokens"] += n
            out["latencies"].append(time.time() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--duration", type=float, default=300)
    ap.add_argument("--cancel-fraction", type=float, default=0.05)
    ap.add_argument("--server", help="host:port of a running beacon-serve (default: start one)")
    ap.add_argument("--http", help="host:port of its HTTP port")
    ap.add_argument("--serve-flags", default="--max-running 64 --max-waiting 1024")
    args = ap.parse_args()

    proc = None
    if args.server is None:
        log = tempfile.NamedTemporaryFile(prefix="soak-serve-", suffix=".log", delete=False)
        proc = subprocess.Popen([f"{ROOT}/build/bin/beacon-serve", "--model", f"{ROOT}/models/default.gguf",
                                 "--host", "127.0.0.1", "--grpc-port", "0", "--http-port", "0",
                                 *args.serve_flags.split()], stdout=log, stderr=subprocess.STDOUT)
        while True:
            m = re.search(r"ready grpc=(\S+) http=(\S+)", open(log.name).read())
            if m:
                args.server, args.http = m.group(1), m.group(2)
                break
            if proc.poll() is not None:
                sys.exit(open(log.name).read())
            time.sleep(0.1)
    base = stats(args.http)
    channel = grpc.insecure_channel(args.server)
    stub = pb_grpc.BeaconServiceStub(channel)
    out = {"outcomes": collections.Counter(), "tokens": 0, "latencies": []}
    lock = threading.Lock()
    end = time.time() + args.duration
    t0 = time.time()
    threads = [threading.Thread(target=worker, args=(stub, end, args.cancel_fraction, random.Random(i), out, lock))
               for i in range(args.streams)]
    for t in threads:
        t.start()
    peak_running = 0
    while any(t.is_alive() for t in threads):
        s = stats(args.http)
        peak_running = max(peak_running, s["running"])
        print(f"\r{time.time() - t0:6.0f}s running {s['running']:3d} waiting {s['waiting']:4d} "
              f"kv free {s['kv_blocks_free']}/{s['kv_blocks_total']} tokens {out['tokens']}", end="", flush=True)
        time.sleep(1)
    wall = time.time() - t0
    time.sleep(0.5)
    after = stats(args.http)
    lat = sorted(out["latencies"])
    result = {
        "streams": args.streams, "seconds": round(wall, 1), "requests": len(lat),
        "outcomes": dict(out["outcomes"]), "tokens": out["tokens"], "tokens_per_second": round(out["tokens"] / wall, 1),
        "latency_p50_s": round(lat[len(lat) // 2], 2) if lat else None,
        "latency_p99_s": round(lat[int(len(lat) * 0.99)], 2) if lat else None,
        "peak_running": peak_running,
        "kv_blocks_free_before": base["kv_blocks_free"], "kv_blocks_free_after": after["kv_blocks_free"],
        "inflight_after": after["inflight"],
    }
    print("\n" + json.dumps(result, indent=2))
    if proc is not None:
        proc.terminate()
        proc.wait(60)
    errors = sum(v for k, v in out["outcomes"].items() if k != "ok")
    leaked = after["kv_blocks_free"] != base["kv_blocks_free"] or after["inflight"] != 0
    if errors or leaked:
        sys.exit(f"FAILED: {errors} errors, pool leaked: {leaked}")
    print("PASS: no errors, KV pool back to baseline")


if __name__ == "__main__":
    main()
