#include "eval/policy_grid.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace beacon::eval {

absl::StatusOr<std::vector<PolicySpec>> MakePolicyGrid(const std::vector<std::string>& policies,
                                                       const std::vector<int32_t>& budgets, int32_t interval,
                                                       const std::vector<bool>& beacon_prompt_queries,
                                                       const std::vector<bool>& beacon_bf16_state) {
  if (policies.empty()) return absl::InvalidArgumentError("policies: none given");
  if (budgets.empty()) return absl::InvalidArgumentError("budgets: none given");
  if (beacon_prompt_queries.size() > 2 ||
      (beacon_prompt_queries.size() == 2 && beacon_prompt_queries[0] == beacon_prompt_queries[1])) {
    return absl::InvalidArgumentError("beacon_prompt_queries: a value given twice");
  }
  if (beacon_bf16_state.size() > 2 || (beacon_bf16_state.size() == 2 && beacon_bf16_state[0] == beacon_bf16_state[1])) {
    return absl::InvalidArgumentError("beacon_bf16_state: a value given twice");
  }
  std::vector<PolicySpec> grid;
  for (size_t i = 0; i < policies.size(); ++i) {
    const std::string& p = policies[i];
    absl::StatusOr<KvPolicyOptions> defaults = KvPolicyOptions::DefaultsForName(p);
    if (!defaults.ok()) return absl::InvalidArgumentError(absl::StrCat("policies: ", defaults.status().message()));
    if (!defaults->compresses()) {
      return absl::InvalidArgumentError("policies: 'full' is the reference, not a policy to rate");
    }
    if (std::find(policies.begin(), policies.begin() + i, p) != policies.begin() + i) {
      return absl::InvalidArgumentError(absl::StrCat("policies: '", p, "' given twice"));
    }
    // The variants of this policy: (label, options).
    std::vector<std::pair<std::string, KvPolicyOptions>> variants;
    variants.emplace_back(p, *defaults);
    if (defaults->policy == KvPolicyKind::kBeacon && !beacon_prompt_queries.empty()) {
      variants.clear();
      for (bool on : beacon_prompt_queries) {
        KvPolicyOptions o = *defaults;
        o.beacon_prompt_queries = on;
        variants.emplace_back(absl::StrCat(p, on ? "/pq=on" : "/pq=off"), o);
      }
    }
    if (defaults->policy == KvPolicyKind::kBeacon && !beacon_bf16_state.empty()) {
      std::vector<std::pair<std::string, KvPolicyOptions>> crossed;
      for (const auto& [label, options] : variants) {
        for (bool bf16 : beacon_bf16_state) {
          KvPolicyOptions o = options;
          o.beacon_bf16_state = bf16;
          crossed.emplace_back(absl::StrCat(label, bf16 ? "/state=bf16" : "/state=f32"), o);
        }
      }
      variants = std::move(crossed);
    }
    for (const auto& [label, options] : variants) {
      for (size_t j = 0; j < budgets.size(); ++j) {
        if (std::find(budgets.begin(), budgets.begin() + j, budgets[j]) != budgets.begin() + j) {
          return absl::InvalidArgumentError(absl::StrCat("budgets: ", budgets[j], " given twice"));
        }
        PolicySpec s{label, budgets[j], options};
        s.options.budget = budgets[j];
        s.options.interval = interval;
        if (absl::Status st = s.options.Validate(); !st.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("policy ", label, ", budget ", budgets[j], ": ", st.message()));
        }
        grid.push_back(std::move(s));
      }
    }
  }
  // Twins: "X/state=bf16" at budget b and "X/state=f32" at budget b.
  constexpr absl::string_view kBf16 = "/state=bf16";
  for (PolicySpec& spec : grid) {
    if (!absl::EndsWith(spec.policy, kBf16)) continue;
    const std::string f32 = absl::StrCat(spec.policy.substr(0, spec.policy.size() - kBf16.size()), "/state=f32");
    for (size_t j = 0; j < grid.size(); ++j) {
      if (grid[j].policy == f32 && grid[j].budget == spec.budget) spec.twin = static_cast<int>(j);
    }
  }
  return grid;
}

}  // namespace beacon::eval
