// What a sequence's KV memory holds in bytes, policy state included (issue
// 45): so that policies are compared at equal memory, not only at equal slot
// counts, and a budget can be given in bytes.
//
// Counted, per sequence:
//   - each KV slot: K and V rows of every layer and KV head as the cache
//     stores them (`row_bytes` each: 256 for a bf16 row of 128), plus the
//     slot's int32 position (KvBytesPerSlot);
//   - the policy's own state (its registry row's state_bytes):
//       beacon: the recent ring (R queries) and the FPS buffers at their
//         bound (U points) of every query head and layer, at 2 bytes an
//         element with beacon_bf16_state (what the CUDA state stores) and 4
//         without, plus the ring's int32 positions; with
//         beacon_group_queries, of every KV head instead (the group's mean);
//       rkv, snapkv: the ring of R recent queries of every query head and
//         layer in bf16, plus positions;
//       h2o: one f32 accumulator per slot, KV head and layer;
//       streaming, random, full: nothing.
//   Query rows are counted in bf16 (2 bytes an element), as the CUDA
//   BeaconKV state stores them and as a device implementation of any of
//   these policies would; the CPU policies keep f32 copies for convenience,
//   which are not what the methods need. The
//   engine's scratch (one eviction's scores) is shared by all sequences and
//   not counted.
#ifndef BEACON_KV_POLICY_POLICY_BYTES_H_
#define BEACON_KV_POLICY_POLICY_BYTES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "kv/policy/kv_policy.h"

namespace beacon {

// Bytes of one KV slot (every layer and KV head): K, V and the position;
// `row_bytes`: one head's K (or V) row as the cache stores it.
int64_t KvBytesPerSlot(const PolicyModelInfo& m, int64_t row_bytes);

// Bytes of `o`'s policy state for one sequence holding `slots` slots per KV head.
int64_t PolicyStateBytes(const KvPolicyOptions& o, const PolicyModelInfo& m, int32_t slots);

// The slot budget a policy gets when a sequence's budget is `bytes`: the
// budget's slots and the policy's state at that many slots fit in `bytes`
// (the kept prompt's slots are outside it, as `budget` counts generated
// tokens when keep_prompt). INVALID_ARGUMENT naming kv_budget_bytes when the
// state alone leaves fewer than `min_budget` slots.
absl::StatusOr<int32_t> BudgetForBytes(const KvPolicyOptions& o, const PolicyModelInfo& m, int64_t row_bytes,
                                       int64_t bytes, int32_t min_budget);

// The registry rows' state_bytes (policy_registry.cc).
int64_t BeaconStateBytes(const KvPolicyOptions& o, const PolicyModelInfo& m, int32_t slots);
int64_t QueryRingStateBytes(const KvPolicyOptions& o, const PolicyModelInfo& m, int32_t slots);
int64_t AccumulatorStateBytes(const KvPolicyOptions& o, const PolicyModelInfo& m, int32_t slots);

}  // namespace beacon

#endif  // BEACON_KV_POLICY_POLICY_BYTES_H_
