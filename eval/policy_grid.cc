#include "eval/policy_grid.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace beacon::eval {

absl::StatusOr<std::vector<PolicySpec>> MakePolicyGrid(const std::vector<std::string>& policies,
                                                       const std::vector<int32_t>& budgets, int32_t interval,
                                                       const std::vector<bool>& beacon_prompt_queries) {
  if (policies.empty()) return absl::InvalidArgumentError("policies: none given");
  if (budgets.empty()) return absl::InvalidArgumentError("budgets: none given");
  if (beacon_prompt_queries.size() > 2 ||
      (beacon_prompt_queries.size() == 2 && beacon_prompt_queries[0] == beacon_prompt_queries[1])) {
    return absl::InvalidArgumentError("beacon_prompt_queries: a value given twice");
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
    if (defaults->policy == KvPolicyKind::kBeacon && !beacon_prompt_queries.empty()) {
      for (bool on : beacon_prompt_queries) {
        KvPolicyOptions o = *defaults;
        o.beacon_prompt_queries = on;
        variants.emplace_back(absl::StrCat(p, on ? "/pq=on" : "/pq=off"), o);
      }
    } else {
      variants.emplace_back(p, *defaults);
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
  return grid;
}

}  // namespace beacon::eval
