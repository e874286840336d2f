#include "eval/model_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace beacon::eval {
namespace {

// The ModelResult fields, by JSON key, in one place for both directions.
constexpr std::pair<const char*, double ModelResult::*> kResultFields[] = {
    {"kl", &ModelResult::kl},
    {"top1", &ModelResult::top1},
    {"recall", &ModelResult::recall},
    {"kl_post", &ModelResult::kl_post},
    {"top1_post", &ModelResult::top1_post},
    {"recall_post", &ModelResult::recall_post},
    {"agreement", &ModelResult::agreement},
    {"peak_slots", &ModelResult::peak_slots},
    {"evictions", &ModelResult::evictions},
    {"post_steps", &ModelResult::post_steps},
    {"kept_jaccard", &ModelResult::kept_jaccard},
};

nlohmann::json NumberOrNull(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }

std::filesystem::path FileOf(const std::string& dir, const std::string& id) {
  return std::filesystem::path(dir) / (id + ".json");
}

}  // namespace

nlohmann::json PromptSummaryToJson(const PromptSummary& p) {
  nlohmann::json results = nlohmann::json::array();
  for (const ModelResult& r : p.results) {
    nlohmann::json row = {{"policy", r.policy}, {"budget", r.budget}};
    for (const auto& [key, field] : kResultFields) row[key] = NumberOrNull(r.*field);
    results.push_back(std::move(row));
  }
  return {{"id", p.id},
          {"prompt_tokens", p.prompt_tokens},
          {"trace_seconds", p.trace_seconds},
          {"replay_seconds", p.replay_seconds},
          {"reference_mismatches", p.reference_mismatches},
          {"agreement_mismatches", p.agreement_mismatches},
          {"distinct_4grams", p.distinct_4grams},
          {"text", p.text},
          {"results", std::move(results)}};
}

absl::StatusOr<PromptSummary> PromptSummaryFromJson(const nlohmann::json& j) {
  // nlohmann throws on a missing key or a wrong type; name the field instead.
  const char* field = "summary";
  try {
    PromptSummary p;
    field = "id";
    p.id = j.at(field).get<std::string>();
    field = "prompt_tokens";
    p.prompt_tokens = j.at(field).get<int32_t>();
    field = "trace_seconds";
    p.trace_seconds = j.at(field).get<double>();
    field = "replay_seconds";
    p.replay_seconds = j.at(field).get<double>();
    field = "reference_mismatches";
    p.reference_mismatches = j.at(field).get<int32_t>();
    field = "agreement_mismatches";
    p.agreement_mismatches = j.at(field).get<int32_t>();
    field = "distinct_4grams";
    p.distinct_4grams = j.at(field).get<double>();
    field = "text";
    p.text = j.at(field).get<std::string>();
    for (const nlohmann::json& row : j.at("results")) {
      ModelResult r;
      field = "results[].policy";
      r.policy = row.at("policy").get<std::string>();
      field = "results[].budget";
      r.budget = row.at("budget").get<int32_t>();
      for (const auto& [key, member] : kResultFields) {
        field = key;
        if (member == &ModelResult::kept_jaccard && !row.contains(key)) continue;  // added later: NaN
        const nlohmann::json& v = row.at(key);
        r.*member = v.is_null() ? std::nan("") : v.get<double>();
      }
      p.results.push_back(std::move(r));
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint field '", field, "': ", e.what()));
  }
}

absl::Status SaveCheckpoint(const std::string& dir, const nlohmann::json& key, const PromptSummary& p) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  const std::filesystem::path file = FileOf(dir, p.id);
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"key", key}, {"summary", PromptSummaryToJson(p)}}.dump(1) << "\n";
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", tmp.string()));
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot rename ", tmp.string(), ": ", ec.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<PromptSummary>> LoadCheckpoint(const std::string& dir, const std::string& id,
                                                            const nlohmann::json& key) {
  const std::filesystem::path file = FileOf(dir, id);
  std::ifstream in(file);
  if (!in) return std::optional<PromptSummary>();
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file.string(), ": not a JSON checkpoint"));
  }
  if (!j.contains("key") || j["key"] != key) return std::optional<PromptSummary>();
  if (!j.contains("summary")) return absl::InvalidArgumentError(absl::StrCat(file.string(), ": no summary"));
  absl::StatusOr<PromptSummary> p = PromptSummaryFromJson(j["summary"]);
  if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat(file.string(), ": ", p.status().message()));
  if (p->id != id) return absl::InvalidArgumentError(absl::StrCat(file.string(), ": holds prompt '", p->id, "'"));
  return std::optional<PromptSummary>(std::move(*p));
}

}  // namespace beacon::eval
