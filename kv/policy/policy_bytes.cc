#include "kv/policy/policy_bytes.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kv/policy/policy_registry.h"

namespace beacon {
namespace {

// `rows` query rows per head and layer (of `heads` heads), at `elem` bytes
// an element, and their int32 positions (one per row and layer: the heads
// share them).
int64_t QueryRows(const PolicyModelInfo& m, int heads, int64_t rows, int elem) {
  return rows * m.n_layers * (static_cast<int64_t>(heads) * m.head_dim * elem + 4);
}

}  // namespace

int64_t KvBytesPerSlot(const PolicyModelInfo& m, int64_t row_bytes) {
  return static_cast<int64_t>(m.n_layers) * m.n_kv_heads * (2 * row_bytes + 4);
}

int64_t BeaconStateBytes(const KvPolicyOptions& o, const PolicyModelInfo& m, int32_t) {
  const int heads = o.beacon_group_queries ? m.n_kv_heads : m.n_heads;  // one state row per KV head when shared
  return QueryRows(m, heads, static_cast<int64_t>(o.recent_queries) + o.fps_bound, o.beacon_bf16_state ? 2 : 4);
}

int64_t QueryRingStateBytes(const KvPolicyOptions& o, const PolicyModelInfo& m, int32_t) {
  return QueryRows(m, m.n_heads, o.recent_queries, 2);
}

int64_t AccumulatorStateBytes(const KvPolicyOptions&, const PolicyModelInfo& m, int32_t slots) {
  return static_cast<int64_t>(slots) * m.n_layers * m.n_kv_heads * 4;
}

int64_t PolicyStateBytes(const KvPolicyOptions& o, const PolicyModelInfo& m, int32_t slots) {
  const KvPolicySpec& spec = KvPolicySpecOf(o.policy);
  return spec.state_bytes == nullptr ? 0 : spec.state_bytes(o, m, slots);
}

absl::StatusOr<int32_t> BudgetForBytes(const KvPolicyOptions& o, const PolicyModelInfo& m, int64_t row_bytes,
                                       int64_t bytes, int32_t min_budget) {
  const int64_t fixed = PolicyStateBytes(o, m, 0);
  const int64_t per_slot = KvBytesPerSlot(m, row_bytes) + PolicyStateBytes(o, m, 1) - fixed;
  const int64_t slots = bytes > fixed && per_slot > 0 ? (bytes - fixed) / per_slot : 0;
  if (slots < min_budget) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv_budget_bytes: ", bytes, " bytes leave ", slots, " KV slots for policy ", std::string(o.policy_name()),
        " (its own state takes ", fixed, " bytes, each slot ", per_slot, "); at least ", min_budget, " slots need ",
        fixed + static_cast<int64_t>(min_budget) * per_slot, " bytes"));
  }
  return static_cast<int32_t>(std::min<int64_t>(slots, std::numeric_limits<int32_t>::max()));
}

}  // namespace beacon
