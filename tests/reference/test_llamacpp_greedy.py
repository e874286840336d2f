"""Greedy continuations of the C++ engine against llama.cpp's on the same GGUF.

The llama.cpp side is a fixture (tests/fixtures/llamacpp/greedy.jsonl) written
by `make oracle` (tools/make_llamacpp_fixtures.py --greedy, llama-cpp-python,
temperature 0): building llama.cpp in CI would cost minutes, the fixture is
what it produces. For each prompt the engine generates the same number of
tokens from the same prompt ids. The two must agree token for token, except
that they may part at a near-tie: at the first divergence the independent
NumPy reference (tests/reference/numpy_model.py) scores both candidate tokens,
and the gap between them must be below NEAR_TIE logits. (Both engines round
activations to 8 bits per block, differently, so an exact tie-break cannot be
required; a gap above NEAR_TIE would be a real disagreement.)
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

from numpy_model import NumpyModel  # noqa: E402

NEAR_TIE = 0.5  # logits
BIN = os.environ["BEACON_BIN"]
MODEL = os.environ["BEACON_MODEL"]
SRC = os.environ["BEACON_SOURCE_DIR"]
# Another model's llama.cpp continuations (tools/make_llamacpp_fixtures.py --greedy --out DIR)
# are compared the same way with BEACON_MODEL and BEACON_GREEDY_FIXTURE=DIR/greedy.jsonl.
FIXTURE = os.environ.get("BEACON_GREEDY_FIXTURE") or os.path.join(SRC, "tests/fixtures/llamacpp/greedy.jsonl")


def engine_greedy(prompt_ids, n, ignore_eos):
    cmd = [os.path.join(BIN, "beacon-run"), "--model", MODEL, "--output-format", "jsonl",
           "--prompt-token-ids", ",".join(map(str, prompt_ids)), "--max-tokens", str(n), "--temperature", "0"]
    if ignore_eos:
        cmd.append("--ignore-eos")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    return [r["id"] for r in rows[:-1]], rows[-1]


def main():
    ref = None
    cases = [json.loads(l) for l in open(FIXTURE) if l.strip()]
    assert len(cases) >= 6, "fixture has too few prompts"
    failures = []
    total_agree = total = 0
    for case in cases:
        want = case["generated_ids"]
        got, summary = engine_greedy(case["prompt_ids"], len(want), ignore_eos=not case["stopped_at_eog"])
        n = min(len(got), len(want))
        first = next((i for i in range(n) if got[i] != want[i]), None)
        if first is None:
            ok = len(got) == len(want)
            note = "identical" if ok else f"lengths differ: {len(got)} vs {len(want)}"
            total_agree += n
        else:
            if ref is None:
                ref = NumpyModel(MODEL)
            logits = ref.forward(list(case["prompt_ids"]) + want[:first])[-1]
            gap = abs(float(logits[got[first]]) - float(logits[want[first]]))
            top = np.sort(logits)[-2:]
            ok = gap < NEAR_TIE
            note = (f"diverge at {first}: engine {got[first]} vs llama.cpp {want[first]}, "
                    f"reference gap {gap:.3f} (top-2 gap {top[1] - top[0]:.3f})")
            total_agree += first
        total += len(want)
        print(f"{case['name']:14s} {'ok ' if ok else 'BAD'} {note}; finish {summary['finish_reason']}")
        if not ok:
            failures.append(case["name"])
    print(f"agreed on {total_agree}/{total} tokens before any divergence")
    if failures:
        print("FAIL: real disagreements with llama.cpp in", failures)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
