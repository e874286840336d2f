// Per-request KV options within the limits an operator sets.
//
// The operator configures a default policy (with its budget, interval and
// protection settings) and what a request may ask for: which policies, and a
// budget range. A request may name a policy and a budget; everything else
// comes from the operator's default (a request that switches policy gets
// that policy's published scoring defaults, KvPolicyOptions::DefaultsFor,
// with the operator's interval, sinks, window and keep_prompt).
#ifndef BEACON_KV_SERVING_KV_POLICY_LIMITS_H_
#define BEACON_KV_SERVING_KV_POLICY_LIMITS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kv/policy/kv_policy.h"

namespace beacon {

struct KvPolicyLimits {
  // Policies a request may choose; empty = every policy.
  std::vector<KvPolicyKind> allowed_policies;
  int32_t min_budget = 32;  // a request's budget must lie in [min, max]
  int32_t max_budget = 1 << 20;
  // Whether a request may choose `full` (no compression) even when the
  // operator's default compresses: it costs prompt + max_tokens of KV.
  bool allow_full = true;

  // INVALID_ARGUMENT naming the field when inconsistent.
  absl::Status Validate() const;
};

// The options one request runs with; `policy` is the request's name for it,
// parsed here. INVALID_ARGUMENT naming the request field (kv_policy,
// kv_budget) and the allowed values when unknown or out of limits.
absl::StatusOr<KvPolicyOptions> ResolveRequestKvOptions(const KvPolicyOptions& operator_default,
                                                        const KvPolicyLimits& limits,
                                                        const std::optional<std::string>& policy,
                                                        const std::optional<int32_t>& budget);

}  // namespace beacon

#endif  // BEACON_KV_SERVING_KV_POLICY_LIMITS_H_
