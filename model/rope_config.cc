#include "model/rope_config.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "model/model_config.h"

namespace beacon {
namespace {

using json = nlohmann::json;

// Typed access to the keys of one rope_scaling object; errors name the file
// and rope_scaling.<key>. A null value counts as absent, as in the rest of
// the HF reader.
class ScalingReader {
 public:
  ScalingReader(const json& j, absl::string_view source) : j_(j), source_(source) {}

  const json* Find(const char* key) const {
    const auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  absl::Status Error(absl::string_view key, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": field 'rope_scaling.", key, "' ", what));
  }
  absl::StatusOr<std::optional<double>> Number(const char* key) const {
    const json* v = Find(key);
    if (v == nullptr) return std::optional<double>();
    if (!v->is_number()) return Error(key, absl::StrCat("must be a number, got ", v->type_name()));
    const double d = v->get<double>();
    if (!std::isfinite(d)) return Error(key, "is not finite");
    return std::optional<double>(d);
  }
  absl::StatusOr<double> Required(const char* key, absl::string_view type) const {
    absl::StatusOr<std::optional<double>> v = Number(key);
    if (!v.ok()) return v.status();
    if (!v->has_value()) return Error(key, absl::StrCat("is required for RoPE scaling '", type, "'"));
    return **v;
  }
  absl::StatusOr<int> Context(const char* key, absl::string_view type) const {
    absl::StatusOr<double> v = Required(key, type);
    if (!v.ok()) return v.status();
    if (*v != std::floor(*v) || *v < 1 || *v > std::numeric_limits<int32_t>::max()) {
      return Error(key, absl::StrCat("must be a positive integer, got ", *v));
    }
    return static_cast<int>(*v);
  }

 private:
  const json& j_;
  absl::string_view source_;
};

absl::Status Bad(absl::string_view field, double v, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat(field, " (", v, ") must be ", want));
}

// *out = the F32 GGUF key `k` when present; unchanged when absent.
absl::Status GgufFloat(const GgufFile& f, const std::string& k, float* out) {
  if (!f.Has(k)) return absl::OkStatus();
  absl::StatusOr<float> v = f.GetF32(k);
  if (!v.ok()) return v.status();
  *out = *v;
  return absl::OkStatus();
}

absl::Status GgufInvalid(const GgufFile& f, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(f.name(), ": ", msg));
}

absl::Status ReadFreqFactors(const GgufFile& f, int head_dim, std::vector<float>* out) {
  absl::StatusOr<GgufTensor> t = f.FindTensor("rope_freqs.weight");
  if (!t.ok()) return t.status();
  if (t->dtype != DType::kF32 || t->elements() != head_dim / 2 || t->n_dims != 1) {
    return GgufInvalid(f, absl::StrCat("tensor rope_freqs.weight must be F32 [", head_dim / 2, "] (head_dim / 2), got ",
                                       t->n_dims, "-d, ", t->elements(), " elements, ggml type ", t->ggml_type));
  }
  out->resize(head_dim / 2);
  std::memcpy(out->data(), t->data, out->size() * sizeof(float));  // file alignment may be < 4
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RopeScaling> ParseHfRopeScaling(const json* rs, int max_position_embeddings, absl::string_view source,
                                               bool unknown_as_none) {
  RopeScaling s;
  if (rs == nullptr || rs->is_null()) return s;
  if (!rs->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": field 'rope_scaling' must be an object or null, got ", rs->type_name()));
  }
  const ScalingReader r(*rs, source);
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    if (const json* v = r.Find(key)) {
      if (!v->is_string()) return r.Error(key, absl::StrCat("must be a string, got ", v->type_name()));
      type = v->get<std::string>();
      break;
    }
  }
  if (type == "default" || type == "dynamic") return s;
  if (type == "linear") {
    s.type = RopeScalingType::kLinear;
    absl::StatusOr<double> factor = r.Required("factor", type);
    if (!factor.ok()) return factor.status();
    s.factor = static_cast<float>(*factor);
  } else if (type == "llama3") {
    s.type = RopeScalingType::kLlama3;
    absl::StatusOr<double> factor = r.Required("factor", type), low = r.Required("low_freq_factor", type),
                           high = r.Required("high_freq_factor", type);
    for (const auto* v : {&factor, &low, &high}) {
      if (!v->ok()) return v->status();
    }
    absl::StatusOr<int> original = r.Context("original_max_position_embeddings", type);
    if (!original.ok()) return original.status();
    s.factor = static_cast<float>(*factor);
    s.low_freq_factor = static_cast<float>(*low);
    s.high_freq_factor = static_cast<float>(*high);
    s.original_context = *original;
  } else if (type == "yarn") {
    s.type = RopeScalingType::kYarn;
    for (const char* key : {"mscale", "mscale_all_dim"}) {
      if (r.Find(key) != nullptr) return r.Error(key, "(DeepSeek-V3's YaRN variant) is not supported");
    }
    absl::StatusOr<double> factor = r.Required("factor", type);
    if (!factor.ok()) return factor.status();
    s.factor = static_cast<float>(*factor);
    s.original_context = max_position_embeddings;
    if (r.Find("original_max_position_embeddings") != nullptr) {
      absl::StatusOr<int> original = r.Context("original_max_position_embeddings", type);
      if (!original.ok()) return original.status();
      s.original_context = *original;
    }
    struct Optional {
      const char* key;
      float* out;
    };
    for (const Optional& o : {Optional{"attention_factor", &s.attention_factor}, Optional{"beta_fast", &s.beta_fast},
                              Optional{"beta_slow", &s.beta_slow}}) {
      absl::StatusOr<std::optional<double>> v = r.Number(o.key);
      if (!v.ok()) return v.status();
      if (v->has_value()) *o.out = static_cast<float>(**v);
    }
    if (const json* t = r.Find("truncate")) {
      if (!t->is_boolean()) return r.Error("truncate", absl::StrCat("must be a boolean, got ", t->type_name()));
      s.truncate = t->get<bool>();
    }
  } else if (!unknown_as_none) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": field 'rope_scaling': RoPE scaling '", type,
                                                   "' is not supported (supported: linear, llama3, yarn)"));
  }
  return s;
}

absl::Status ReadGgufRopeScaling(const GgufFile& f, absl::string_view arch, ModelConfig* c) {
  auto key = [&](const char* suffix) { return absl::StrCat(arch, ".rope.scaling.", suffix); };
  RopeScaling s;
  std::string type = "none";
  if (f.Has(key("type"))) {
    absl::StatusOr<std::string> t = f.GetString(key("type"));
    if (!t.ok()) return t.status();
    type = *t;
  }
  if (type == "linear" || type == "yarn") {
    s.type = type == "linear" ? RopeScalingType::kLinear : RopeScalingType::kYarn;
    if (!f.Has(key("factor"))) return GgufInvalid(f, absl::StrCat("RoPE scaling '", type, "' without ", key("factor")));
    if (absl::Status st = GgufFloat(f, key("factor"), &s.factor); !st.ok()) return st;
  } else if (type != "none") {
    return GgufInvalid(f, absl::StrCat("RoPE scaling '", type,
                                       "' is not supported (supported: none, linear, yarn; Llama 3 scaling as "
                                       "tensor rope_freqs.weight)"));
  }
  if (s.type == RopeScalingType::kYarn) {
    s.original_context = c->context_length;
    if (f.Has(key("original_context_length"))) {
      absl::StatusOr<int64_t> n = f.GetInt(key("original_context_length"));
      if (!n.ok()) return n.status();
      if (*n < 1 || *n > std::numeric_limits<int32_t>::max()) {
        return GgufInvalid(f, absl::StrCat(key("original_context_length"), " = ", *n, " is out of range"));
      }
      s.original_context = static_cast<int>(*n);
    }
    // The older converters' key first, so that the current one wins.
    for (const char* k : {"attn_factor", "yarn_attn_factor"}) {
      if (absl::Status st = GgufFloat(f, key(k), &s.attention_factor); !st.ok()) return st;
    }
    if (absl::Status st = GgufFloat(f, key("yarn_beta_fast"), &s.beta_fast); !st.ok()) return st;
    if (absl::Status st = GgufFloat(f, key("yarn_beta_slow"), &s.beta_slow); !st.ok()) return st;
    float ext = 1.0f, log_mul = 0.0f;
    if (absl::Status st = GgufFloat(f, key("yarn_ext_factor"), &ext); !st.ok()) return st;
    if (absl::Status st = GgufFloat(f, key("yarn_log_multiplier"), &log_mul); !st.ok()) return st;
    if (ext != 1.0f)
      return GgufInvalid(f, absl::StrCat(key("yarn_ext_factor"), " = ", ext, " is not supported (only 1)"));
    if (log_mul != 0.0f) {
      return GgufInvalid(f, absl::StrCat(key("yarn_log_multiplier"), " = ", log_mul, " is not supported (only 0)"));
    }
  }
  c->rope_scaling = s;
  if (f.HasTensor("rope_freqs.weight")) {
    if (absl::Status st = ReadFreqFactors(f, c->head_dim, &c->rope_freq_factors); !st.ok()) return st;
  }
  c->context_length = ScaledContextLength(c->context_length, s);
  return absl::OkStatus();
}

int ScaledContextLength(int max_position_embeddings, const RopeScaling& s) {
  double n = max_position_embeddings;
  if (s.type == RopeScalingType::kYarn) n = static_cast<double>(s.original_context) * s.factor;
  if (s.type == RopeScalingType::kLinear) n = static_cast<double>(max_position_embeddings) * s.factor;
  if (!(n < std::numeric_limits<int32_t>::max())) return std::numeric_limits<int32_t>::max();
  return static_cast<int>(n);
}

absl::Status ValidateRopeScaling(const RopeScaling& s, int head_dim, const std::vector<float>& freq_factors) {
  if (!freq_factors.empty()) {
    if (static_cast<int>(freq_factors.size()) != head_dim / 2) {
      return absl::InvalidArgumentError(absl::StrCat("rope_freq_factors has ", freq_factors.size(),
                                                     " values, expected head_dim / 2 = ", head_dim / 2));
    }
    for (size_t i = 0; i < freq_factors.size(); ++i) {
      if (!std::isfinite(freq_factors[i]) || freq_factors[i] <= 0.0f) {
        return Bad(absl::StrCat("rope_freq_factors[", i, "]"), freq_factors[i], "a finite number > 0");
      }
    }
  }
  const std::string name(RopeScalingTypeName(s.type));
  switch (s.type) {
    case RopeScalingType::kNone: return absl::OkStatus();
    case RopeScalingType::kLinear:
    case RopeScalingType::kLlama3:
    case RopeScalingType::kYarn: break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("rope_scaling.type (", static_cast<int>(s.type), ") is not a RopeScalingType"));
  }
  if (!std::isfinite(s.factor) || s.factor < 1.0f) {
    return Bad(absl::StrCat("rope_scaling.factor (", name, ")"), s.factor, "a finite number >= 1");
  }
  if (s.type == RopeScalingType::kLinear) return absl::OkStatus();
  if (s.original_context < 1) {
    return Bad("rope_scaling.original_max_position_embeddings", s.original_context, "a positive integer");
  }
  if (s.type == RopeScalingType::kLlama3) {
    if (!std::isfinite(s.low_freq_factor) || s.low_freq_factor <= 0.0f) {
      return Bad("rope_scaling.low_freq_factor", s.low_freq_factor, "a finite number > 0");
    }
    if (!std::isfinite(s.high_freq_factor) || s.high_freq_factor <= s.low_freq_factor) {
      return Bad("rope_scaling.high_freq_factor", s.high_freq_factor,
                 absl::StrCat("finite and > low_freq_factor (", s.low_freq_factor, ")"));
    }
    return absl::OkStatus();
  }
  if (!std::isfinite(s.attention_factor) || s.attention_factor < 0.0f) {
    return Bad("rope_scaling.attention_factor", s.attention_factor, "a finite number > 0 (0: the default)");
  }
  if (!std::isfinite(s.beta_slow) || s.beta_slow <= 0.0f) {
    return Bad("rope_scaling.beta_slow", s.beta_slow, "a finite number > 0");
  }
  if (!std::isfinite(s.beta_fast) || s.beta_fast <= s.beta_slow) {
    return Bad("rope_scaling.beta_fast", s.beta_fast, absl::StrCat("finite and > beta_slow (", s.beta_slow, ")"));
  }
  return absl::OkStatus();
}

}  // namespace beacon
