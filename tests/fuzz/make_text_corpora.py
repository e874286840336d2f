"""Writes the seed corpora of the fuzz targets other than GGUF's (make_corpus.py).
Deterministic; rerun after the fixtures change:
    python3 tests/fuzz/make_text_corpora.py

- jinja_corpus/ (jinja_fuzzer.cc): each chat template of
  tests/fixtures/chat_templates (mode byte 0x00, then the source), and the
  message lists and template variables of a spread of its cases.jsonl (mode
  byte 0x01, then the byte that picks the template, 0x80 set for a generation
  prompt, then the JSON).
- tokenizer_corpus/ (tokenizer_fuzzer.cc): the texts of
  tests/fixtures/tokenizers/r1-distill-qwen-7b.jsonl (flag byte: parse_special
  as the fixture encodes them), their llama.cpp ids as three-byte token ids
  (flag byte 0x08), and the texts again for every pre-tokenizer (0x10).
  The regression inputs (regression-*) are kept by hand: restore them after
  a rerun (git checkout tests/fuzz/tokenizer_corpus/regression-*).
- openai_corpus/ (openai_fuzzer.cc): request bodies of both endpoints using
  every field family the reader knows, the chat ones carrying the message
  lists of the chat-template cases, and /tokenize and /detokenize bodies
  (lead bytes 0x02 and 0x03).
- grpc_corpus/ (grpc_fuzzer.cc): beacon.v1 GenerateRequest messages in
  protobuf's wire format (first byte 0x00) using every field, the chat ones
  carrying the chat-template cases' message lists, and TokenizeRequest
  messages (0x01). The stubs are generated from proto/ with grpc_tools (the
  project's .venv has it).
- model_files_corpus/ (model_files_fuzzer.cc): tokenizer.json seeds (lead byte 3), small safetensors files in the
  layout transformers writes (mode byte 0x00: F32, F16, BF16 and I64 tensors,
  __metadata__, an empty tensor), and config.json files as the families we
  load publish them (mode byte 0x01: Llama, Qwen2, Qwen3, Gemma 3, with RoPE
  scaling and sliding windows).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")


def fresh(name):
    out = os.path.join(HERE, name)
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.unlink(os.path.join(out, f))
    return out


def write(out, name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def chat_cases():
    return [json.loads(line) for line in open(os.path.join(FIXTURES, "chat_templates", "cases.jsonl"))]


def jinja():
    out = fresh("jinja_corpus")
    tdir = os.path.join(FIXTURES, "chat_templates")
    names = sorted(f for f in os.listdir(tdir) if f.endswith(".jinja"))
    for i, name in enumerate(names):
        with open(os.path.join(tdir, name), "rb") as f:
            write(out, f"source-{i:02d}", b"\x00" + f.read())
    seen, written = set(), 0
    for case in chat_cases():
        v = case["vars"]
        kwargs = {k: x for k, x in v.items() if k not in ("messages", "add_generation_prompt", "bos_token", "eos_token")}
        doc = json.dumps({"messages": v.get("messages", []), "kwargs": kwargs}, ensure_ascii=False, sort_keys=True)
        if doc in seen:
            continue
        seen.add(doc)
        pick = (written % len(names)) | (0x80 if v.get("add_generation_prompt") else 0)
        write(out, f"client-{written:03d}", b"\x01" + bytes([pick]) + doc.encode())
        written += 1
        if written == 64:
            break
    return len(names) + written


def tokenizer():
    out = fresh("tokenizer_corpus")
    n = 0
    for i, line in enumerate(open(os.path.join(FIXTURES, "tokenizers", "r1-distill-qwen-7b.jsonl"))):
        case = json.loads(line)
        write(out, f"text-{i:02d}", bytes([1 if case["special"] else 0]) + case["text"].encode())
        # The fuzzer reads three bytes (little-endian) an id, modulo the vocabulary: the real sequence.
        write(out, f"ids-{i:02d}", b"\x08" + b"".join(struct.pack("<I", t)[:3] for t in case["ids"]))
        # The same text split by every pre-tokenizer (flag bit 4).
        write(out, f"pre-{i:02d}", b"\x10" + case["text"].encode())
        n += 3
    return n


def openai():
    out = fresh("openai_corpus")
    bodies = [
        (0, {"model": "default", "prompt": "Once upon a time", "max_tokens": 16}),
        (0, {"prompt": [1, 2, 3, 4], "max_tokens": 8, "temperature": 0, "logprobs": 2, "echo": True}),
        (0, {"prompt": ["a"], "n": 2, "seed": 7, "stop": ["\n", "."], "stream": True,
             "stream_options": {"include_usage": True, "continuous_usage_stats": True}}),
        (0, {"prompt": "x", "logit_bias": {"15": -100, "16": 5}, "min_tokens": 2, "ignore_eos": True,
             "stop_token_ids": [151643], "include_stop_str_in_output": True, "skip_special_tokens": False,
             "return_tokens_as_token_ids": True, "prompt_logprobs": 1, "request_id": "r-1"}),
        (0, {"prompt": "y", "kv_policy": "beacon", "kv_budget": 64, "time_limit_ms": 1000, "cache_salt": "tenant-a",
             "top_k": 40, "top_p": 0.9, "min_p": 0.05, "repetition_penalty": 1.1, "presence_penalty": 0.5,
             "frequency_penalty": 0.5, "best_of": 1, "user": "u"}),
        (1, {"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 32,
             "chat_template_kwargs": {"enable_thinking": False}, "max_reasoning_tokens": 16, "logprobs": True,
             "top_logprobs": 3, "tools": [], "tool_choice": "none", "response_format": {"type": "text"}}),
        (1, {"messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]},
                          {"role": "assistant", "content": "ok", "reasoning_content": "thought"}],
             "add_generation_prompt": False}),
    ]
    for i, case in enumerate(chat_cases()[:48]):
        msgs = case["vars"].get("messages")
        if isinstance(msgs, list):
            bodies.append((1, {"messages": msgs, "max_tokens": 8}))
    # The tokenizer endpoints' bodies (lead byte 0x02: /tokenize, 0x03: /detokenize).
    bodies += [(2, {"prompt": "Once upon a time", "return_token_strs": True}),
               (2, {"prompt": "x", "add_special_tokens": False, "model": "default"}),
               (2, {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True,
                    "chat_template_kwargs": {"enable_thinking": False}}),
               (3, {"tokens": [9707, 11, 1879, 0], "skip_special_tokens": False}),
               (3, {"tokens": [151643, 151648, 151649, 1], "model": "default"})]
    for i, (lead, body) in enumerate(bodies):
        write(out, f"body-{i:03d}", bytes([lead]) + json.dumps(body, ensure_ascii=False).encode())
    return len(bodies)


def grpc():
    out = fresh("grpc_corpus")
    root = os.path.join(HERE, "..", "..")
    stubs = tempfile.mkdtemp(prefix="beacon-stubs-")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{root}/proto", f"--python_out={stubs}",
                    f"{root}/proto/beacon/v1/beacon.proto"], check=True)
    sys.path.insert(0, stubs)
    from beacon.v1 import beacon_pb2 as pb  # noqa: E402
    msgs = [
        pb.GenerateRequest(text="Once upon a time", stopping=pb.StoppingCriteria(max_tokens=16)),
        pb.GenerateRequest(request_id="r-1", tokens=pb.TokenIds(ids=[1, 2, 3, 151643]),
                           sampling=pb.SamplingParams(temperature=0.7, top_p=0.9, top_k=40, min_p=0.05,
                                                      repetition_penalty=1.1, presence_penalty=0.5,
                                                      frequency_penalty=0.5, seed=7, n=2,
                                                      logit_bias={15: -100.0, 16: 5.0}),
                           stopping=pb.StoppingCriteria(max_tokens=8, stop=["\n"], stop_token_ids=[151643],
                                                        ignore_eos=True, time_limit_ms=1000, min_tokens=2,
                                                        include_stop_str_in_output=True, max_reasoning_tokens=4),
                           kv=pb.KvOptions(policy="beacon", budget=64),
                           output=pb.OutputOptions(logprobs=2, prompt_logprobs=1, skip_special_tokens=False),
                           cache_salt="tenant-a"),
    ]
    for case in chat_cases()[:32]:
        m = case["vars"].get("messages")
        if not isinstance(m, list) or not all(isinstance(x, dict) and isinstance(x.get("content"), str) for x in m):
            continue
        chat = pb.ChatInput(messages=[pb.ChatMessage(role=str(x.get("role", "")), content=x["content"]) for x in m])
        msgs.append(pb.GenerateRequest(chat=chat, stopping=pb.StoppingCriteria(max_tokens=8)))
    for i, m in enumerate(msgs):
        write(out, f"generate-{i:03d}", b"\x00" + m.SerializeToString())
    toks = [pb.TokenizeRequest(text="Hello, world"),
            pb.TokenizeRequest(chat=pb.ChatInput(messages=[pb.ChatMessage(role="user", content="Hi")]))]
    for i, m in enumerate(toks):
        write(out, f"tokenize-{i:03d}", b"\x01" + m.SerializeToString())
    return len(msgs) + len(toks)


def safetensors(tensors, metadata=None):
    """The bytes of a .safetensors file: tensors is [(name, dtype, shape, raw bytes)]."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # transformers pads the header to 8 bytes
    return struct.pack("<Q", len(text)) + text + data


def model_files():
    out = fresh("model_files_corpus")
    f32 = struct.pack("<6f", 0.5, -1.0, 2.0, 0.0, 3.25, -0.125)
    files = {
        "st-f32": safetensors([("model.embed_tokens.weight", "F32", [2, 3], f32)], {"format": "pt"}),
        "st-mixed": safetensors([("a", "BF16", [4], bytes(range(8))), ("b", "F16", [2, 2], bytes(range(8, 16))),
                                 ("c", "I64", [1], struct.pack("<q", 7)), ("empty", "F32", [0], b"")]),
        "st-3d": safetensors([("model.layers.0.mlp.up_proj.weight", "F32", [1, 2, 3], f32)]),
    }
    llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
             "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
             "vocab_size": 256, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
             "hidden_act": "silu", "tie_word_embeddings": True, "torch_dtype": "bfloat16",
             "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    qwen2 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536,
             "intermediate_size": 8960, "num_attention_heads": 12, "num_key_value_heads": 2, "num_hidden_layers": 28,
             "vocab_size": 151936, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
             "sliding_window": 131072, "use_sliding_window": False, "hidden_act": "silu",
             "tie_word_embeddings": True, "rope_scaling": None}
    qwen3 = dict(qwen2, architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=128,
                 rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
    gemma3 = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 640,
              "intermediate_size": 2048, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
              "num_hidden_layers": 18, "vocab_size": 262144, "max_position_embeddings": 32768,
              "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "sliding_window": 512,
              "layer_types": ["sliding_attention"] * 5 + ["full_attention"], "query_pre_attn_scalar": 256,
              "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": None}
    for name, cfg in (("llama", llama), ("qwen2", qwen2), ("qwen3", qwen3), ("gemma3", gemma3)):
        files[f"config-{name}"] = json.dumps(cfg, indent=2).encode()
    # tokenizer.json (and, after a NUL, tokenizer_config.json): byte-level BPE with each pre-tokenizer
    # form the reader names (ByteLevel alone, Split + ByteLevel with Qwen2's and Llama 3's regexes).
    qwen2_re = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
    llama3_re = qwen2_re.replace(r"\p{N}|", r"\p{N}{1,3}|", 1)

    def tokenizer_json(pre):
        return {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4},
                          "merges": ["a b", ["ab", "c"]]},
                "added_tokens": [{"id": 5, "content": "<|im_start|>", "special": True},
                                 {"id": 6, "content": "<|im_end|>", "special": True},
                                 {"id": 7, "content": "<think>", "special": False}],
                "pre_tokenizer": pre, "decoder": {"type": "ByteLevel"},
                "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|im_start|>"}}]}}

    def split(regex):
        return {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated"},
            {"type": "ByteLevel", "use_regex": False}]}

    tok_config = {"bos_token": {"content": "<|im_start|>"}, "eos_token": "<|im_end|>",
                  "chat_template": "{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}"}
    for name, pre in (("bytelevel", {"type": "ByteLevel"}), ("qwen2", split(qwen2_re)), ("llama3", split(llama3_re))):
        files[f"tok-{name}"] = (json.dumps(tokenizer_json(pre)).encode() + b"\x00" +
                                json.dumps(tok_config).encode())
    files["tok-no-config"] = json.dumps(tokenizer_json({"type": "ByteLevel"})).encode()
    lead = {"config": b"\x01", "tok": b"\x03"}
    for name, data in files.items():
        write(out, name, lead.get(name.split("-")[0], b"\x00") + data)
    return len(files)


def main():
    print(f"jinja {jinja()}, tokenizer {tokenizer()}, openai {openai()}, grpc {grpc()}, "
          f"model_files {model_files()} seeds")


if __name__ == "__main__":
    main()
