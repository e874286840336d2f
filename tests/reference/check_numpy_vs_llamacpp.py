"""Manual check (not a ctest test): the NumPy reference against llama.cpp.

Needs the PyPI package llama-cpp-python, which CI does not install. Run:
    .venv/bin/python tests/reference/check_numpy_vs_llamacpp.py [MODEL.gguf]

Validates the oracle itself on a ~30-token ChatML prompt:
  A. the model as shipped (Q4_1): llama.cpp quantises activations to 8 bits
     and keeps an f16 KV cache, which this small model amplifies into a few
     percent of relative logit error; we report it and require mean <= 6% and
     top-1 agreement where the reference's top-1 leads by > 0.5.
  B. an all-F32 copy written from OUR dequantisation (gguf_numpy), run by
     llama.cpp with an f32 KV cache: same float function on both sides, so
     every position must agree to 1e-4 relative RMS. This checks dequant,
     RoPE pairing, GQA, norms and the tied output end to end.
  C. greedy continuations of both (model as shipped).
  D. tiny synthetic llama / qwen2 (q/k/v bias, untied output) / qwen3 (q/k
     RMSNorm, head_dim != hidden/heads) models with random F32 weights and the
     default model's tokenizer, so the neox RoPE, bias and norm paths that the
     default model does not use are checked against llama.cpp too (1e-4).
"""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gguf_numpy import write_dequantized_copy  # noqa: E402
from numpy_model import NumpyModel, default_model_path, rel_rms_per_row, top2_gap  # noqa: E402

import numpy as np  # noqa: E402

PROMPT = ("<|im_start|>user\nList three primary colours, then explain in one sentence why "
          "the sky looks blue on a clear day.<|im_end|>\n<|im_start|>assistant\n")
N_GREEDY = 12
F32_KV = dict(type_k=0, type_v=0, flash_attn=False)  # 0 = GGML_TYPE_F32


def llama_logits(llama_cpp, path: str, ids, **kw) -> np.ndarray:
    llm = llama_cpp.Llama(model_path=path, logits_all=True, n_threads=2, n_ctx=512,
                          n_batch=512, verbose=False, **kw)
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float32)


def report(tag: str, c: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    err = rel_rms_per_row(c, r)
    top, gap = top2_gap(r)
    agree = np.argmax(c, axis=-1) == top
    conf = gap > 0.5
    print(f"{tag}: relative RMS per position mean {err.mean():.3e} max {err.max():.3e} "
          f"(pos {int(err.argmax())}); max|err| {np.abs(c - r).max():.3g}; top-1 "
          f"{int(agree.sum())}/{agree.size} all, {int((agree & conf).sum())}/{int(conf.sum())} gap>0.5")
    return err, agree, conf


def write_tiny_model(src, path: str, arch: str, seed: int) -> None:
    """Random F32 model of `arch`, tokenizer metadata copied from `src`."""
    import gguf

    rng = np.random.default_rng(seed)
    hidden, ffn, n_layers, n_heads, n_kv = 64, 96, 2, 4, 2
    head_dim = 32 if arch == "qwen3" else hidden // n_heads
    vocab = len(src.tokens())
    w = gguf.GGUFWriter(path, arch=arch)
    for key, val in (("block_count", n_layers), ("context_length", 512), ("embedding_length", hidden),
                     ("feed_forward_length", ffn), ("attention.head_count", n_heads),
                     ("attention.head_count_kv", n_kv), ("attention.key_length", head_dim),
                     ("attention.value_length", head_dim)):
        w.add_uint32(f"{arch}.{key}", val)
    w.add_float32(f"{arch}.rope.freq_base", 1000.0)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_uint32("general.file_type", 0)
    for key, field in src.reader.fields.items():
        if key.startswith("tokenizer."):
            w.add_key_value(key, field.contents(), field.types[0],
                            field.types[1] if len(field.types) > 1 else None)
    r = lambda *shape, s=0.08: (rng.standard_normal(shape) * s).astype(np.float32)  # noqa: E731
    norm = lambda n: (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)  # noqa: E731
    w.add_tensor("token_embd.weight", r(vocab, hidden, s=0.5))
    if arch == "qwen2":
        w.add_tensor("output.weight", r(vocab, hidden, s=0.5))
    w.add_tensor("output_norm.weight", norm(hidden))
    for l in range(n_layers):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", norm(hidden))
        w.add_tensor(p + "attn_q.weight", r(n_heads * head_dim, hidden, s=0.3))
        w.add_tensor(p + "attn_k.weight", r(n_kv * head_dim, hidden, s=0.3))
        w.add_tensor(p + "attn_v.weight", r(n_kv * head_dim, hidden))
        if arch == "qwen2":
            w.add_tensor(p + "attn_q.bias", r(n_heads * head_dim, s=0.5))
            w.add_tensor(p + "attn_k.bias", r(n_kv * head_dim, s=0.5))
            w.add_tensor(p + "attn_v.bias", r(n_kv * head_dim))
        if arch == "qwen3":
            w.add_tensor(p + "attn_q_norm.weight", norm(head_dim))
            w.add_tensor(p + "attn_k_norm.weight", norm(head_dim))
        w.add_tensor(p + "attn_output.weight", r(hidden, n_heads * head_dim))
        w.add_tensor(p + "ffn_norm.weight", norm(hidden))
        w.add_tensor(p + "ffn_gate.weight", r(ffn, hidden))
        w.add_tensor(p + "ffn_up.weight", r(ffn, hidden))
        w.add_tensor(p + "ffn_down.weight", r(hidden, ffn))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> int:
    try:
        import llama_cpp
    except ImportError:
        print("llama-cpp-python is not installed; this manual check needs it")
        return 2
    path = sys.argv[1] if len(sys.argv) > 1 else default_model_path()
    tok = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    ids = tok.tokenize(PROMPT.encode(), add_bos=False, special=True)
    print(f"prompt: {len(ids)} tokens: {ids}")

    model = NumpyModel(path)
    ref = model.forward(ids)
    ok = True

    err, agree, conf = report("A  quantised model, llama.cpp defaults", llama_logits(llama_cpp, path, ids), ref)
    ok &= bool(err.mean() <= 0.06 and np.all(agree[conf]))

    with tempfile.TemporaryDirectory(prefix="beacon-f32-") as tmp:
        f32 = os.path.join(tmp, "model-f32.gguf")
        write_dequantized_copy(model.file, f32)
        err, agree, _ = report("B  F32 copy, llama.cpp f32 KV         ", llama_logits(llama_cpp, f32, ids, **F32_KV), ref)
        ok &= bool(err.max() <= 1e-4 and np.all(agree))

    seq_np = list(ids)
    for _ in range(N_GREEDY):
        seq_np.append(int(np.argmax(model.forward(seq_np)[-1])))
    llm = llama_cpp.Llama(model_path=path, logits_all=True, n_threads=2, n_ctx=512, verbose=False)
    seq_cpp = list(ids)
    llm.eval(seq_cpp)
    for _ in range(N_GREEDY):
        nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        seq_cpp.append(nxt)
        llm.eval([nxt])
    text = lambda s: tok.detokenize(s[len(ids):]).decode(errors="replace")  # noqa: E731
    print(f"C  greedy numpy   : {text(seq_np)!r}")
    print(f"   greedy llama.cpp: {text(seq_cpp)!r}")

    with tempfile.TemporaryDirectory(prefix="beacon-tiny-") as tmp:
        for i, arch in enumerate(("llama", "qwen2", "qwen3")):
            tiny = os.path.join(tmp, f"{arch}.gguf")
            write_tiny_model(model.file, tiny, arch, seed=100 + i)
            tiny_ref = NumpyModel(tiny).forward(ids)
            err, agree, _ = report(f"D  tiny random {arch:6s} F32, f32 KV    ",
                                   llama_logits(llama_cpp, tiny, ids, **F32_KV), tiny_ref)
            ok &= bool(err.max() <= 1e-4 and np.all(agree))

    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
