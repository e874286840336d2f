#!/usr/bin/env python3
"""Greedy token ids of beacon-run on fixed prompts under several KV policies:
a snapshot to diff before and after a change that must not change outputs
(issue 33's refactors: "greedy outputs are token-identical before and after").

The prompts are the llama.cpp fixture's (tests/fixtures/llamacpp/greedy.jsonl,
token ids, so no tokenizer change can hide); each runs 96 tokens with EOS
ignored under full and under four compressing policies at budget 32,
interval 16 (so every policy evicts several times). One JSON line per
(prompt, policy). Exact: any differing id is a changed output.

  tools/greedy_snapshot.py > /tmp/before.jsonl     # on the old tree
  tools/greedy_snapshot.py > /tmp/after.jsonl      # on the new one
  diff /tmp/before.jsonl /tmp/after.jsonl && echo identical

Options: --bin DIR (default build/bin), --model PATH (default models/default.gguf),
--threads N (default 2). About 30 prompt x policy runs; ~1 min on 2 cores.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = (["full"], ["beacon"], ["h2o"], ["snapkv"], ["streaming"])
COMPRESSING = ["--kv-budget", "32", "--kv-interval", "16"]


def snapshot(bin_dir, model, threads, fixture):
    for line in open(fixture):
        case = json.loads(line)
        for policy in POLICIES:
            args = [os.path.join(bin_dir, "beacon-run"), "--model", model, "--output-format", "jsonl",
                    "--threads", str(threads), "--prompt-token-ids", ",".join(map(str, case["prompt_ids"])),
                    "--max-tokens", "96", "--ignore-eos", "--temperature", "0", "--kv-policy", *policy]
            if policy[0] != "full":
                args += COMPRESSING
            out = subprocess.run(args, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"greedy_snapshot: {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()[-400:]}")
            ids = [r["id"] for r in map(json.loads, out.stdout.splitlines()) if "id" in r]
            yield {"name": case["name"], "kv": policy[0], "ids": ids}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "default.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fixture", default=os.path.join(ROOT, "tests", "fixtures", "llamacpp", "greedy.jsonl"))
    args = ap.parse_args(argv)
    for rec in snapshot(args.bin, args.model, args.threads, args.fixture):
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
