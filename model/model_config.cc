#include "model/model_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "model/rope_config.h"

namespace beacon {
namespace {

// Upper bounds well above any released model; a value beyond one is a corrupt
// or hostile config, and rejecting it here keeps loaders from allocating in
// proportion to it.
constexpr int kMaxLayers = 1024;
constexpr int kMaxHidden = 1 << 17;
constexpr int kMaxHeads = 1024;
constexpr int kMaxHeadDim = 1024;
constexpr int kMaxFfnHidden = 1 << 20;
constexpr int kMaxVocab = 1 << 24;

absl::Status InRange(const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat(field, " (", v, ") must be in [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelFamily> ParseModelFamily(std::string_view name) {
  if (name == "llama") return ModelFamily::kLlama;
  if (name == "qwen2") return ModelFamily::kQwen2;
  if (name == "qwen3") return ModelFamily::kQwen3;
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported architecture '", absl::string_view(name.data(), name.size()), "' (supported: llama, qwen2, qwen3)"));
}

std::string_view ModelFamilyName(ModelFamily f) {
  switch (f) {
    case ModelFamily::kLlama: return "llama";
    case ModelFamily::kQwen2: return "qwen2";
    case ModelFamily::kQwen3: return "qwen3";
  }
  return "unknown";
}

absl::Status ModelConfig::Validate() const {
  for (absl::Status st : {
           InRange("n_layers", n_layers, 1, kMaxLayers),
           InRange("hidden", hidden, 1, kMaxHidden),
           InRange("n_heads", n_heads, 1, kMaxHeads),
           InRange("n_kv_heads", n_kv_heads, 1, kMaxHeads),
           InRange("head_dim", head_dim, 2, kMaxHeadDim),
           InRange("ffn_hidden", ffn_hidden, 1, kMaxFfnHidden),
           InRange("vocab_size", vocab_size, 1, kMaxVocab),
           InRange("context_length", context_length, 1, INT32_MAX),
       }) {
    if (!st.ok()) return st;
  }
  if (n_heads % n_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_heads (", n_heads, ") must be a multiple of n_kv_heads (", n_kv_heads, ")"));
  }
  if (head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("head_dim (", head_dim, ") must be even: RoPE rotates pairs of dimensions"));
  }
  if (!std::isfinite(rope_theta) || rope_theta <= 1.0f) {
    return absl::InvalidArgumentError(absl::StrCat("rope_theta (", rope_theta, ") must be a finite number > 1"));
  }
  if (absl::Status st = ValidateRopeScaling(rope_scaling, head_dim, rope_freq_factors); !st.ok()) return st;
  if (!std::isfinite(rms_eps) || rms_eps <= 0.0f || rms_eps >= 1.0f) {
    return absl::InvalidArgumentError(absl::StrCat("rms_eps (", rms_eps, ") must be in (0, 1)"));
  }
  switch (family) {
    case ModelFamily::kLlama:
    case ModelFamily::kQwen2:
    case ModelFamily::kQwen3: break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("family (", static_cast<int>(family), ") is not a ModelFamily"));
  }
  switch (rope_style) {
    case RopeStyle::kInterleaved:
    case RopeStyle::kHalf: break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("rope_style (", static_cast<int>(rope_style), ") is not a RopeStyle"));
  }
  return absl::OkStatus();
}

}  // namespace beacon
