// A tiny llama/qwen2/qwen3 GGUF for loader tests, built with GgufBuilder:
// every key and tensor the loader reads, at a shape small enough to build
// per test. Tests edit the returned builder to break one thing at a time.
#ifndef BEACON_TESTS_ENGINE_MODEL_TINY_GGUF_MODEL_H_
#define BEACON_TESTS_ENGINE_MODEL_TINY_GGUF_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/model/gguf/gguf_builder.h"

namespace beacon::test {

struct TinyModelSpec {
  std::string arch = "llama";
  int n_layers = 2;
  int hidden = 64;
  int n_heads = 4;
  int n_kv_heads = 2;
  int head_dim = 16;  // written as key_length when != hidden / n_heads
  int ffn = 96;
  int vocab = 40;
  int context = 256;
  float rope_theta = 50000.0f;
  float rms_eps = 1e-5f;
  bool tied = true;
  uint32_t matrix_type = 8;  // Q8_0
  uint32_t embd_type = 8;
  uint32_t vector_type = 0;  // F32: norms and biases
  bool tokenizer = true;
};

// The value of element i of every vector tensor (norm weights, biases):
// exact in F16 and BF16, so conversions can be checked for equality.
inline float TinyVectorValue(int i) { return 0.25f * static_cast<float>(i % 16) - 1.0f; }

inline std::string TinyVectorData(int n, uint32_t type) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = TinyVectorValue(i);
  switch (type) {
    case 1: return F16Data(v);
    case 30: return BF16Data(v);
    default: return F32Data(v);
  }
}

inline std::vector<std::string> TinyTokens(int vocab) {
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int i = static_cast<int>(tokens.size()); i < vocab; ++i) {
    tokens.push_back(i < 29 ? std::string(1, static_cast<char>('a' + i - 3)) : absl::StrCat("t", i));
  }
  return tokens;
}

inline GgufBuilder TinyModelBuilder(const TinyModelSpec& s) {
  GgufBuilder b;
  const std::string a = s.arch;
  b.Str("general.architecture", a).Str("general.name", "Tiny " + a);
  b.U32(a + ".block_count", s.n_layers)
      .U32(a + ".embedding_length", s.hidden)
      .U32(a + ".feed_forward_length", s.ffn)
      .U32(a + ".attention.head_count", s.n_heads)
      .U32(a + ".attention.head_count_kv", s.n_kv_heads)
      .U32(a + ".context_length", s.context)
      .F32(a + ".rope.freq_base", s.rope_theta)
      .F32(a + ".attention.layer_norm_rms_epsilon", s.rms_eps)
      .U32(a + ".vocab_size", s.vocab);
  if (s.head_dim * s.n_heads != s.hidden) b.U32(a + ".attention.key_length", s.head_dim);
  if (s.tokenizer) {
    std::vector<int32_t> types(s.vocab, 1);
    types[0] = types[1] = types[2] = 3;
    b.Str("tokenizer.ggml.model", "gpt2")
        .Str("tokenizer.ggml.pre", "smollm")
        .StrArray("tokenizer.ggml.tokens", TinyTokens(s.vocab))
        .I32Array("tokenizer.ggml.token_type", types)
        .StrArray("tokenizer.ggml.merges", {"a b", "c d"})
        .U32("tokenizer.ggml.bos_token_id", 1)
        .U32("tokenizer.ggml.eos_token_id", 2)
        .U32("tokenizer.ggml.unknown_token_id", 0)
        .U32("tokenizer.ggml.padding_token_id", 2)
        .Bool("tokenizer.ggml.add_bos_token", false)
        .Str("tokenizer.chat_template", "{{ '<|im_start|>' }}");
  }
  const int64_t q_dim = s.n_heads * s.head_dim, kv_dim = s.n_kv_heads * s.head_dim;
  auto vec = [&](const std::string& name, int64_t n) {
    b.Tensor(name, {n}, s.vector_type, TinyVectorData(static_cast<int>(n), s.vector_type));
  };
  b.Tensor("token_embd.weight", {s.hidden, s.vocab}, s.embd_type);
  vec("output_norm.weight", s.hidden);
  if (!s.tied) b.Tensor("output.weight", {s.hidden, s.vocab}, s.matrix_type);
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    vec(p + "attn_norm.weight", s.hidden);
    b.Tensor(p + "attn_q.weight", {s.hidden, q_dim}, s.matrix_type);
    b.Tensor(p + "attn_k.weight", {s.hidden, kv_dim}, s.matrix_type);
    b.Tensor(p + "attn_v.weight", {s.hidden, kv_dim}, s.matrix_type);
    b.Tensor(p + "attn_output.weight", {q_dim, s.hidden}, s.matrix_type);
    vec(p + "ffn_norm.weight", s.hidden);
    b.Tensor(p + "ffn_gate.weight", {s.hidden, s.ffn}, s.matrix_type);
    b.Tensor(p + "ffn_up.weight", {s.hidden, s.ffn}, s.matrix_type);
    b.Tensor(p + "ffn_down.weight", {s.ffn, s.hidden}, s.matrix_type);
    if (s.arch == "qwen2") {
      vec(p + "attn_q.bias", q_dim);
      vec(p + "attn_k.bias", kv_dim);
      vec(p + "attn_v.bias", kv_dim);
    }
    if (s.arch == "qwen3") {
      vec(p + "attn_q_norm.weight", s.head_dim);
      vec(p + "attn_k_norm.weight", s.head_dim);
    }
  }
  return b;
}

}  // namespace beacon::test

#endif  // BEACON_TESTS_ENGINE_MODEL_TINY_GGUF_MODEL_H_
