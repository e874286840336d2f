// RoPE scaling as model files state it, read into a RopeScaling
// (kernels/cpu/rope_scaling.h), its validation, and the context rule.
//
// HF config.json, object "rope_scaling" (absent or null: none):
//   rope_type, or the legacy "type"       default | linear | llama3 | yarn | dynamic
//   linear  factor                        required
//   llama3  factor, low_freq_factor, high_freq_factor,
//           original_max_position_embeddings                 required
//   yarn    factor                        required
//           original_max_position_embeddings  default max_position_embeddings
//           attention_factor              default 0.1 ln(factor) + 1
//           beta_fast 32, beta_slow 1, truncate true
//           mscale / mscale_all_dim (DeepSeek-V3's variant) are refused
//   dynamic (dynamic NTK) equals the unscaled RoPE at every position up to
//           max_position_embeddings, which stays the context limit; it is
//           read as none (the extension beyond is not implemented)
// Any other type (longrope, su, ntk, ...) is refused naming it.
//
// GGUF metadata (llama.cpp's convert_hf_to_gguf.py writes these):
//   <arch>.rope.scaling.type                 none | linear | yarn; others refused
//   <arch>.rope.scaling.factor               linear, yarn
//   <arch>.rope.scaling.original_context_length   yarn; default context_length
//   <arch>.rope.scaling.yarn_attn_factor     yarn (HF attention_factor; the older
//                                            key rope.scaling.attn_factor too)
//   <arch>.rope.scaling.yarn_beta_fast / yarn_beta_slow
//   <arch>.rope.scaling.yarn_ext_factor      must be 1 when present
//   <arch>.rope.scaling.yarn_log_multiplier  must be 0 when present
//   tensor rope_freqs.weight                 F32 [head_dim / 2] frequency divisors:
//                                            how the converter encodes Llama 3.1's
//                                            llama3 scaling (no type is written)
//
// Context rule (vLLM's): the usable context_length is
//   yarn    original_context * factor
//   linear  max_position_embeddings * factor
//   llama3, none, dynamic   max_position_embeddings (Llama 3.1's config already
//                           states the extended length)
// where max_position_embeddings is GGUF's <arch>.context_length.
#ifndef BEACON_MODEL_ROPE_CONFIG_H_
#define BEACON_MODEL_ROPE_CONFIG_H_

#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/rope_scaling.h"
#include "model/gguf/gguf_file.h"

namespace beacon {

struct ModelConfig;

// `rope_scaling`: the config's value (null pointer when absent). Errors:
// INVALID_ARGUMENT naming `source` and the field (rope_scaling.<key>).
// unknown_as_none: a type not listed above reads as none instead (dummy
// weights, where only shapes matter).
absl::StatusOr<RopeScaling> ParseHfRopeScaling(const nlohmann::json* rope_scaling, int max_position_embeddings,
                                               absl::string_view source, bool unknown_as_none = false);

// Reads the metadata and rope_freqs.weight above into c->rope_scaling and
// c->rope_freq_factors, then applies the context rule to c->context_length.
// REQUIRES: c->context_length and c->head_dim read. INVALID_ARGUMENT naming
// the key or tensor.
absl::Status ReadGgufRopeScaling(const GgufFile& f, absl::string_view arch, ModelConfig* c);

// The usable context (see the rule above), saturating at INT32_MAX.
int ScaledContextLength(int max_position_embeddings, const RopeScaling& s);

// OK when the fields the type uses are in range and freq_factors is empty or
// head_dim / 2 finite positive values; INVALID_ARGUMENT naming the field.
absl::Status ValidateRopeScaling(const RopeScaling& s, int head_dim, const std::vector<float>& freq_factors);

}  // namespace beacon

#endif  // BEACON_MODEL_ROPE_CONFIG_H_
