#include "loadtest/dataset.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace beacon::loadtest {
namespace {

using json = nlohmann::json;

bool IsHuman(const std::string& from) { return from == "human" || from == "user"; }
bool IsSystem(const std::string& from) { return from == "system"; }

}  // namespace

absl::StatusOr<DatasetSpec> ParseDatasetSpec(absl::string_view spec) {
  const size_t colon = spec.find(':');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dataset: ", why, " in '", spec, "' (expected sharegpt:FILE, custom:FILE or jsonl:FILE)"));
  };
  if (colon == absl::string_view::npos) return bad("no KIND:");
  const absl::string_view kind = spec.substr(0, colon);
  DatasetSpec out;
  out.path = std::string(spec.substr(colon + 1));
  if (out.path.empty()) return bad("no FILE");
  if (kind == "sharegpt") {
    out.kind = DatasetKind::kShareGpt;
  } else if (kind == "custom") {
    out.kind = DatasetKind::kCustom;
  } else if (kind == "jsonl") {
    out.kind = DatasetKind::kJsonl;
  } else {
    return bad(absl::StrCat("unknown kind '", kind, "'"));
  }
  return out;
}

absl::StatusOr<std::vector<PromptEntry>> LoadShareGpt(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--dataset: cannot read ", path));
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError(absl::StrCat("--dataset: ", path, " is not JSON"));
  if (!doc.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dataset: ", path, ": a ShareGPT file is a JSON list of {\"conversations\": [...]}"));
  }
  std::vector<PromptEntry> out;
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& e = doc[i];
    auto bad = [&](const std::string& field, absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("--dataset: ", path, ": entry ", i, ": ", field, " ", why));
    };
    if (!e.is_object()) return bad("", "is not an object");
    const char* key = e.contains("conversations") ? "conversations" : "conversation";
    if (!e.contains(key)) return bad("\"conversations\"", "is missing");
    const json& turns = e[key];
    if (!turns.is_array()) return bad(key, "must be a list of {\"from\", \"value\"} turns");
    std::vector<std::pair<std::string, std::string>> t;
    for (size_t k = 0; k < turns.size(); ++k) {
      const std::string where = absl::StrCat(key, "[", k, "]");
      if (!turns[k].is_object()) return bad(where, "is not an object");
      if (!turns[k].contains("from") || !turns[k]["from"].is_string()) return bad(where + ".from", "must be a string");
      if (!turns[k].contains("value") || !turns[k]["value"].is_string()) {
        return bad(where + ".value", "must be a string");
      }
      t.emplace_back(turns[k]["from"].get<std::string>(), turns[k]["value"].get<std::string>());
    }
    size_t h = 0;
    while (h < t.size() && IsSystem(t[h].first)) ++h;
    if (h + 1 >= t.size() || !IsHuman(t[h].first) || t[h].second.empty()) continue;  // no prompt and answer
    PromptEntry p;
    p.text = t[h].second;
    p.reference = t[h + 1].second;
    out.push_back(std::move(p));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dataset: ", path, " has no conversation with a human turn followed by an answer"));
  }
  return out;
}

absl::StatusOr<std::vector<PromptEntry>> LoadCustomJsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--dataset: cannot read ", path));
  std::vector<PromptEntry> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("--dataset: ", path, ":", n, ": ", why));
    };
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    if (!j.contains("prompt") || !j["prompt"].is_string()) return bad("\"prompt\" must be a string");
    PromptEntry e;
    e.text = j["prompt"].get<std::string>();
    if (j.contains("output_tokens") && !j["output_tokens"].is_null()) {
      const json& o = j["output_tokens"];
      if (!o.is_number_integer() || o.get<int64_t>() < 1 || o.get<int64_t>() > INT32_MAX) {
        return bad("\"output_tokens\" must be a positive integer");
      }
      e.max_tokens = o.get<int32_t>();
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--dataset: ", path, " has no prompts"));
  return out;
}

absl::StatusOr<std::vector<PromptEntry>> LoadDataset(const DatasetSpec& spec) {
  switch (spec.kind) {
    case DatasetKind::kShareGpt: return LoadShareGpt(spec.path);
    case DatasetKind::kCustom: return LoadCustomJsonl(spec.path);
    case DatasetKind::kJsonl: break;
  }
  return LoadPromptsJsonl(spec.path);
}

absl::StatusOr<std::vector<PromptEntry>> SampleDataset(std::vector<PromptEntry> entries, int64_t n, uint64_t seed) {
  if (n == 0) return entries;
  if (n < 0 || static_cast<size_t>(n) > entries.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dataset-sample ", n, ": the dataset has ", entries.size(), " usable entries"));
  }
  // Fisher-Yates with our own draws: std::shuffle's algorithm differs between
  // standard libraries, which would change the subset a seed names.
  std::mt19937_64 rng(seed ^ 0xD1B54A32D192ED03ULL);
  for (size_t i = entries.size() - 1; i > 0; --i) {
    const size_t j = static_cast<size_t>(rng() % (i + 1));
    std::swap(entries[i], entries[j]);
  }
  entries.resize(static_cast<size_t>(n));
  return entries;
}

}  // namespace beacon::loadtest
