#include "engine/serving/generation_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "model/gguf/gguf_file.h"
#include "nlohmann/json.hpp"

namespace beacon {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The five keys, by their generation_config.json names, and the ranges the
// sampler accepts (SamplingParams::Validate).
absl::Status Apply(const json& j, const std::string& where, DefaultSampling* d) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": must be a JSON object"));
  auto number = [&](const char* key, double lo, double hi, bool lo_open, float* out) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_number()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", key, " must be a number"));
    const double v = it->get<double>();
    if (!((lo_open ? v > lo : v >= lo) && v <= hi)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", key, " = ", v, " is outside ", lo_open ? "(" : "[", lo, ", ", hi, "]"));
    }
    *out = static_cast<float>(v);
    return absl::OkStatus();
  };
  if (absl::Status s = number("temperature", 0, 100, false, &d->temperature); !s.ok()) return s;
  if (absl::Status s = number("top_p", 0, 1, true, &d->top_p); !s.ok()) return s;
  if (absl::Status s = number("min_p", 0, 1, false, &d->min_p); !s.ok()) return s;
  if (absl::Status s = number("repetition_penalty", 0, 10, true, &d->repetition_penalty); !s.ok()) return s;
  if (auto it = j.find("top_k"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < -1 || it->get<int64_t>() > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": top_k must be an integer >= -1 (0 or -1: off)"));
    }
    d->top_k = it->get<int64_t>() < 0 ? 0 : static_cast<int32_t>(it->get<int64_t>());
  }
  return absl::OkStatus();
}

absl::StatusOr<DefaultSampling> FromJsonFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--generation-config: cannot read ", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path.string(), ": is not valid JSON"));
  DefaultSampling d;
  if (absl::Status s = Apply(j, path.string(), &d); !s.ok()) return s;
  d.source = path.filename().string();
  return d;
}

// llama.cpp's general.sampling.* keys, when a GGUF has any.
absl::StatusOr<DefaultSampling> FromGguf(const std::string& path, bool* found) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path);
  if (!f.ok()) return f.status();
  json j = json::object();
  for (const auto& [gguf_key, key] :
       {std::pair{"general.sampling.temp", "temperature"}, std::pair{"general.sampling.top_p", "top_p"},
        std::pair{"general.sampling.min_p", "min_p"},
        std::pair{"general.sampling.penalty_repeat", "repetition_penalty"}}) {
    if (!(*f)->Has(gguf_key)) continue;
    absl::StatusOr<float> v = (*f)->GetF32(gguf_key);
    if (!v.ok()) return v.status();
    j[key] = *v;
  }
  if ((*f)->Has("general.sampling.top_k")) {
    absl::StatusOr<int64_t> v = (*f)->GetInt("general.sampling.top_k");
    if (!v.ok()) return v.status();
    j["top_k"] = *v;
  }
  DefaultSampling d;
  *found = !j.empty();
  if (!*found) return d;
  if (absl::Status s = Apply(j, path + " (general.sampling)", &d); !s.ok()) return s;
  d.source = "gguf";
  return d;
}

}  // namespace

absl::StatusOr<DefaultSampling> ResolveGenerationConfig(const std::string& mode, const std::string& model,
                                                        const std::string& override_json) {
  DefaultSampling d;
  if (mode == "auto") {
    std::error_code ec;
    if (fs::is_directory(model, ec)) {
      const fs::path file = fs::path(model) / "generation_config.json";
      if (fs::exists(file, ec)) {
        absl::StatusOr<DefaultSampling> g = FromJsonFile(file);
        if (!g.ok()) return g.status();
        d = *g;
      }
    } else if (fs::is_regular_file(model, ec)) {
      bool found = false;
      absl::StatusOr<DefaultSampling> g = FromGguf(model, &found);
      // A file that is not GGUF (the runtime reports it) has no config.
      if (g.ok() && found) d = *g;
    }
  } else if (mode != "none") {
    std::error_code ec;
    const fs::path file = fs::is_directory(mode, ec) ? fs::path(mode) / "generation_config.json" : fs::path(mode);
    absl::StatusOr<DefaultSampling> g = FromJsonFile(file);
    if (!g.ok()) return g.status();
    d = *g;
  }
  if (!override_json.empty()) {
    json j = json::parse(override_json, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return absl::InvalidArgumentError("--override-generation-config: is not valid JSON");
    for (const auto& [key, value] : j.items()) {
      if (key != "temperature" && key != "top_p" && key != "top_k" && key != "min_p" && key != "repetition_penalty") {
        return absl::InvalidArgumentError(absl::StrCat("--override-generation-config: '", key,
                                                       "' is not one of temperature, top_p, top_k, min_p, "
                                                       "repetition_penalty"));
      }
    }
    if (absl::Status s = Apply(j, "--override-generation-config", &d); !s.ok()) return s;
    d.source += "+override";
  }
  return d;
}

}  // namespace beacon
