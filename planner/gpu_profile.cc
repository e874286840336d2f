#include "planner/gpu_profile.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/hf_config.h"

#ifndef BEACON_PLAN_SOURCE_DIR
#define BEACON_PLAN_SOURCE_DIR "."
#endif

namespace beacon::planner {
namespace {

using json = nlohmann::json;

struct KeySpec {
  const char* key;
  double GpuProfile::*field;
  double lo, hi;  // inclusive range of valid values
};

const std::vector<KeySpec>& Specs() {
  static const std::vector<KeySpec> specs = {
      {"memory_bytes", &GpuProfile::memory_bytes, 1e9, 1e13},
      {"hbm_bandwidth", &GpuProfile::hbm_bandwidth, 1e10, 1e14},
      {"bf16_flops", &GpuProfile::bf16_flops, 1e12, 1e17},
      {"bandwidth_efficiency", &GpuProfile::bandwidth_efficiency, 0.01, 1.0},
      {"compute_efficiency", &GpuProfile::compute_efficiency, 0.01, 1.0},
      {"launch_overhead_s", &GpuProfile::launch_overhead_s, 0.0, 1e-2},
      {"kernels_per_layer", &GpuProfile::kernels_per_layer, 0.0, 1000.0},
      {"step_host_overhead_s", &GpuProfile::step_host_overhead_s, 0.0, 1.0},
      {"evict_kernels_per_layer", &GpuProfile::evict_kernels_per_layer, 0.0, 1000.0},
      {"runtime_reserve_bytes", &GpuProfile::runtime_reserve_bytes, 0.0, 1e13},
  };
  return specs;
}

const char* kShipped[] = {"h100-sxm", "h200"};

}  // namespace

const std::vector<std::string>& GpuProfileKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const KeySpec& s : Specs()) k.push_back(s.key);
    return k;
  }();
  return keys;
}

std::vector<std::string> GpuProfile::MeasuredKeys() const {
  std::vector<std::string> out;
  for (const auto& [key, src] : sources) {
    if (src.kind == "measured") out.push_back(key);
  }
  return out;
}

absl::StatusOr<GpuProfile> ParseGpuProfile(const json& j, const std::string& source) {
  auto bad = [&](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat(source, ": ", what)); };
  if (!j.is_object()) return bad("a GPU profile must be a JSON object");
  for (const auto& [k, v] : j.items()) {
    if (k != "name" && k != "description" && k != "constants") return bad(absl::StrCat("unknown field '", k, "'"));
  }
  GpuProfile p;
  p.file = source;
  if (!j.contains("name") || !j["name"].is_string()) return bad("field 'name' must be a string");
  p.name = j["name"].get<std::string>();
  if (!j.contains("constants") || !j["constants"].is_object()) return bad("field 'constants' must be an object");
  const json& c = j["constants"];
  std::set<std::string> known;
  for (const KeySpec& s : Specs()) known.insert(s.key);
  for (const auto& [k, v] : c.items()) {
    if (!known.count(k)) {
      return bad(absl::StrCat("unknown constant '", k, "' (known: ", absl::StrJoin(GpuProfileKeys(), ", "), ")"));
    }
  }
  for (const KeySpec& s : Specs()) {
    auto it = c.find(s.key);
    if (it == c.end()) return bad(absl::StrCat("constant '", s.key, "' is missing"));
    const json& e = *it;
    if (!e.is_object() || !e.contains("value") || !e["value"].is_number()) {
      return bad(absl::StrCat("constant '", s.key, "' must be {\"value\": number, \"unit\", \"kind\", \"source\"}"));
    }
    const double v = e["value"].get<double>();
    if (!std::isfinite(v) || v < s.lo || v > s.hi) {
      return bad(absl::StrCat("constant '", s.key, "' = ", v, " is out of range [", s.lo, ", ", s.hi, "]"));
    }
    ConstantSource src;
    for (auto [field, out] :
         {std::pair<const char*, std::string*>{"kind", &src.kind}, {"unit", &src.unit}, {"source", &src.source}}) {
      if (!e.contains(field) || !e[field].is_string() || e[field].get<std::string>().empty()) {
        return bad(absl::StrCat("constant '", s.key, "' needs a non-empty string '", field, "'"));
      }
      *out = e[field].get<std::string>();
    }
    if (src.kind != "datasheet" && src.kind != "modelled" && src.kind != "measured") {
      return bad(
          absl::StrCat("constant '", s.key, "': kind '", src.kind, "' is not one of datasheet, modelled, measured"));
    }
    for (const auto& [k, v2] : e.items()) {
      if (k != "value" && k != "unit" && k != "kind" && k != "source") {
        return bad(absl::StrCat("constant '", s.key, "': unknown field '", k, "'"));
      }
    }
    p.*(s.field) = v;
    p.sources[s.key] = std::move(src);
  }
  return p;
}

ShippedRoots DefaultShippedRoots(const std::string& profile_dir) {
  namespace fs = std::filesystem;
  ShippedRoots r;
  if (!profile_dir.empty()) r.gpu_profile_dirs.push_back(profile_dir);
  r.gpu_profile_dirs.push_back("configs/gpus");
  r.gpu_profile_dirs.push_back((fs::path(BEACON_PLAN_SOURCE_DIR) / "configs/gpus").string());
  r.file_roots = {".", BEACON_PLAN_SOURCE_DIR};
  return r;
}

absl::StatusOr<GpuProfile> LoadGpuProfile(const std::string& name_or_path, const ShippedRoots& roots) {
  namespace fs = std::filesystem;
  std::vector<std::string> tried;
  std::error_code ec;
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json")) {
    tried.push_back(name_or_path);
  } else {
    for (const std::string& dir : roots.gpu_profile_dirs)
      tried.push_back((fs::path(dir) / (name_or_path + ".json")).string());
  }
  for (const std::string& path : tried) {
    if (!fs::is_regular_file(path, ec)) continue;
    absl::StatusOr<json> j = ReadJsonFile(path);
    if (!j.ok()) return j.status();
    return ParseGpuProfile(*j, path);
  }
  return absl::NotFoundError(
      absl::StrCat("GPU profile '", name_or_path, "' not found (tried ", absl::StrJoin(tried, ", "),
                   "); shipped profiles: ", absl::StrJoin(kShipped, ", "), ", or give a profile file"));
}

std::string FindShippedFile(const std::string& relative, const ShippedRoots& roots) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const std::string& root : roots.file_roots) {
    const fs::path p = root == "." ? fs::path(relative) : fs::path(root) / relative;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

}  // namespace beacon::planner
