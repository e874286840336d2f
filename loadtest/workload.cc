#include "loadtest/workload.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace beacon::loadtest {

std::string KvChoice::Label() const { return budget > 0 ? absl::StrCat(policy, "@", budget) : policy; }

absl::StatusOr<std::vector<KvChoice>> ParseKvMix(absl::string_view spec, absl::string_view flag) {
  std::vector<KvChoice> out;
  for (absl::string_view entry : absl::StrSplit(spec, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", why, " in '", entry, "' (expected POLICY[@BUDGET][:WEIGHT], comma-separated)"));
    };
    if (entry.empty()) return bad("empty entry");
    KvChoice c;
    absl::string_view rest = entry;
    if (size_t colon = rest.find(':'); colon != absl::string_view::npos) {
      if (!absl::SimpleAtoi(rest.substr(colon + 1), &c.weight) || c.weight < 1) {
        return bad(absl::StrCat("weight '", rest.substr(colon + 1), "' is not an integer >= 1"));
      }
      rest = rest.substr(0, colon);
    }
    if (size_t at = rest.find('@'); at != absl::string_view::npos) {
      if (!absl::SimpleAtoi(rest.substr(at + 1), &c.budget) || c.budget < 1) {
        return bad(absl::StrCat("budget '", rest.substr(at + 1), "' is not an integer >= 1"));
      }
      rest = rest.substr(0, at);
    }
    c.policy = std::string(rest);
    // Whether the server knows the name is the server's to say (ApplyModelInfo
    // checks it against GetModelInfo's policies): here only its form.
    const bool name_ok = !c.policy.empty() && std::all_of(c.policy.begin(), c.policy.end(), [](char ch) {
      return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    });
    if (!name_ok) return bad(absl::StrCat("'", c.policy, "' is not a KV policy name (lowercase letters, digits, _ -)"));
    if (c.policy == "full" && c.budget > 0) return bad("policy 'full' takes no budget");
    out.push_back(std::move(c));
  }
  return out;
}

absl::StatusOr<std::vector<PromptEntry>> LoadPromptsJsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--prompts: cannot read ", path));
  std::vector<PromptEntry> out;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("--prompts: ", path, ":", line_no, ": ", why));
    };
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    PromptEntry e;
    if (j.contains("prompt")) {
      if (!j["prompt"].is_string() || j["prompt"].get<std::string>().empty()) {
        return bad("\"prompt\" must be a non-empty string");
      }
      e.text = j["prompt"].get<std::string>();
    } else if (j.contains("messages")) {
      if (!j["messages"].is_array() || j["messages"].empty()) return bad("\"messages\" must be a non-empty array");
      for (const nlohmann::json& m : j["messages"]) {
        if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
            !m["content"].is_string()) {
          return bad("each message needs string \"role\" and \"content\"");
        }
        e.chat.emplace_back(m["role"].get<std::string>(), m["content"].get<std::string>());
      }
    } else {
      return bad("needs \"prompt\" or \"messages\"");
    }
    if (j.contains("max_tokens")) {
      if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1 ||
          j["max_tokens"].get<int64_t>() > INT32_MAX) {
        return bad("\"max_tokens\" must be a positive integer");
      }
      e.max_tokens = j["max_tokens"].get<int32_t>();
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--prompts: ", path, " has no prompts"));
  return out;
}

Workload::Workload(WorkloadOptions options)
    : options_(std::move(options)), rng_(options_.seed), kv_credit_(options_.kv_mix.size(), 0) {}

const KvChoice& Workload::NextKv() {
  // Smooth weighted round-robin (nginx): every choice gains its weight, the
  // richest is picked and pays the total. Exact proportions over each cycle
  // of sum(weights) requests, evenly interleaved.
  int64_t total = 0;
  size_t best = 0;
  for (size_t i = 0; i < kv_credit_.size(); ++i) {
    kv_credit_[i] += options_.kv_mix[i].weight;
    total += options_.kv_mix[i].weight;
    if (kv_credit_[i] > kv_credit_[best]) best = i;
  }
  kv_credit_[best] -= total;
  return options_.kv_mix[best];
}

RequestSpec Workload::Next() {
  RequestSpec r;
  r.index = next_index_++;
  r.ignore_eos = options_.ignore_eos;
  r.temperature = options_.temperature;
  r.seed = options_.seed + static_cast<uint64_t>(r.index);
  if (!options_.prompts.empty()) {
    const PromptEntry& e = options_.prompts[static_cast<size_t>(r.index) % options_.prompts.size()];
    r.text = e.text;
    r.chat = e.chat;
    r.max_tokens = e.max_tokens > 0 ? e.max_tokens : options_.output_len.Sample(rng_);
  } else {
    const int32_t n = options_.prompt_len.Sample(rng_);
    std::uniform_int_distribution<int32_t> id(options_.token_min, options_.token_max - 1);
    r.tokens.resize(n);
    for (int32_t& t : r.tokens) t = id(rng_);
    r.max_tokens = options_.output_len.Sample(rng_);
  }
  r.kv = NextKv();
  return r;
}

}  // namespace beacon::loadtest
