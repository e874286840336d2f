#include "model/hf_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "model/rope_config.h"
#include "util/json_depth.h"
#include "util/status_macros.h"

namespace beacon {
namespace {

using json = nlohmann::json;

absl::string_view JsonTypeName(const json& v) { return v.type_name(); }

// Typed access to the fields of one config object, with errors that name the
// field and the file. A null value is treated as absent.
class FieldReader {
 public:
  FieldReader(const json& j, absl::string_view source) : j_(j), source_(source) {}

  const json* Find(absl::string_view key) const {
    const auto it = j_.find(std::string(key));
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  absl::Status Missing(absl::string_view key) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": required field '", key, "' is missing"));
  }
  absl::Status WrongType(absl::string_view key, absl::string_view want, const json& v) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": field '", key, "' must be ", want, ", got ", JsonTypeName(v)));
  }
  absl::Status Unsupported(absl::string_view key, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": field '", key, "': ", what));
  }

  // An integer that fits in int. `fallback` empty means the field is required.
  absl::StatusOr<int> Int(absl::string_view key, std::optional<int> fallback = std::nullopt) const {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback.has_value()) return *fallback;
      return Missing(key);
    }
    if (!v->is_number_integer()) return WrongType(key, "an integer", *v);
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
        return Unsupported(key, absl::StrCat("value ", u, " is out of range"));
      }
      return static_cast<int>(u);
    }
    const int64_t s = v->get<int64_t>();
    if (s < std::numeric_limits<int>::min() || s > std::numeric_limits<int>::max()) {
      return Unsupported(key, absl::StrCat("value ", s, " is out of range"));
    }
    return static_cast<int>(s);
  }

  absl::StatusOr<float> Float(absl::string_view key, std::optional<float> fallback = std::nullopt) const {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback.has_value()) return *fallback;
      return Missing(key);
    }
    if (!v->is_number()) return WrongType(key, "a number", *v);
    const double d = v->get<double>();
    if (!std::isfinite(d)) return Unsupported(key, "value is not finite");
    return static_cast<float>(d);
  }

  absl::StatusOr<bool> Bool(absl::string_view key, bool fallback) const {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return WrongType(key, "a boolean", *v);
    return v->get<bool>();
  }

  absl::StatusOr<std::optional<std::string>> String(absl::string_view key) const {
    const json* v = Find(key);
    if (v == nullptr) return std::optional<std::string>();
    if (!v->is_string()) return WrongType(key, "a string", *v);
    return std::optional<std::string>(v->get<std::string>());
  }

 private:
  const json& j_;
  absl::string_view source_;
};

std::optional<ModelFamily> FamilyFromModelType(absl::string_view t) {
  if (t == "llama") return ModelFamily::kLlama;
  if (t == "qwen2") return ModelFamily::kQwen2;
  if (t == "qwen3") return ModelFamily::kQwen3;
  return std::nullopt;
}

std::optional<ModelFamily> FamilyFromArchitecture(absl::string_view a) {
  if (a == "LlamaForCausalLM") return ModelFamily::kLlama;
  if (a == "Qwen2ForCausalLM") return ModelFamily::kQwen2;
  if (a == "Qwen3ForCausalLM") return ModelFamily::kQwen3;
  return std::nullopt;
}

// model_type is authoritative when present; architectures[0] otherwise.
absl::StatusOr<ModelFamily> ReadFamily(const FieldReader& r, absl::string_view source) {
  auto model_type = r.String("model_type");
  if (!model_type.ok()) return model_type.status();
  if (model_type->has_value()) {
    if (auto f = FamilyFromModelType(**model_type)) return *f;
    return r.Unsupported("model_type",
                         absl::StrCat("unsupported model_type '", **model_type, "' (supported: llama, qwen2, qwen3)"));
  }
  const json* arch = r.Find("architectures");
  if (arch == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": required field 'model_type' is missing (and there is no 'architectures')"));
  }
  if (!arch->is_array() || arch->empty() || !(*arch)[0].is_string()) {
    return r.WrongType("architectures", "a non-empty array of strings", *arch);
  }
  const std::string name = (*arch)[0].get<std::string>();
  if (auto f = FamilyFromArchitecture(name)) return *f;
  return r.Unsupported("architectures", absl::StrCat("unsupported architecture '", name,
                                                     "' (supported: LlamaForCausalLM, "
                                                     "Qwen2ForCausalLM, Qwen3ForCausalLM)"));
}

// Refuses what the forward pass would silently compute differently.
absl::Status CheckUnsupportedFeatures(const FieldReader& r) {
  auto mlp_bias = r.Bool("mlp_bias", false);
  if (!mlp_bias.ok()) return mlp_bias.status();
  if (*mlp_bias) return r.Unsupported("mlp_bias", "biases on the MLP projections are not supported");
  auto sliding = r.Bool("use_sliding_window", false);
  if (!sliding.ok()) return sliding.status();
  if (*sliding) return r.Unsupported("use_sliding_window", "sliding-window attention is not supported");
  auto act = r.String("hidden_act");
  if (!act.ok()) return act.status();
  if (act->has_value() && **act != "silu") {
    return r.Unsupported("hidden_act", absl::StrCat("activation '", **act, "' is not supported (only silu)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ParseHfConfig(const json& j, const std::string& source, const HfConfigOptions& options) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": expected a JSON object, got ", JsonTypeName(j)));
  }
  const FieldReader r(j, source);
  ModelConfig c;
  auto family = ReadFamily(r, source);
  if (!family.ok()) return family.status();
  c.family = *family;

  BEACON_ASSIGN_OR_RETURN(c.n_layers, r.Int("num_hidden_layers"));
  BEACON_ASSIGN_OR_RETURN(c.hidden, r.Int("hidden_size"));
  BEACON_ASSIGN_OR_RETURN(c.n_heads, r.Int("num_attention_heads"));
  BEACON_ASSIGN_OR_RETURN(c.n_kv_heads, r.Int("num_key_value_heads", c.n_heads));
  BEACON_ASSIGN_OR_RETURN(c.ffn_hidden, r.Int("intermediate_size"));
  BEACON_ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size"));
  BEACON_ASSIGN_OR_RETURN(c.context_length, r.Int("max_position_embeddings"));
  // transformers >= 4.56 may write "rope_parameters" (type, scaling keys and
  // rope_theta in one object) instead of rope_scaling + rope_theta.
  const json* rope_parameters = r.Find("rope_parameters");
  if (rope_parameters != nullptr && !rope_parameters->is_object()) {
    return r.WrongType("rope_parameters", "an object or null", *rope_parameters);
  }
  if (r.Find("rope_theta") == nullptr && rope_parameters != nullptr) {
    BEACON_ASSIGN_OR_RETURN(c.rope_theta, FieldReader(*rope_parameters, source).Float("rope_theta", 10000.0f));
  } else {
    BEACON_ASSIGN_OR_RETURN(c.rope_theta, r.Float("rope_theta", 10000.0f));
  }
  BEACON_ASSIGN_OR_RETURN(c.rms_eps, r.Float("rms_norm_eps"));
  BEACON_ASSIGN_OR_RETURN(c.tie_embeddings, r.Bool("tie_word_embeddings", false));
  bool attention_bias = false;
  BEACON_ASSIGN_OR_RETURN(attention_bias, r.Bool("attention_bias", false));
  std::optional<std::string> name;
  BEACON_ASSIGN_OR_RETURN(name, r.String("_name_or_path"));
  if (r.Find("head_dim") != nullptr) {
    BEACON_ASSIGN_OR_RETURN(c.head_dim, r.Int("head_dim"));
  } else {
    if (c.n_heads <= 0 || c.hidden % c.n_heads != 0) {
      return r.Unsupported("head_dim", absl::StrCat("absent, and hidden_size ", c.hidden,
                                                    " is not a multiple of num_attention_heads ", c.n_heads));
    }
    c.head_dim = c.hidden / c.n_heads;
  }

  if (!options.ignore_unsupported_features) {
    if (absl::Status s = CheckUnsupportedFeatures(r); !s.ok()) return s;
  }
  if (name.has_value()) c.name = *name;
  c.rope_style = RopeStyle::kHalf;
  // Modelled for every config, dummies included: a dummy's logits must be
  // the model's (tests compare them with the NumPy reference).
  const json* rope_scaling = r.Find("rope_scaling");
  BEACON_ASSIGN_OR_RETURN(c.rope_scaling,
                          ParseHfRopeScaling(rope_scaling != nullptr ? rope_scaling : rope_parameters, c.context_length,
                                             source, options.ignore_unsupported_features));
  c.context_length = ScaledContextLength(c.context_length, c.rope_scaling);
  c.qkv_bias = c.family == ModelFamily::kQwen2 || attention_bias;
  c.qk_norm = c.family == ModelFamily::kQwen3;

  if (absl::Status s = c.Validate(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(source, ": ", s.message()));
  }
  return c;
}

absl::StatusOr<json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  if (JsonNestingDepth(text.str(), kMaxJsonFileDepth) > kMaxJsonFileDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " nests deeper than ", kMaxJsonFileDepth, " levels of [ and {: not a model file"));
  }
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, " is not valid JSON"));
  return j;
}

absl::StatusOr<ModelConfig> ParseHfConfigFile(const std::string& path, const HfConfigOptions& options) {
  auto j = ReadJsonFile(path);
  if (!j.ok()) return j.status();
  auto config = ParseHfConfig(*j, path, options);
  if (!config.ok()) return config.status();
  if (config->name.empty()) {
    const std::filesystem::path p(path);
    config->name = p.stem() == "config" ? p.parent_path().filename().string() : p.stem().string();
  }
  return config;
}

}  // namespace beacon
