#include "loadtest/config.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace beacon::loadtest {

absl::Status ApplyModelInfo(const v1::ModelInfo& info, Config* c) {
  // The OpenAI backends learn no KV policies: the server judges each request.
  const bool knows_kv = c->client.backend == Backend::kGrpc;
  for (const KvChoice& k : knows_kv ? c->workload.kv_mix : std::vector<KvChoice>{}) {
    if (k.policy != "default") {
      // The server's registry is the list of policies (kv/policy/policy_registry.h).
      bool known = false, allowed = false;
      std::string served;
      for (const v1::KvPolicyInfo& p : info.kv_policies()) {
        known |= p.name() == k.policy;
        allowed |= p.name() == k.policy && p.allowed();
        if (p.allowed()) absl::StrAppend(&served, served.empty() ? "" : ", ", p.name());
      }
      if (!known) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown KV policy '", k.policy, "' (the server serves: default, ", served, ")"));
      }
      if (!allowed) {
        return absl::InvalidArgumentError(
            absl::StrCat("KV policy '", k.policy, "' is not allowed by the server (see --kv-allowed-policies)"));
      }
    }
    if (k.budget > 0 && (k.budget < info.kv_budget_min() || k.budget > info.kv_budget_max())) {
      return absl::InvalidArgumentError(absl::StrCat("KV budget ", k.budget, " of '", k.Label(),
                                                     "' is outside the server's range [", info.kv_budget_min(), ", ",
                                                     info.kv_budget_max(), "]"));
    }
  }
  const LengthDist& p = c->workload.prompt_len;
  if (c->workload.prompts.empty() && p.kind() == LengthDist::Kind::kFixed && info.context_length() > 0 &&
      p.Mean() >= info.context_length()) {
    return absl::InvalidArgumentError(absl::StrCat("--prompt-len ", p.ToString(), " does not fit the model's context (",
                                                   info.context_length(), " tokens)"));
  }
  if (info.vocab_size() > 0) {
    c->workload.token_max = std::min(c->workload.token_max, info.vocab_size());
    c->workload.token_min = std::min(c->workload.token_min, c->workload.token_max / 2);
  }
  return absl::OkStatus();
}

absl::Status ApplyReferenceLengths(StreamClient* client, Config* c) {
  if (!c->reference_output_len) return absl::OkStatus();
  for (size_t i = 0; i < c->workload.prompts.size(); ++i) {
    PromptEntry& e = c->workload.prompts[i];
    absl::StatusOr<int32_t> n = client->CountTokens(e.reference);
    if (!n.ok()) {
      return absl::Status(n.status().code(), absl::StrCat("--reference-output-len: tokenizing entry ", i,
                                                          "'s reference answer: ", n.status().message()));
    }
    e.max_tokens = std::max(*n, 1);
  }
  return absl::OkStatus();
}

}  // namespace beacon::loadtest
