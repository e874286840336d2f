// The (policy, budget) configurations an evaluation rates, each with the
// options every tool uses for it: the policy's published defaults
// (KvPolicyOptions::DefaultsFor; docs/design.md, "Published settings and
// numbers") with only the budget and the eviction interval set, so that no
// policy is tuned and the others not.
#ifndef BEACON_EVAL_POLICY_GRID_H_
#define BEACON_EVAL_POLICY_GRID_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kv/policy/kv_policy.h"

namespace beacon::eval {

struct PolicySpec {
  std::string policy;
  int32_t budget = 0;
  KvPolicyOptions options;
  // The spec whose kept positions this one's are compared with (the
  // replay's kept_jaccard), or -1: a "/state=bf16" variant is paired with
  // the "/state=f32" variant of the same budget and prompt-query setting.
  int twin = -1;
};

// Policies outer, budgets inner, in the given orders. INVALID_ARGUMENT for
// an empty list, "full" (the reference every policy is rated against), an
// unknown policy, a duplicate, or a budget the options reject (naming it).
// beacon_prompt_queries: empty, beacon runs with its default
// (KvPolicyOptions::beacon_prompt_queries) as "beacon"; else once per value,
// in order, as "beacon/pq=on" or "beacon/pq=off" (INVALID_ARGUMENT for a
// value given twice). beacon_bf16_state likewise: empty, the default; else
// once per value as ".../state=bf16" or ".../state=f32" (crossed with the
// prompt-query variants), a bf16 variant twinned with its f32 one.
absl::StatusOr<std::vector<PolicySpec>> MakePolicyGrid(const std::vector<std::string>& policies,
                                                       const std::vector<int32_t>& budgets, int32_t interval,
                                                       const std::vector<bool>& beacon_prompt_queries = {},
                                                       const std::vector<bool>& beacon_bf16_state = {});

}  // namespace beacon::eval

#endif  // BEACON_EVAL_POLICY_GRID_H_
