"""C++ engine logits (beacon-logits) against the NumPy reference, default model.

For each of three fixed sequences (8, 40, 130 tokens) and each prefill chunking
(all at once, 7, 1) x companions (0, 3 unrelated sequences in the same ragged
batch), the engine's logits for every position are compared with the NumPy
reference forward pass (float32 on weights dequantised by our own code).

Tolerance and why. The engine quantises activations to int8 per block of 32
before each matmul with a quantised weight (as llama.cpp does); the reference
does not. This 135M, 30-layer model amplifies that rounding a lot at some
positions. Measured on these very sequences (tests/reference/
check_numpy_vs_llamacpp.py), two correct implementations that both quantise
activations, against this reference:
    llama.cpp (Q4_1, f16 KV)       mean 2.9-3.4%  p90 <= 5.9%  max 11%
    llama.cpp (Q4_1, f32 KV)       mean 2.1-4.2%  p90 <= 8.1%  max 31%
    reference + simulated int8 act mean 1.9-3.8%  p90 <= 7.4%  max 19%
while real bugs give: rope theta 1e4 instead of 1e5 mean 13-21%, neox rope
pairing instead of interleaved mean 160-190%. So a flat "<= 3% at every
position" bound would fail llama.cpp itself; we bound the mean (6%), the 90th
percentile (12%) and each position (50%, gross breakage such as a bad chunk
boundary), and require top-1 agreement wherever the reference's top-1 leads
top-2 by more than 0.5 logit (llama.cpp: 130/130 such positions agree).
Errors small enough to hide under this bound (an eps or scale slip) are caught
by test_numpy_logits_f32.py, which runs the engine on an all-F32 copy of the
model, where no activation quantisation happens and agreement is ~1e-5.

Batching invariance: every chunking/companion run of a sequence must match the
all-at-once, no-companion run within 1e-3 relative RMS per position (the
engine should differ only by float reassociation). Note that on this model
int8 activation rounding amplifies reassociation too: llama.cpp's logits for
S130 evaluated one token at a time differ from one batch by up to 8% relative
RMS. So this bound in effect asks for batch-shape-independent summation order
(which the engine's per-row kernels give); if it fails while the looser
1e-4 invariance check of test_numpy_logits_f32.py passes, look for a kernel
whose reduction order depends on the batch, not for a batching bug.

Env: BEACON_BIN (dir with beacon-logits), BEACON_MODEL (gguf). A missing
beacon-logits is a failure, not a skip.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from numpy_model import NumpyModel, default_model_path, rel_rms_per_row  # noqa: E402
from engine_logits import EngineMissing, beacon_logits_path, compare_logits, run_beacon_logits  # noqa: E402
from token_sequences import SEQUENCES  # noqa: E402

MEAN_TOL = 0.06
P90_TOL = 0.12
POS_TOL = 0.5
TOP1_GAP = 0.5
BATCH_INVARIANCE_TOL = 1e-3
# (chunk, companions); chunk 0 = whole sequence in one step. First = baseline.
CONFIGS = [(0, 0), (7, 0), (1, 0), (0, 3), (7, 3), (1, 3)]


def main() -> int:
    t0 = time.time()
    model_path = default_model_path()
    try:
        exe = beacon_logits_path()
    except EngineMissing as e:
        print(f"FAIL: {e}")
        return 1
    print(f"engine: {exe}\nmodel: {model_path}")
    model = NumpyModel(model_path)
    failures: list[str] = []
    for name, toks in SEQUENCES.items():
        ref = model.forward(toks)
        base = None
        for chunk, comp in CONFIGS:
            label = f"{name} chunk={chunk or 'all'} companions={comp}"
            try:
                c = run_beacon_logits(model_path, toks, chunk=chunk, companions=comp)
            except Exception as e:  # noqa: BLE001  report every config, then fail
                failures.append(f"{label}: {e}")
                print(f"{label:34s} ERROR {e}")
                continue
            summary, fails = compare_logits(c, ref, mean_tol=MEAN_TOL, p90_tol=P90_TOL,
                                            pos_tol=POS_TOL, gap=TOP1_GAP)
            if base is None and (chunk, comp) == CONFIGS[0]:
                base = c
            elif base is not None and c.shape == base.shape:
                d = rel_rms_per_row(c, base)
                summary += f" | vs all-at-once {d.max():.1e}"
                if d.max() > BATCH_INVARIANCE_TOL:
                    fails.append(f"differs from the all-at-once run by {d.max():.3e} relative RMS "
                                 f"(pos {int(d.argmax())}) > {BATCH_INVARIANCE_TOL:g}")
            print(f"{label:34s} {summary}")
            failures += [f"{label}: {f}" for f in fails]
    print(f"{len(SEQUENCES) * len(CONFIGS)} engine runs in {time.time() - t0:.1f} s")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
