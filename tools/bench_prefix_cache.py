#!/usr/bin/env python3
"""Prefix caching benchmark (issue 21): 64 requests sharing one 1,024-token
system prompt, each with its own 64-token question, sent at once (closed loop,
concurrency 64) by beacon-loadtest over gRPC to a fresh beacon-serve on the
default model; TTFT and throughput with --prefix-cache=on and =off, under full
and beacon. Prints a Markdown table (docs/performance.md "Prefix caching")
and writes the loadtest JSONs under --out.

  .venv/bin/python tools/bench_prefix_cache.py [--bin build/bin] [--model models/default.gguf] [--out /tmp/prefix-bench]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

READY = re.compile(r"ready grpc=\S+:(\d+) http=\S+:(\d+)")
WORDS = ("plan verify the claim against the notes, recall the constraint stated at the start, list the cases, "
         "check each step, keep units consistent, reject unsupported numbers, prefer the simplest proof").split()


def start(bin_dir, model, flags):
    log = tempfile.NamedTemporaryFile(prefix="bench-serve-", suffix=".log", delete=False)
    p = subprocess.Popen([os.path.join(bin_dir, "beacon-serve"), "--model", model, "--host", "127.0.0.1",
                          "--grpc-port", "0", "--http-port", "0", *flags], stdout=log, stderr=subprocess.STDOUT)
    end = time.time() + 120
    while time.time() < end:
        m = READY.search(open(log.name, errors="replace").read())
        if m:
            return p, int(m.group(1)), int(m.group(2))
        if p.poll() is not None:
            sys.exit(open(log.name).read())
        time.sleep(0.1)
    sys.exit("beacon-serve did not start")


def count(http, text):
    req = urllib.request.Request(f"http://127.0.0.1:{http}/tokenize", method="POST",
                                 data=json.dumps({"model": "default", "prompt": text,
                                                  "add_special_tokens": False}).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=30).read())["count"]


def text_of(http, n, seed):
    """Words until the text is exactly n tokens (drop or add a word as needed)."""
    words, i = [WORDS[seed % len(WORDS)]], seed + 1
    while count(http, " ".join(words)) < n:
        words.append(WORDS[i % len(WORDS)] + ("" if i % 7 else f" {i}"))
        i += 3
    while count(http, " ".join(words)) > n and words:
        words[-1] = words[-1].split()[0]
        if count(http, " ".join(words)) > n:
            words.pop()
    t = " ".join(words)
    while count(http, t) < n:
        t += " a"
    return t


def metric(http, name):
    body = urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10).read().decode()
    m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", body, re.M)
    return float(m.group(1)) if m else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--model", default="models/default.gguf")
    ap.add_argument("--out", default="/tmp/prefix-bench")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=128)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    common = ["--threads", str(os.cpu_count() or 2), "--kv-pool-tokens", "131072", "--max-running",
              str(a.requests), "--max-step-tokens", "2048", "--prefill-chunk", "512"]
    # Build the prompts once, with the server's own tokenizer.
    p, _, http = start(a.bin, a.model, common)
    try:
        system = text_of(http, 1024, 0)
        prompts = []
        for i in range(a.requests):
            q = text_of(http, 64 - 4, 1000 + 11 * i)
            prompts.append(f"{system}\n\nQ{i}: {q}")
        sizes = [count(http, t) for t in prompts]
    finally:
        p.kill()
        p.wait()
    path = os.path.join(a.out, "prompts.jsonl")
    with open(path, "w") as f:
        for t in prompts:
            f.write(json.dumps({"prompt": t, "max_tokens": a.output_len}) + "\n")
    rows = []
    for policy in ("full", "beacon"):
        for cache in ("off", "on"):
            p, grpc, http = start(a.bin, a.model, common + [f"--prefix-cache={cache}"])
            try:
                out = os.path.join(a.out, f"{policy}-{cache}.json")
                cmd = [os.path.join(a.bin, "beacon-loadtest"), "--server", f"127.0.0.1:{grpc}", "--prompts", path,
                       "--concurrency", str(a.requests), "--requests", str(a.requests), "--ignore-eos",
                       "--kv-policy", policy, "--json", out, "--quiet"]
                if policy == "beacon":
                    cmd += ["--kv-budget", "64"]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                s = json.load(open(out))["summary"]
                hits = metric(http, "beacon_prefix_cache_hits_total")
                queries = metric(http, "beacon_prefix_cache_queries_total")
            finally:
                p.kill()
                p.wait()
            rows.append((policy, cache, s, hits, queries))
    print(f"prompts: {min(sizes)}-{max(sizes)} tokens (1,024 shared), {a.requests} requests at once, "
          f"{a.output_len} tokens out each")
    print("| policy | prefix cache | TTFT p50 (ms) | TTFT p90 (ms) | output tok/s | duration (s) | hit tokens |")
    print("|---|---|---|---|---|---|---|")
    for policy, cache, s, hits, queries in rows:
        print(f"| {policy} | {cache} | {s['ttft_ms']['median']:.0f} | {s['ttft_ms']['p90']:.0f} | "
              f"{s['output_throughput']:.0f} | {s['duration_s']:.1f} | "
              f"{int(hits):,} of {int(queries):,} |" if cache == "on" else
              f"| {policy} | {cache} | {s['ttft_ms']['median']:.0f} | {s['ttft_ms']['p90']:.0f} | "
              f"{s['output_throughput']:.0f} | {s['duration_s']:.1f} | - |")
    for policy in ("full", "beacon"):
        off = next(r[2] for r in rows if r[0] == policy and r[1] == "off")
        on = next(r[2] for r in rows if r[0] == policy and r[1] == "on")
        print(f"{policy}: TTFT p50 {off['ttft_ms']['median'] / on['ttft_ms']['median']:.1f}x lower with the cache, "
              f"throughput {on['output_throughput'] / off['output_throughput']:.2f}x")


if __name__ == "__main__":
    main()
