"""The weights of a `dummy:<config.json>@SEED` model, rebuilt in NumPy from the
determinism contract stated in model/dummy_loader.cc, so that a dummy
model's logits can be checked against a reference forward pass:

    key(N)     = mix(seed ^ fnv1a(N))             mix: the splitmix64 finaliser
    u(N, i)    = (int(mix(key + i * phi) >> 40) - 2^23) / 2^23     in [-1, 1)
    matrix [rows, cols]  element i = r * cols + c: float32(sqrt(3 / cols)) * u
    norm weights         1
    biases               float32(0.02) * u

with HF tensor names. Only the f32 dummy dtype (config key
"beacon_dummy_dtype": "f32") gives these values exactly; the others round them.
"""

from __future__ import annotations

import numpy as np

_M64 = (1 << 64) - 1
_PHI = np.uint64(0x9E3779B97F4A7C15)


def _mix64_scalar(z: int) -> int:
    z &= _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _mix64(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _fnv1a(s: str) -> int:
    h = 0xCBF29CE484222325
    for c in s.encode():
        h = ((h ^ c) * 0x100000001B3) & _M64
    return h


def unit_uniform(name: str, n: int, seed: int) -> np.ndarray:
    """u(name, i) for i < n, float32."""
    key = np.uint64(_mix64_scalar(seed ^ _fnv1a(name)))
    with np.errstate(over="ignore"):
        h = _mix64(key + np.arange(n, dtype=np.uint64) * _PHI)
    top = (h >> np.uint64(40)).astype(np.int64) - (1 << 23)
    return top.astype(np.float32) * np.float32(1.0 / (1 << 23))


def matrix(name: str, rows: int, cols: int, seed: int) -> np.ndarray:
    scale = np.float32(np.sqrt(np.float32(3.0) / np.float32(cols)))
    return (scale * unit_uniform(name, rows * cols, seed)).reshape(rows, cols)


def dummy_weights(cfg: dict, seed: int) -> dict[str, np.ndarray]:
    """HF-named float32 tensors of the dummy model of `cfg` (a config.json dict)."""
    hid, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    d = cfg.get("head_dim") or hid // nh
    ffn, vocab = cfg["intermediate_size"], cfg["vocab_size"]
    family = cfg["model_type"]
    w: dict[str, np.ndarray] = {"model.embed_tokens.weight": matrix("model.embed_tokens.weight", vocab, hid, seed),
                                "model.norm.weight": np.ones(hid, np.float32)}
    if not cfg.get("tie_word_embeddings", False):
        w["lm_head.weight"] = matrix("lm_head.weight", vocab, hid, seed)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = np.ones(hid, np.float32)
        w[p + "post_attention_layernorm.weight"] = np.ones(hid, np.float32)
        for name, rows, cols in (("self_attn.q_proj", nh * d, hid), ("self_attn.k_proj", nkv * d, hid),
                                 ("self_attn.v_proj", nkv * d, hid), ("self_attn.o_proj", hid, nh * d),
                                 ("mlp.gate_proj", ffn, hid), ("mlp.up_proj", ffn, hid),
                                 ("mlp.down_proj", hid, ffn)):
            w[p + name + ".weight"] = matrix(p + name + ".weight", rows, cols, seed)
        if family == "qwen2" or cfg.get("attention_bias", False):
            for name, n in (("q", nh * d), ("k", nkv * d), ("v", nkv * d)):
                full = p + f"self_attn.{name}_proj.bias"
                w[full] = np.float32(0.02) * unit_uniform(full, n, seed)
        if family == "qwen3":
            w[p + "self_attn.q_norm.weight"] = np.ones(d, np.float32)
            w[p + "self_attn.k_norm.weight"] = np.ones(d, np.float32)
    return w
