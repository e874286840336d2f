// Model hyper-parameters, independent of where the weights come from (GGUF,
// HF safetensors + config.json, or seeded dummy weights).
#ifndef BEACON_MODEL_MODEL_CONFIG_H_
#define BEACON_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/rope_scaling.h"
#include "kernels/rope_style.h"

namespace beacon {

// The architecture families the forward pass implements.
//   kLlama: plain Llama (SmolLM2, DeepSeek-R1-Distill-Llama).
//   kQwen2: Llama + bias on the Q, K and V projections (R1-Distill-Qwen).
//   kQwen3: Llama + RMSNorm over each head of Q and K before RoPE.
enum class ModelFamily { kLlama, kQwen2, kQwen3 };

absl::StatusOr<ModelFamily> ParseModelFamily(std::string_view name);
std::string_view ModelFamilyName(ModelFamily f);

// RopeStyle (kernels/rope_style.h) says how RoPE pairs a head's dimensions.
//   kInterleaved: GGUF llama files store Q/K rows permuted by the converter
//                 so that this is the correct pairing.
//   kHalf:        as HF checkpoints and GGUF qwen2/qwen3 files expect.

struct ModelConfig {
  ModelFamily family = ModelFamily::kLlama;
  std::string name;  // human-readable, for logs and model info
  int n_layers = 0;
  int hidden = 0;      // embedding width
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (GQA: n_heads % n_kv_heads == 0)
  int head_dim = 0;
  int ffn_hidden = 0;  // SwiGLU inner width
  int vocab_size = 0;
  // Positions a sequence may use: what the model was trained for, extended by
  // its RoPE scaling (ScaledContextLength in model/rope_config.h).
  int context_length = 0;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-6f;
  RopeStyle rope_style = RopeStyle::kHalf;
  RopeScaling rope_scaling;  // kernels/cpu/rope_scaling.h; type none by default
  // GGUF rope_freqs.weight: [head_dim / 2] divisors of the base frequencies
  // (llama.cpp's encoding of Llama 3.1 scaling), or empty.
  std::vector<float> rope_freq_factors;
  bool tie_embeddings = false;  // output projection == token embedding
  bool qkv_bias = false;        // Qwen2
  bool qk_norm = false;         // Qwen3

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int group_size() const { return n_heads / n_kv_heads; }
  // The frequencies and attention factor every RoPE of this model uses (the
  // CPU and CUDA forward passes and the KV policies). REQUIRES: Validate().
  RopeTable RopeFrequencies() const {
    return MakeRopeTable(rope_theta, head_dim, rope_scaling,
                         rope_freq_factors.empty() ? nullptr : rope_freq_factors.data());
  }

  // OK when every field is in range and consistent; otherwise
  // INVALID_ARGUMENT naming the field.
  absl::Status Validate() const;
};

}  // namespace beacon

#endif  // BEACON_MODEL_MODEL_CONFIG_H_
