#include "kv/kv_policy_limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

absl::Status KvPolicyLimits::Validate() const {
  if (min_budget < 1 || max_budget < min_budget) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv budget limits: need 1 <= min (", min_budget, ") <= max (", max_budget, ")"));
  }
  for (const std::string& p : allowed_policies) {
    KvPolicyOptions o = KvPolicyOptions::DefaultsFor(p);
    if (absl::Status s = o.Validate(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("allowed kv policies: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<KvPolicyOptions> ResolveRequestKvOptions(const KvPolicyOptions& operator_default,
                                                        const KvPolicyLimits& limits,
                                                        const std::optional<std::string>& policy,
                                                        const std::optional<int32_t>& budget) {
  KvPolicyOptions o = operator_default;
  if (policy.has_value() && *policy != operator_default.policy) {
    o = KvPolicyOptions::DefaultsFor(*policy);
    if (absl::Status s = o.Validate(); !s.ok()) return s;  // names the unknown policy
    o.budget = operator_default.budget;
    o.interval = operator_default.interval;
    o.sinks = operator_default.sinks;
    o.window = operator_default.window;
    o.keep_prompt = operator_default.keep_prompt;
    const bool listed = limits.allowed_policies.empty() ||
                        std::find(limits.allowed_policies.begin(), limits.allowed_policies.end(), *policy) !=
                            limits.allowed_policies.end();
    if (!listed || (*policy == "full" && !limits.allow_full)) {
      std::string allowed = limits.allowed_policies.empty() ? "every policy but full" : Join(limits.allowed_policies);
      return absl::InvalidArgumentError(
          absl::StrCat("kv_policy: '", *policy, "' is not allowed on this server (allowed: ", allowed, ")"));
    }
  }
  if (budget.has_value()) {
    if (*budget < limits.min_budget || *budget > limits.max_budget) {
      return absl::InvalidArgumentError(absl::StrCat("kv_budget: ", *budget, " is outside the server's range [",
                                                     limits.min_budget, ", ", limits.max_budget, "]"));
    }
    o.budget = *budget;
  }
  if (absl::Status s = o.Validate(); !s.ok()) return s;
  return o;
}

}  // namespace beacon
