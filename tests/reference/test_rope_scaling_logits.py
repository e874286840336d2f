"""Engine logits of RoPE-scaled models vs the NumPy reference (issue 17).

Dummy models (`dummy:<config.json>@SEED`, f32 weights) of the tiny configs
tests/data/tiny-llama3-rope.json (llama3 scaling), tiny-qwen2-yarn.json (YaRN,
attention factor 0.1 ln 4 + 1) and tiny-linear-rope.json (linear, legacy
"type" key, qwen3) run a 200-token prompt through beacon-logits, at once and
in chunks of 48 (the later chunks read earlier keys from the cache). Their
original context is 64, so most positions lie beyond it, where the scaled and
the plain frequencies part. The reference rebuilds the same weights from the
dummy loader's determinism contract (dummy_weights.py) and runs the
transformers-style forward pass of test_hf_logits.py with numpy_model's
rope_frequencies, written from the published formulas.

With the engine's f32 KV cache (--kv-cache-dtype f32) the two sides differ
by float32 rounding only: measured ~1e-6 relative RMS;
the tolerance is 1e-4 per position with identical argmax. Each case also
checks that the reference without scaling is >= 100x further away, so a
scaling that is ignored or applied to the wrong pairs cannot pass.

A GGUF case writes a tiny llama file (gguf-py) with rope_freqs.weight (how
llama.cpp's converter stores Llama 3.1 scaling) and one qwen2 file with YaRN
metadata, and compares the engine with numpy_model.NumpyModel on them.

Env: BEACON_BIN (directory holding beacon-logits), BEACON_SOURCE_DIR.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dummy_weights import dummy_weights  # noqa: E402
from engine_logits import EngineMissing, beacon_logits_path, run_beacon_logits  # noqa: E402
from numpy_model import NumpyModel, rel_rms_per_row  # noqa: E402
from test_hf_logits import hf_forward  # noqa: E402

POS_TOL = 1e-4
SEED = 7
N_TOKENS = 200
SOURCE_DIR = os.environ.get("BEACON_SOURCE_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..")
CONFIGS = ("tiny-llama3-rope", "tiny-qwen2-yarn", "tiny-linear-rope")


def check(label: str, got: np.ndarray, ref: np.ndarray, unscaled: np.ndarray) -> list[str]:
    err = rel_rms_per_row(got, ref)
    off = rel_rms_per_row(got, unscaled)
    agree = int((got.argmax(-1) == ref.argmax(-1)).sum())
    print(f"{label}: relRMS max {err.max():.2e}; without scaling {np.median(off):.2e} (median); "
          f"argmax {agree}/{len(ref)}")
    fails = []
    if not np.all(np.isfinite(got)):
        fails.append(f"{label}: non-finite logits")
    if err.max() > POS_TOL:
        fails.append(f"{label}: relative RMS {err.max():.3e} > {POS_TOL:g} at position {int(err.argmax())}")
    if agree != len(ref):
        fails.append(f"{label}: argmax differs at {len(ref) - agree} positions")
    if np.median(off) < 100 * POS_TOL:
        fails.append(f"{label}: the unscaled reference is as close ({np.median(off):.2e}): the case cannot "
                     "tell scaling from none")
    return fails


def dummy_case(name: str, tokens: list[int]) -> list[str]:
    path = os.path.join(SOURCE_DIR, "tests", "data", f"{name}.json")
    with open(path) as f:
        cfg = json.load(f)
    w = dummy_weights(cfg, SEED)
    ref = hf_forward(cfg, w, tokens)
    unscaled = hf_forward({k: v for k, v in cfg.items() if k != "rope_scaling"}, w, tokens)
    fails = []
    for chunk in (0, 48):
        got = run_beacon_logits(f"dummy:{path}@{SEED}", tokens, chunk=chunk, kv_cache_dtype="f32").astype(np.float64)
        fails += check(f"{name} chunk {chunk or 'all'}", got, ref, unscaled)
    return fails


def write_gguf(path: str, arch: str, context: int, rng: np.random.Generator, meta) -> None:
    """A tiny F32 GGUF of `arch` (llama: interleaved RoPE, qwen2: q/k/v bias)."""
    import gguf

    hid, heads, kv, d, ffn, vocab, layers = 64, 4, 2, 16, 128, 256, 2
    wr = gguf.GGUFWriter(path, arch)
    wr.add_context_length(context)
    wr.add_embedding_length(hid)
    wr.add_block_count(layers)
    wr.add_feed_forward_length(ffn)
    wr.add_head_count(heads)
    wr.add_head_count_kv(kv)
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-6)
    wr.add_vocab_size(vocab)
    wr.add_tokenizer_model("gpt2")
    wr.add_token_list([f"t{i}" for i in range(vocab)])
    meta(wr)

    def mat(name, rows, cols):
        wr.add_tensor(name, (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32))

    def vec(name, n, base=1.0, scale=0.1):
        wr.add_tensor(name, (base + scale * rng.standard_normal(n)).astype(np.float32))

    mat("token_embd.weight", vocab, hid)
    vec("output_norm.weight", hid)
    for layer in range(layers):
        p = f"blk.{layer}."
        vec(p + "attn_norm.weight", hid)
        vec(p + "ffn_norm.weight", hid)
        mat(p + "attn_q.weight", heads * d, hid)
        mat(p + "attn_k.weight", kv * d, hid)
        mat(p + "attn_v.weight", kv * d, hid)
        mat(p + "attn_output.weight", hid, heads * d)
        mat(p + "ffn_gate.weight", ffn, hid)
        mat(p + "ffn_up.weight", ffn, hid)
        mat(p + "ffn_down.weight", hid, ffn)
        if arch == "qwen2":
            for n, k in (("q", heads * d), ("k", kv * d), ("v", kv * d)):
                vec(p + f"attn_{n}.bias", k, base=0.0, scale=0.5)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def gguf_cases(tokens: list[int], tmp: str) -> list[str]:
    import gguf

    rng = np.random.default_rng(3)
    # Llama 3.1's factors for original context 64, factor 8, low 1, high 4,
    # as the converter folds them into rope_freqs.weight (frequency divisors).
    base = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    wavelen = 2 * np.pi / base
    smooth = (64 / wavelen - 1) / 3
    factors = np.where(wavelen < 16, 1.0, np.where(wavelen > 64, 8.0, 1 / ((1 - smooth) / 8 + smooth)))

    def llama3(wr):
        wr.add_tensor("rope_freqs.weight", factors.astype(np.float32))

    def yarn(wr):
        wr.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        wr.add_rope_scaling_factor(4.0)
        wr.add_rope_scaling_orig_ctx_len(64)
        wr.add_rope_scaling_yarn_beta_fast(32.0)
        wr.add_rope_scaling_yarn_beta_slow(1.0)

    fails = []
    # Llama 3.1's context_length is already the long one; YaRN's is extended
    # by the engine: 64 * 4.
    for label, arch, context, meta in (("gguf llama rope_freqs", "llama", 256, llama3),
                                       ("gguf qwen2 yarn", "qwen2", 64, yarn)):
        path = os.path.join(tmp, f"{arch}.gguf")
        write_gguf(path, arch, context, rng, meta)
        model = NumpyModel(path)
        ref = model.forward(tokens).astype(np.float64)
        model.cfg.rope_scaling, model.cfg.rope_freqs = None, None
        unscaled = model.forward(tokens).astype(np.float64)
        got = run_beacon_logits(path, tokens, chunk=48, kv_cache_dtype="f32").astype(np.float64)
        fails += check(label, got, ref, unscaled)
    return fails


def main() -> int:
    try:
        beacon_logits_path()
    except EngineMissing as e:
        print(f"FAIL: {e}")
        return 1
    tokens = np.random.default_rng(5).integers(0, 256, N_TOKENS).tolist()
    failures: list[str] = []
    for name in CONFIGS:
        failures += dummy_case(name, tokens)
    with tempfile.TemporaryDirectory(prefix="beacon-rope-") as tmp:
        failures += gguf_cases(tokens, tmp)
    for f in failures:
        print(f"FAIL: {f}")
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
