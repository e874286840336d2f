#!/usr/bin/env python3
"""Writes the llama.cpp oracle fixtures the C++ tokenizer tests compare against.

Uses llama.cpp through the PyPI package llama-cpp-python, and jinja2 (which it
installs) for chat templates:

  tokenize.jsonl        for every entry of the corpus: the ids llama.cpp gives
                        with special=True and with special=False (add_bos=False).
                        Loads the model with vocab_only=True (no weights).
  chat_template.jsonl   (--chat) conversations rendered by jinja2 from the
                        GGUF's own tokenizer.chat_template, and from the
                        canonical Llama 3 template, as HF transformers renders
                        them (trim_blocks, lstrip_blocks).
  greedy.jsonl          (--greedy) prompt ids and 64 greedily decoded ids
                        (temperature 0, top_k 1, 2 threads) for 6 fixed raw and
                        chat prompts. Loads the full model.

Usage:
  python3 tools/make_llamacpp_fixtures.py --model models/default.gguf \\
      --out tests/fixtures/llamacpp [--chat] [--greedy]
"""

import argparse
import json
import os
import sys

CORPUS_DEFAULT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tokenizer_corpus.jsonl")

# The template Meta ships with Llama 3 (8B/70B Instruct).
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

CONVERSATIONS = [
    ("user_only", [{"role": "user", "content": "Hello!"}]),
    ("system_user", [{"role": "system", "content": "You are terse."},
                     {"role": "user", "content": "What is 2+2?"}]),
    ("multi_turn", [{"role": "system", "content": "Be kind."},
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello! How can I help?"},
                    {"role": "user", "content": "Tell me a joke."}]),
    ("no_system_multi_turn", [{"role": "user", "content": "Ping"},
                              {"role": "assistant", "content": "Pong"},
                              {"role": "user", "content": "Again"}]),
    ("empty", []),
    ("tricky_content", [{"role": "user", "content": "  spaced\tout \n\nlines\n  "},
                        {"role": "assistant", "content": ""},
                        {"role": "user", "content": "unicode: café 東京 🙂 <|im_start|> {{ not jinja }}"}]),
    ("system_only", [{"role": "system", "content": "Only a system prompt."}]),
    ("assistant_first", [{"role": "assistant", "content": "I speak first."},
                         {"role": "user", "content": "ok"}]),
]

GREEDY_PROMPTS = [
    ("raw_capital", "raw", "The capital of France is"),
    ("raw_story", "raw", "Once upon a time, in a small village,"),
    ("raw_code", "raw", "def fibonacci(n):\n"),
    ("chat_greeting", "chat", [{"role": "user", "content": "Hello! Who are you?"}]),
    ("chat_math", "chat", [{"role": "user", "content": "What is 12 times 7? Answer briefly."}]),
    ("chat_system", "chat", [{"role": "system", "content": "You are a pirate."},
                             {"role": "user", "content": "Describe the sea in one sentence."}]),
]


def read_corpus(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def gguf_chat_template(model_path):
    from gguf import GGUFReader  # the `gguf` PyPI package
    reader = GGUFReader(model_path)
    field = reader.fields.get("tokenizer.chat_template")
    return field.contents() if field is not None else ""


def gguf_bos_text(model_path):
    from gguf import GGUFReader
    reader = GGUFReader(model_path)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    bos = reader.fields.get("tokenizer.ggml.bos_token_id")
    return tokens[int(bos.contents())] if bos is not None else ""


def render(template, messages, add_generation_prompt, bos_token):
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                            bos_token=bos_token, eos_token="")


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print("wrote %s (%d entries)" % (path, len(rows)))


def make_tokenize(args):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=args.model, vocab_only=True, verbose=False)
    rows = []
    for entry in read_corpus(args.corpus):
        data = entry["text"].encode("utf-8")
        rows.append({
            "name": entry["name"],
            "text": entry["text"],
            "ids_special": llm.tokenize(data, add_bos=False, special=True),
            "ids_plain": llm.tokenize(data, add_bos=False, special=False),
        })
    write_jsonl(os.path.join(args.out, "tokenize.jsonl"), rows)


def make_chat(args):
    families = [("smollm2", gguf_chat_template(args.model), gguf_bos_text(args.model)),
                ("llama3", LLAMA3_TEMPLATE, "<|begin_of_text|>")]
    rows = []
    for family, template, bos in families:
        for name, messages in CONVERSATIONS:
            for gen in (False, True):
                rows.append({"name": "%s/%s/%s" % (family, name, "gen" if gen else "nogen"),
                             "family": family, "template": template, "bos": bos, "messages": messages,
                             "add_generation_prompt": gen,
                             "rendered": render(template, messages, gen, bos)})
    write_jsonl(os.path.join(args.out, "..", "chat_template.jsonl"), rows)


def make_greedy(args):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=args.model, n_threads=2, n_ctx=512, seed=0, verbose=False)
    template = gguf_chat_template(args.model)
    bos = gguf_bos_text(args.model)
    vocab = llm._model.vocab
    rows = []
    for name, kind, prompt in GREEDY_PROMPTS:
        text = prompt if kind == "raw" else render(template, prompt, True, bos)
        prompt_ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        generated = []
        for tok in llm.generate(prompt_ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0):
            generated.append(int(tok))
            if llama_cpp.llama_vocab_is_eog(vocab, tok) or len(generated) >= args.max_tokens:
                break
        rows.append({"name": name, "kind": kind, "prompt": text, "prompt_ids": prompt_ids,
                     "generated_ids": generated,
                     "generated_text": llm.detokenize(generated).decode("utf-8", errors="replace"),
                     "stopped_at_eog": bool(generated) and bool(llama_cpp.llama_vocab_is_eog(vocab, generated[-1]))})
        print("  %s: %d prompt ids, %d generated" % (name, len(prompt_ids), len(generated)))
    write_jsonl(os.path.join(args.out, "greedy.jsonl"), rows)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="GGUF file")
    p.add_argument("--out", required=True, help="output folder (tests/fixtures/llamacpp)")
    p.add_argument("--corpus", default=CORPUS_DEFAULT, help="tokenizer corpus (jsonl of {name, text})")
    p.add_argument("--chat", action="store_true", help="also write ../chat_template.jsonl (jinja2)")
    p.add_argument("--greedy", action="store_true", help="also write greedy.jsonl (full model load)")
    p.add_argument("--max-tokens", type=int, default=64, help="greedy continuation length")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    make_tokenize(args)
    if args.chat:
        make_chat(args)
    if args.greedy:
        make_greedy(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
