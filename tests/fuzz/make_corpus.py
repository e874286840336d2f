#!/usr/bin/env python3
"""Writes the GGUF fuzzer's seed corpus into tests/fuzz/corpus/.

The seeds are written by gguf-py (the `gguf` PyPI package, llama.cpp's own
writer), an implementation independent of ours, so they double as a
compatibility check: gguf_loader_test loads tiny_llama.gguf. Each file stays
under 64 KB (the fuzzer's -max_len). Deterministic: rerunning reproduces the
same bytes.

Usage: .venv/bin/python tests/fuzz/make_corpus.py [OUT_DIR]
"""
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q


def tokenizer(w, vocab):
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens += [chr(ord("a") + i) for i in range(26)]
    tokens += ["ab", "cd", "abc"]
    tokens += [f"t{i}" for i in range(len(tokens), vocab)]
    tokens = tokens[:vocab]
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "smollm")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.token_type", [3, 3, 3] + [1] * (vocab - 3))
    w.add_array("tokenizer.ggml.merges", ["a b", "c d", "ab c"])
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.add_uint32("tokenizer.ggml.unknown_token_id", 0)
    w.add_uint32("tokenizer.ggml.padding_token_id", 2)
    w.add_bool("tokenizer.ggml.add_bos_token", False)
    w.add_string("tokenizer.chat_template", "{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}")


def tiny_model(path, arch, matrix_type, vector_dtype=np.float32, head_dim=16, tied=True):
    rng = np.random.default_rng(len(arch) * 7 + int(matrix_type))
    hidden, heads, kv_heads, ffn, layers, vocab = 32, 2, 1, 64, 1, 40
    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    w = gguf.GGUFWriter(path, arch)
    w.add_string("general.name", f"tiny {arch}")
    for key, value in [("block_count", layers), ("embedding_length", hidden),
                       ("feed_forward_length", ffn), ("attention.head_count", heads),
                       ("attention.head_count_kv", kv_heads), ("context_length", 128),
                       ("vocab_size", vocab)]:
        w.add_uint32(f"{arch}.{key}", value)
    if head_dim * heads != hidden:
        w.add_uint32(f"{arch}.attention.key_length", head_dim)
    w.add_float32(f"{arch}.rope.freq_base", 10000.0)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    tokenizer(w, vocab)

    def matrix(name, rows, cols, qtype=matrix_type):
        data = rng.standard_normal((rows, cols)).astype(np.float32) * 0.1
        if qtype == Q.F32:
            w.add_tensor(name, data)
        elif qtype == Q.F16:
            w.add_tensor(name, data.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)

    def vector(name, n):
        data = (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)
        if vector_dtype == "bf16":
            w.add_tensor(name, gguf.quants.quantize(data, Q.BF16), raw_dtype=Q.BF16)
        else:
            w.add_tensor(name, data.astype(vector_dtype))

    matrix("token_embd.weight", vocab, hidden, Q.Q8_0)
    vector("output_norm.weight", hidden)
    if not tied:
        matrix("output.weight", vocab, hidden)
    for i in range(layers):
        p = f"blk.{i}."
        vector(p + "attn_norm.weight", hidden)
        matrix(p + "attn_q.weight", q_dim, hidden)
        matrix(p + "attn_k.weight", kv_dim, hidden)
        matrix(p + "attn_v.weight", kv_dim, hidden)
        matrix(p + "attn_output.weight", hidden, q_dim)
        vector(p + "ffn_norm.weight", hidden)
        matrix(p + "ffn_gate.weight", ffn, hidden)
        matrix(p + "ffn_up.weight", ffn, hidden)
        matrix(p + "ffn_down.weight", hidden, ffn)
        if arch == "qwen2":
            vector(p + "attn_q.bias", q_dim)
            vector(p + "attn_k.bias", kv_dim)
            vector(p + "attn_v.bias", kv_dim)
        if arch == "qwen3":
            vector(p + "attn_q_norm.weight", head_dim)
            vector(p + "attn_k_norm.weight", head_dim)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def all_value_types(path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_uint64("t.u64", 1 << 62)
    w.add_int64("t.i64", -(1 << 62))
    w.add_float32("t.f32", 1.5)
    w.add_float64("t.f64", 0.25)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "hello")
    w.add_array("t.strs", ["a", "", "ccc"])
    w.add_array("t.ints", [1, -2, 3])
    w.add_array("t.floats", [0.5, -1.0])
    w.add_array("t.nested", [[1, 2], [3]])
    w.add_tensor("t.f32_tensor", np.arange(8, dtype=np.float32))
    w.add_tensor("t.q6k", np.zeros((1, 210), dtype=np.uint8), raw_dtype=Q.Q6_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    os.makedirs(out, exist_ok=True)
    p = lambda name: os.path.join(out, name)
    tiny_model(p("tiny_llama.gguf"), "llama", Q.Q8_0)
    tiny_model(p("tiny_qwen2.gguf"), "qwen2", Q.Q4_1, vector_dtype=np.float16, tied=False)
    tiny_model(p("tiny_qwen3.gguf"), "qwen3", Q.Q4_0, vector_dtype="bf16", head_dim=32)
    tiny_model(p("tiny_llama_f16.gguf"), "llama", Q.F16)
    all_value_types(p("all_value_types.gguf"))

    # Mutations of a valid file: cut short, bad magic, old version, and an
    # absurd tensor count, each a different early exit to start from.
    with open(p("tiny_llama.gguf"), "rb") as f:
        good = f.read()
    mutations = {
        "truncated_in_metadata.gguf": good[:700],
        "truncated_in_tensor_data.gguf": good[:-100],
        "bad_magic.gguf": b"GGUX" + good[4:],
        "version1.gguf": good[:4] + struct.pack("<I", 1) + good[8:],
        "huge_tensor_count.gguf": good[:8] + struct.pack("<Q", 1 << 40) + good[16:],
    }
    for name, data in mutations.items():
        with open(p(name), "wb") as f:
            f.write(data)
    for name in sorted(os.listdir(out)):
        size = os.path.getsize(p(name))
        assert size < 65536, f"{name} is {size} bytes, over the fuzzer's max_len"
        print(f"{name}: {size} bytes")


if __name__ == "__main__":
    main()
