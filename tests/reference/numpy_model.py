"""NumPy reference forward pass (the oracle for the C++ engine's logits).

Supports GGUF arch `llama` plus the `qwen2` (q/k/v bias) and `qwen3` (per-head
q/k RMSNorm) variants. Weights are dequantised once by gguf_numpy (our own
dequant, not gguf.quants) and kept as float32; matmuls run in float32, norms,
RoPE and softmax in float64. No activation quantisation: this is the "exact"
model that the engine's integer dot products approximate.

RoPE pairing: llama.cpp's GGUF converter permutes the Q/K rows of llama models
so that rotation pairs are interleaved (2i, 2i+1) ("normal" rope); qwen2/qwen3
files are not permuted and use the "neox" half pairing (i, i + n_rot/2).

RoPE scaling (rope_frequencies): linear, llama3 and yarn as the YaRN paper,
Meta's Llama 3.1 reference and HF transformers publish them, written here from
those formulas independently of the C++ (kernels/cpu/rope_scaling.cc); from a
GGUF, the rope.scaling.* metadata and the rope_freqs.weight divisors.
"""

from __future__ import annotations

import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gguf_numpy import BF16, F16, F32, GGUFModelFile  # noqa: E402  (sets BLAS threads first)

import numpy as np  # noqa: E402

NEOX_ARCHS = {"qwen2", "qwen3"}


@dataclasses.dataclass
class Config:
    arch: str
    n_layers: int
    hidden: int
    ffn: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    n_rot: int
    vocab: int
    rope_theta: float
    rms_eps: float
    neox_rope: bool
    # HF-style rope_scaling dict ({"rope_type": ..., "factor": ...}) or None.
    rope_scaling: dict | None = None
    # GGUF rope_freqs.weight: per-pair divisors of the base frequencies.
    rope_freqs: np.ndarray | None = None


def config_from_gguf(f: GGUFModelFile) -> Config:
    arch = f.meta("general.architecture")
    if arch not in ("llama", *NEOX_ARCHS):
        raise ValueError(f"reference supports llama/qwen2/qwen3, not {arch!r}")
    m = lambda k, d=None: f.meta(f"{arch}.{k}", d)  # noqa: E731
    hidden = int(m("embedding_length"))
    n_heads = int(m("attention.head_count"))
    n_kv = int(m("attention.head_count_kv", n_heads))
    head_dim = int(m("attention.key_length", hidden // n_heads))
    vocab = int(m("vocab_size", len(f.tokens())))
    return Config(
        arch=arch,
        n_layers=int(m("block_count")),
        hidden=hidden,
        ffn=int(m("feed_forward_length")),
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        n_rot=int(m("rope.dimension_count", head_dim)),
        vocab=vocab,
        rope_theta=float(m("rope.freq_base", 10000.0)),
        rms_eps=float(m("attention.layer_norm_rms_epsilon")),
        neox_rope=arch in NEOX_ARCHS,
        rope_scaling=rope_scaling_from_gguf(f, arch),
        rope_freqs=f.tensor("rope_freqs.weight").astype(np.float64) if f.has("rope_freqs.weight") else None,
    )


def rope_scaling_from_gguf(f: GGUFModelFile, arch: str) -> dict | None:
    """The GGUF rope.scaling.* keys as an HF-style rope_scaling dict."""
    m = lambda k, d=None: f.meta(f"{arch}.{k}", d)  # noqa: E731
    kind = m("rope.scaling.type", "none")
    if kind == "none":
        return None
    if kind == "linear":
        return {"rope_type": "linear", "factor": float(m("rope.scaling.factor"))}
    if kind == "yarn":
        out = {"rope_type": "yarn", "factor": float(m("rope.scaling.factor")),
               "original_max_position_embeddings": int(m("rope.scaling.original_context_length",
                                                         m("context_length"))),
               "beta_fast": float(m("rope.scaling.yarn_beta_fast", 32.0)),
               "beta_slow": float(m("rope.scaling.yarn_beta_slow", 1.0))}
        for key in ("rope.scaling.attn_factor", "rope.scaling.yarn_attn_factor"):  # the newer key wins
            if f.has_meta(f"{arch}.{key}"):
                out["attention_factor"] = float(m(key))
        return out
    raise ValueError(f"reference: RoPE scaling {kind!r} not implemented")


def rope_frequencies(theta: float, dim: int, scaling: dict | None = None,
                     max_position_embeddings: int | None = None,
                     freq_factors: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """(inv_freq [dim/2] float64, attention factor) of RoPE with `scaling`.

    base_i = theta^(-2i/dim), divided by freq_factors[i] when given. Then
      linear: base / factor.
      llama3: with wavelength w = 2 pi / base and L the original context,
        w < L/high_freq_factor keeps base, w > L/low_freq_factor takes
        base/factor, and between them s = (L/w - low) / (high - low) blends
        (1 - s) base/factor + s base.
      yarn: the number of rotations a pair makes over L is L base / (2 pi);
        the pair index where that equals beta is
        dim ln(L / (2 pi beta)) / (2 ln theta); between the indices for
        beta_fast (floored) and beta_slow (ceiled), clamped to [0, dim-1],
        a linear ramp r goes from 0 to 1 and the frequency is
        base/factor * r + base * (1 - r); the attention factor (cos and sin
        are multiplied by it) is 0.1 ln(factor) + 1 unless given.
    """
    half = dim // 2
    base = theta ** (-2.0 * np.arange(half, dtype=np.float64) / dim)
    if freq_factors is not None:
        base = base / np.asarray(freq_factors, dtype=np.float64)
    if not scaling:
        return base, 1.0
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind in ("default", "dynamic"):
        return base, 1.0
    factor = float(scaling["factor"])
    if kind == "linear":
        return base / factor, 1.0
    if kind == "llama3":
        L = float(scaling["original_max_position_embeddings"])
        lo, hi = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        wavelen = 2.0 * np.pi / base
        blend = (L / wavelen - lo) / (hi - lo)
        out = np.where(wavelen > L / lo, base / factor, (1.0 - blend) * base / factor + blend * base)
        return np.where(wavelen < L / hi, base, out), 1.0
    if kind == "yarn":
        L = float(scaling.get("original_max_position_embeddings") or max_position_embeddings)
        beta_fast = float(scaling.get("beta_fast") or 32.0)
        beta_slow = float(scaling.get("beta_slow") or 1.0)
        pair_at = lambda beta: dim * np.log(L / (2.0 * np.pi * beta)) / (2.0 * np.log(theta))  # noqa: E731
        lo, hi = pair_at(beta_fast), pair_at(beta_slow)
        if scaling.get("truncate", True):
            lo, hi = np.floor(lo), np.ceil(hi)
        lo, hi = max(lo, 0.0), min(hi, dim - 1.0)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((np.arange(half, dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0)
        attn = scaling.get("attention_factor")
        if attn is None:
            attn = 1.0 if factor <= 1.0 else 0.1 * np.log(factor) + 1.0
        return base / factor * ramp + base * (1.0 - ramp), float(attn)
    raise ValueError(f"reference: RoPE scaling {kind!r} not implemented")


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    inv = 1.0 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps)
    return (x64 * inv * w).astype(np.float32)


def silu(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return (x64 / (1.0 + np.exp(-x64))).astype(np.float32)


def apply_rope(x: np.ndarray, pos: np.ndarray, cfg: Config) -> np.ndarray:
    """x: [T, H, head_dim]; rotates the first n_rot dims of each head.
    Pair i (0 <= i < n_rot/2) rotates by angle pos * inv_freq[i]
    (theta^(-2i/n_rot) unscaled, rope_frequencies otherwise), scaled by the
    attention factor."""
    half = cfg.n_rot // 2
    inv_freq, attn = rope_frequencies(cfg.rope_theta, cfg.n_rot, cfg.rope_scaling, freq_factors=cfg.rope_freqs)
    ang = pos.astype(np.float64)[:, None] * inv_freq[None, :]  # [T, half]
    cos = np.cos(ang)[:, None, :] * attn
    sin = np.sin(ang)[:, None, :] * attn
    out = x.astype(np.float64).copy()
    if cfg.neox_rope:
        a, b = out[..., 0:half].copy(), out[..., half:cfg.n_rot].copy()
        out[..., 0:half] = a * cos - b * sin
        out[..., half:cfg.n_rot] = a * sin + b * cos
    else:
        a, b = out[..., 0:cfg.n_rot:2].copy(), out[..., 1:cfg.n_rot:2].copy()
        out[..., 0:cfg.n_rot:2] = a * cos - b * sin
        out[..., 1:cfg.n_rot:2] = a * sin + b * cos
    return out.astype(np.float32)


def quantize_activations_q8(x: np.ndarray) -> np.ndarray:
    """Round-trip rows of x through 8-bit blocks of 32 (d = amax/127 stored as
    fp16, q = round(x/d)), as llama.cpp does to the input of a quantised
    matmul. Only for diagnosing the engine-vs-reference gap; off by default."""
    shp = x.shape
    b = x.astype(np.float32).reshape(-1, 32)
    d = np.abs(b).max(axis=1, keepdims=True) / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0)
    q = np.clip(np.trunc(b * inv + np.copysign(0.5, b)), -127, 127)  # roundf: half away from 0
    return (d.astype(np.float16).astype(np.float32) * q).reshape(shp)


class NumpyModel:
    def __init__(self, path: str, act_quant: bool = False):
        """act_quant: simulate the 8-bit activation quantisation of integer
        dot products before every matmul with a quantised weight (diagnostic)."""
        self.file = GGUFModelFile(path)
        self.cfg = config_from_gguf(self.file)
        self.act_quant = act_quant

    def mm(self, x: np.ndarray, name: str) -> np.ndarray:
        """x @ W.T for the weight tensor `name` ([out, in])."""
        if self.act_quant and self.file.type_of(name) not in (F32, F16, BF16):
            x = quantize_activations_q8(x)
        return x @ self.w(name).T

    def w(self, name: str) -> np.ndarray:
        return self.file.tensor(name)

    def _opt(self, name: str):
        return self.file.tensor(name) if self.file.has(name) else None

    def output_name(self) -> str:
        return "output.weight" if self.file.has("output.weight") else "token_embd.weight"

    def forward(self, tokens) -> np.ndarray:
        """Logits for every position, float32 [T, vocab]; positions 0..T-1,
        causal attention over the sequence itself."""
        cfg = self.cfg
        toks = np.asarray(tokens, dtype=np.int64)
        if toks.ndim != 1 or toks.size == 0:
            raise ValueError("tokens must be a non-empty 1-D list")
        if toks.min() < 0 or toks.max() >= cfg.vocab:
            raise ValueError("token id out of vocab")
        T, H, KVH, D = toks.size, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        group = H // KVH
        pos = np.arange(T)
        causal = np.triu(np.ones((T, T), dtype=bool), k=1)  # True = masked

        x = self.w("token_embd.weight")[toks].astype(np.float32)  # [T, hidden]
        for l in range(cfg.n_layers):
            p = f"blk.{l}."
            h = rms_norm(x, self.w(p + "attn_norm.weight"), cfg.rms_eps)
            q = self.mm(h, p + "attn_q.weight")
            k = self.mm(h, p + "attn_k.weight")
            v = self.mm(h, p + "attn_v.weight")
            for t, name in ((q, "attn_q.bias"), (k, "attn_k.bias"), (v, "attn_v.bias")):
                b = self._opt(p + name)
                if b is not None:
                    t += b
            q = q.reshape(T, H, D)
            k = k.reshape(T, KVH, D)
            v = v.reshape(T, KVH, D)
            qn, kn = self._opt(p + "attn_q_norm.weight"), self._opt(p + "attn_k_norm.weight")
            if qn is not None:
                q = rms_norm(q, qn, cfg.rms_eps)
            if kn is not None:
                k = rms_norm(k, kn, cfg.rms_eps)
            q = apply_rope(q, pos, cfg)
            k = apply_rope(k, pos, cfg)

            # Causal GQA attention in float64: query head hq reads kv head hq // group.
            kx = np.repeat(k.astype(np.float64).transpose(1, 0, 2), group, axis=0)  # [H,T,D]
            vx = np.repeat(v.astype(np.float64).transpose(1, 0, 2), group, axis=0)
            s = q.astype(np.float64).transpose(1, 0, 2) @ kx.transpose(0, 2, 1)  # [H,T,T]
            s /= np.sqrt(D)
            s[:, causal] = -np.inf
            s -= s.max(axis=-1, keepdims=True)
            pr = np.exp(s)
            pr /= pr.sum(axis=-1, keepdims=True)
            att = (pr @ vx).transpose(1, 0, 2).reshape(T, H * D).astype(np.float32)

            x = x + self.mm(att, p + "attn_output.weight")
            h = rms_norm(x, self.w(p + "ffn_norm.weight"), cfg.rms_eps)
            g = silu(self.mm(h, p + "ffn_gate.weight"))
            u = self.mm(h, p + "ffn_up.weight")
            x = x + self.mm(g * u, p + "ffn_down.weight")

        h = rms_norm(x, self.w("output_norm.weight"), cfg.rms_eps)
        return self.mm(h, self.output_name()).astype(np.float32)


# ---- comparison helpers shared by the tests ---------------------------------

def rel_rms_per_row(c: np.ndarray, r: np.ndarray) -> np.ndarray:
    """rms(c - r) / rms(r) for each row (position)."""
    c64, r64 = c.astype(np.float64), r.astype(np.float64)
    return np.sqrt(np.mean((c64 - r64) ** 2, axis=-1) / np.mean(r64 ** 2, axis=-1))


def top2_gap(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(argmax, top1 - top2) per row."""
    top = np.argmax(r, axis=-1)
    part = np.partition(r, -2, axis=-1)
    return top, part[:, -1] - part[:, -2]


def default_model_path() -> str:
    env = os.environ.get("BEACON_MODEL")
    if env:
        return env
    src = os.environ.get("BEACON_SOURCE_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..")
    return os.path.join(src, "models", "default.gguf")
