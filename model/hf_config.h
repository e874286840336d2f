// Hugging Face config.json -> ModelConfig, for the llama, qwen2 and qwen3
// families (what LlamaForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM read).
//
// Fields read (HF names):
//   model_type or architectures[0]    family; anything else is an error naming it
//   num_hidden_layers, hidden_size, num_attention_heads, intermediate_size,
//   vocab_size, max_position_embeddings, rms_norm_eps       required
//   num_key_value_heads   default num_attention_heads
//   head_dim              default hidden_size / num_attention_heads
//   rope_theta            default 10000
//   rope_scaling          linear, llama3, yarn (model/rope_config.h,
//                         which also states how it extends context_length)
//   rope_parameters       newer transformers' form of both: read for
//                         rope_scaling when that is absent, and for rope_theta
//                         when that is absent
//   tie_word_embeddings   default false (the HF default for these families)
//   attention_bias        llama/qwen3: bias on q/k/v (default false); qwen2
//                         always has q/k/v bias; qwen3 always has q/k RMSNorm
//   _name_or_path         ModelConfig::name when present
// A null value counts as absent (HF writes "head_dim": null and the like).
// rope_style is kHalf: HF checkpoints rotate halves, unpermuted.
//
// Features the forward pass does not implement are refused rather than
// silently ignored, because ignoring them changes the logits: a rope_scaling
// type other than those above (e.g. longrope), use_sliding_window = true,
// mlp_bias = true, and a hidden_act other than "silu". Seeded dummy models set
// `ignore_unsupported_features` since their numbers are random anyway and only
// the shapes matter; the supported RoPE scalings are modelled for them too.
#ifndef BEACON_MODEL_HF_CONFIG_H_
#define BEACON_MODEL_HF_CONFIG_H_

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "model/model_config.h"

namespace beacon {

struct HfConfigOptions {
  // Accept unknown rope_scaling types / sliding windows / other activations
  // without modelling them (dummy weights). Default: refuse with
  // INVALID_ARGUMENT.
  bool ignore_unsupported_features = false;
};

// `source` names the file in error messages. Errors: INVALID_ARGUMENT naming
// the field and `source` (missing, wrong JSON type, out of range, unsupported),
// or whatever ModelConfig::Validate() reports.
absl::StatusOr<ModelConfig> ParseHfConfig(const nlohmann::json& j, const std::string& source = "config.json",
                                          const HfConfigOptions& options = {});

// Reads and parses `path`. NOT_FOUND when it cannot be opened; INVALID_ARGUMENT
// when it is not a JSON object. A config without _name_or_path is named after
// its file (its directory when the file is config.json).
absl::StatusOr<ModelConfig> ParseHfConfigFile(const std::string& path, const HfConfigOptions& options = {});

// Reads a whole JSON file without exceptions: NOT_FOUND when it cannot be
// opened, INVALID_ARGUMENT naming the file when it does not parse or nests
// deeper than kMaxJsonFileDepth (checked before parsing: nlohmann builds and
// frees trees recursively, and a file of nested brackets would exhaust the
// stack). Real model files nest fewer than 10 levels.
inline constexpr int kMaxJsonFileDepth = 128;
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

}  // namespace beacon

#endif  // BEACON_MODEL_HF_CONFIG_H_
