#!/usr/bin/env python3
"""Speed before and after a refactor, in one run (issue 33: "beacon-bench decode
and beacon-serve-bench are within noise of before, best of several rounds, in
one script").

Two bin directories (the tree before the change, built in a git worktree, and
after) run the same two benchmarks in alternating order for several rounds,
so drift of the machine falls on both alike; the best round of each is
compared:

  - `beacon-bench decode`: the backend's decode step at batch 1 and 16
    (tokens/s);
  - `beacon-serve-bench`: the scheduler and engine of beacon-serve in-process
    (output tokens/s per KV policy).

    tools/refactor_bench.py --before /work/eval-src/build/bin --after build/bin --rounds 3

Prints a Markdown table: best tokens/s of each side and the ratio after/before.
Pause other CPU work while it runs (background evaluations: kill -STOP).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run_json(cmd):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        subprocess.run(cmd + ["--json", path], check=True, stdout=subprocess.DEVNULL)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    finally:
        os.unlink(path)


def measure(bin_dir, args):
    """One round of both benchmarks: {label: tokens/s}."""
    out = {}
    decode = run_json([os.path.join(bin_dir, "beacon-bench"), "decode", "--model", args.model,
                       "--batches", "1,16", "--steps", str(args.steps), "--threads", str(args.threads)])
    for row in decode["decode"]:
        out[f"beacon-bench decode, batch {row['batch']}"] = row["tokens_per_second"]
    serve = run_json([os.path.join(bin_dir, "beacon-serve-bench"), "--model", args.model,
                      "--requests", str(args.requests), "--prompt-len", "64", "--output-len", str(args.output_len),
                      "--pool-seqs", "4", "--kv-policy", "full,beacon", "--kv-budget", "64",
                      "--threads", str(args.threads)])
    for row in serve:
        out[f"beacon-serve-bench, {row['policy']}"] = row["tokens_per_second"]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="bin directory of the tree before the change")
    p.add_argument("--after", required=True, help="bin directory of the tree after the change")
    p.add_argument("--model", default="models/default.gguf")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=32, help="timed decode steps per batch (beacon-bench decode)")
    p.add_argument("--requests", type=int, default=16, help="beacon-serve-bench requests")
    p.add_argument("--output-len", type=int, default=256, help="beacon-serve-bench output tokens per request")
    args = p.parse_args()
    for d in (args.before, args.after):
        for b in ("beacon-bench", "beacon-serve-bench"):
            if not os.access(os.path.join(d, b), os.X_OK):
                sys.exit(f"refactor_bench: no {b} in {d}")
    best = {"before": {}, "after": {}}
    for r in range(args.rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        for side in order:
            got = measure(getattr(args, side), args)
            for k, v in got.items():
                best[side][k] = max(best[side].get(k, 0.0), v)
            print(f"round {r + 1} {side}: " + ", ".join(f"{k} {v:.1f}" for k, v in got.items()), file=sys.stderr)
    print(f"| benchmark (best of {args.rounds} rounds, tokens/s) | before | after | after / before |")
    print("|---|---:|---:|---:|")
    for k in best["before"]:
        b, a = best["before"][k], best["after"].get(k, 0.0)
        print(f"| {k} | {b:.1f} | {a:.1f} | {a / b:.3f} |")


if __name__ == "__main__":
    main()
