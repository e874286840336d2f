#include "eval/policy_grid.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace beacon::eval {

absl::StatusOr<std::vector<PolicySpec>> MakePolicyGrid(const std::vector<std::string>& policies,
                                                       const std::vector<int32_t>& budgets, int32_t interval) {
  if (policies.empty()) return absl::InvalidArgumentError("policies: none given");
  if (budgets.empty()) return absl::InvalidArgumentError("budgets: none given");
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
    for (size_t j = 0; j < budgets.size(); ++j) {
      if (std::find(budgets.begin(), budgets.begin() + j, budgets[j]) != budgets.begin() + j) {
        return absl::InvalidArgumentError(absl::StrCat("budgets: ", budgets[j], " given twice"));
      }
      PolicySpec s{p, budgets[j], *defaults};
      s.options.budget = budgets[j];
      s.options.interval = interval;
      if (absl::Status st = s.options.Validate(); !st.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("policy ", p, ", budget ", budgets[j], ": ", st.message()));
      }
      grid.push_back(std::move(s));
    }
  }
  return grid;
}

}  // namespace beacon::eval
