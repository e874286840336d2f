// `beacon-bench policy`: what a KV policy costs on top of decoding, on a real
// model: per decode step (observing queries and attention: the query ring and
// FPS buffer for beacon) and per eviction (scoring, selection, compaction),
// each as a share of the decode step time measured in the same run; and the
// policy's work per step in the steady state after the first eviction (p50,
// p99, max: policy_step_stats.h says why not only the mean).
#ifndef BEACON_BENCH_POLICY_BENCH_H_
#define BEACON_BENCH_POLICY_BENCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "bench/policy_step_stats.h"
#include "engine/runtime.h"
#include "kv/kv_policy.h"

namespace beacon {

struct PolicyBenchResult {
  int64_t steps = 0;
  int64_t evictions = 0;
  double decode_s = 0;   // forward passes, including the observe calls
  double observe_s = 0;  // inside ObserveQuery / ObserveAttention
  double evict_s = 0;    // inside evictions (score + select + compact)
  int32_t peak_slots = 0;
  // Per step: observation (the step's ObserveQuery / ObserveAttention time)
  // plus the step's eviction, and the evictions made.
  PolicyStepStats per_step;
  double observe_share() const { return observe_s / (decode_s - observe_s); }
  double evict_share() const { return evict_s / (decode_s - observe_s); }
};

// Decodes `steps` greedy tokens after a `prompt_len`-token prompt for one
// sequence under `options`. `policy_pool`: the compressor gets the
// runtime's CPU pool, as in serving; false runs the policy single-threaded
// (the comparison beacon-bench policy --policy-pool both prints).
absl::StatusOr<PolicyBenchResult> BenchPolicy(Runtime* rt, const KvPolicyOptions& options, int32_t prompt_len,
                                              int32_t steps, bool policy_pool = true);

}  // namespace beacon

#endif  // BEACON_BENCH_POLICY_BENCH_H_
