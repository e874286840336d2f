#include "kv/serving/kv_policy_limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

std::string Join(const std::vector<KvPolicyKind>& v) {
  std::string out;
  for (KvPolicyKind p : v) out += (out.empty() ? "" : ", ") + std::string(KvPolicyName(p));
  return out;
}

// Whether a request may name `policy` (the operator's default always may).
bool Allowed(const KvPolicyOptions& operator_default, const KvPolicyLimits& limits, KvPolicyKind policy) {
  if (policy == operator_default.policy) return true;
  const std::vector<KvPolicyKind>& allowed = limits.allowed_policies;
  const bool listed = allowed.empty() || std::find(allowed.begin(), allowed.end(), policy) != allowed.end();
  return listed && (policy != KvPolicyKind::kFull || limits.allow_full);
}

}  // namespace

absl::Status KvPolicyLimits::Validate() const {
  if (min_budget < 1 || max_budget < min_budget) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv budget limits: need 1 <= min (", min_budget, ") <= max (", max_budget, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<KvPolicyOptions> ResolveRequestKvOptions(const KvPolicyOptions& operator_default,
                                                        const KvPolicyLimits& limits,
                                                        const std::optional<std::string>& policy,
                                                        const std::optional<int32_t>& budget) {
  KvPolicyOptions o = operator_default;
  absl::StatusOr<KvPolicyKind> kind = policy.has_value() ? ParseKvPolicy(*policy) : operator_default.policy;
  if (!kind.ok()) return kind.status();  // names the unknown policy
  if (*kind != operator_default.policy) {
    o = KvPolicyOptions::DefaultsFor(*kind);
    o.budget = operator_default.budget;
    o.interval = operator_default.interval;
    o.sinks = operator_default.sinks;
    o.window = operator_default.window;
    o.keep_prompt = operator_default.keep_prompt;
    if (!Allowed(operator_default, limits, *kind)) {
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
