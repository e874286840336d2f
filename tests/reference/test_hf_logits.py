"""C++ engine logits on tiny HF checkpoints vs a NumPy forward pass with HF semantics.

Checks the HF loading contract end to end (model/hf_loader.cc): an HF
Linear weight [out, in] is used as is (no transpose), Q/K are not permuted and
RoPE rotates halves (`rotate_half`, as transformers' Llama/Qwen2/Qwen3 do),
Qwen2 adds q/k/v biases, Qwen3 RMS-normalises each head of q and k before RoPE
and may have head_dim * heads != hidden. The reference below follows the
transformers modeling code, not the GGUF conventions of numpy_model.py, so it
is an independent oracle for the safetensors path.

The checkpoints are written here (random weights, a minimal safetensors
writer: numpy only) for llama, qwen2 and qwen3 in F32, plus qwen3 in BF16 with
the reference reading the same rounded values. With float weights the engine
multiplies with unquantised activations, and with an f32 KV cache
(--kv-cache-dtype f32) the two sides differ only by float32 rounding: measured <= 1e-6 relative RMS. A wrong RoPE pairing gives
~0.5, so the tolerance of 1e-4 relative RMS per position (and identical
argmax) separates the two by orders of magnitude.

Env: BEACON_BIN (directory holding beacon-logits), BEACON_SOURCE_DIR.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from engine_logits import EngineMissing, beacon_logits_path, run_beacon_logits  # noqa: E402
from numpy_model import rope_frequencies  # noqa: E402

POS_TOL = 1e-4
TOKENS = [3, 17, 200, 5, 9, 100, 42, 7, 1, 250, 77, 13, 64, 128, 31, 0]
SOURCE_DIR = os.environ.get("BEACON_SOURCE_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..")


def to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


def save_safetensors(path: str, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    """tensors: name -> (dtype name, array whose bytes are that dtype)."""
    header, blobs, off = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def random_weights(cfg: dict, seed: int) -> dict[str, np.ndarray]:
    r = np.random.default_rng(seed)
    hid, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or hid // nh
    ffn, vocab = cfg["intermediate_size"], cfg["vocab_size"]
    w: dict[str, np.ndarray] = {}

    def mat(name, rows, cols):
        w[name] = (r.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def vec(name, n, base=1.0, scale=0.1):
        w[name] = (base + scale * r.standard_normal(n)).astype(np.float32)

    mat("model.embed_tokens.weight", vocab, hid)
    vec("model.norm.weight", hid)
    if not cfg.get("tie_word_embeddings", False):
        mat("lm_head.weight", vocab, hid)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        vec(p + "input_layernorm.weight", hid)
        vec(p + "post_attention_layernorm.weight", hid)
        mat(p + "self_attn.q_proj.weight", nh * d, hid)
        mat(p + "self_attn.k_proj.weight", nkv * d, hid)
        mat(p + "self_attn.v_proj.weight", nkv * d, hid)
        mat(p + "self_attn.o_proj.weight", hid, nh * d)
        mat(p + "mlp.gate_proj.weight", ffn, hid)
        mat(p + "mlp.up_proj.weight", ffn, hid)
        mat(p + "mlp.down_proj.weight", hid, ffn)
        if cfg["model_type"] == "qwen2":
            for n, k in (("q", nh * d), ("k", nkv * d), ("v", nkv * d)):
                vec(p + f"self_attn.{n}_proj.bias", k, base=0.0, scale=0.5)
        if cfg["model_type"] == "qwen3":
            vec(p + "self_attn.q_norm.weight", d)
            vec(p + "self_attn.k_norm.weight", d)
    return w


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rotate_half(x: np.ndarray) -> np.ndarray:
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], -1)


def hf_forward(cfg: dict, w: dict[str, np.ndarray], toks: list[int]) -> np.ndarray:
    """Logits [T, vocab] in float64, following transformers' modeling code."""
    hid, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or hid // nh
    eps, theta = cfg["rms_norm_eps"], cfg.get("rope_theta", 10000.0)
    t = len(toks)
    # transformers: inv_freq (and cos/sin's attention_scaling) from the
    # config's rope_scaling; numpy_model writes those formulas out.
    inv_freq, attention_scaling = rope_frequencies(theta, d, cfg.get("rope_scaling"), cfg["max_position_embeddings"])
    ang = np.arange(t, dtype=np.float64)[:, None] * inv_freq[None, :]
    emb = np.concatenate([ang, ang], -1)  # transformers: cat((freqs, freqs))
    cos = np.cos(emb)[:, None, :] * attention_scaling
    sin = np.sin(emb)[:, None, :] * attention_scaling
    W = {k: v.astype(np.float64) for k, v in w.items()}
    x = W["model.embed_tokens.weight"][toks]
    masked = np.triu(np.ones((t, t), dtype=bool), 1)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."

        def linear(name, inp):
            y = inp @ W[p + name + ".weight"].T
            return y + W[p + name + ".bias"] if p + name + ".bias" in W else y

        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = linear("self_attn.q_proj", h).reshape(t, nh, d)
        k = linear("self_attn.k_proj", h).reshape(t, nkv, d)
        v = linear("self_attn.v_proj", h).reshape(t, nkv, d)
        if p + "self_attn.q_norm.weight" in W:
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = np.repeat(k, nh // nkv, axis=1)
        v = np.repeat(v, nh // nkv, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(d)
        s[:, masked] = -np.inf
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        x = x + np.einsum("hts,shd->thd", s, v).reshape(t, nh * d) @ W[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = h @ W[p + "mlp.gate_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
    out = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return rms_norm(x, W["model.norm.weight"], eps) @ out.T


def run_case(family: str, dtype: str, tmp: str) -> list[str]:
    with open(os.path.join(SOURCE_DIR, "tests", "data", f"tiny-{family}.json")) as f:
        cfg = json.load(f)
    if family == "qwen3":
        cfg["head_dim"] = 32  # heads * head_dim = 128 != hidden 64, as in real Qwen3
    w = random_weights(cfg, seed=1)
    tensors = {}
    for name, arr in w.items():
        if dtype == "BF16" and arr.ndim == 2:
            bits = to_bf16_bits(arr)
            w[name] = from_bf16_bits(bits)  # the reference sees the stored values
            tensors[name] = ("BF16", bits)
        else:
            tensors[name] = ("F32", arr)
    d = os.path.join(tmp, f"{family}-{dtype}")
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    save_safetensors(os.path.join(d, "model.safetensors"), tensors)

    got = run_beacon_logits(d, TOKENS, kv_cache_dtype="f32").astype(np.float64)
    ref = hf_forward(cfg, w, TOKENS)
    err = np.sqrt(((got - ref) ** 2).mean(-1)) / np.sqrt((ref ** 2).mean(-1))
    agree = int((got.argmax(-1) == ref.argmax(-1)).sum())
    print(f"{family} {dtype}: relRMS max {err.max():.2e}, argmax {agree}/{len(TOKENS)}")
    fails = []
    if not np.all(np.isfinite(got)):
        fails.append(f"{family} {dtype}: non-finite logits")
    if err.max() > POS_TOL:
        fails.append(f"{family} {dtype}: relative RMS {err.max():.3e} > {POS_TOL:g} "
                     f"at position {int(err.argmax())}")
    if agree != len(TOKENS):
        fails.append(f"{family} {dtype}: argmax differs at {len(TOKENS) - agree} positions")
    return fails


def main() -> int:
    try:
        beacon_logits_path()
    except EngineMissing as e:
        print(f"FAIL: {e}")
        return 1
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="beacon-hf-") as tmp:
        for family, dtype in (("llama", "F32"), ("qwen2", "F32"), ("qwen3", "F32"), ("qwen3", "BF16")):
            failures += run_case(family, dtype, tmp)
    for f in failures:
        print(f"FAIL: {f}")
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
