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
#include "kv/policy/kv_policy.h"

namespace beacon {

struct PolicyBenchResult {
  int64_t steps = 0;
  int64_t evictions = 0;
  double decode_s = 0;   // forward passes, including the observe calls
  double observe_s = 0;  // inside ObserveQuery / ObserveAttention
  double evict_s = 0;    // inside evictions (score + select + compact)
  int32_t peak_slots = 0;
  // Per step: observation (the step's ObserveQuery / ObserveAttention time)
  // plus the step's eviction, and the evictions made (summed over the batch).
  PolicyStepStats per_step;
  // Per step: the whole step's wall time (the batch's forward pass, its
  // greedy picks and every sequence's eviction work), what a client's
  // inter-token latency is made of: the p99 / p50 of the issue 34 target.
  PolicyStepStats whole_step;
  double observe_share() const { return observe_s / (decode_s - observe_s); }
  double evict_share() const { return evict_s / (decode_s - observe_s); }
};

// How BenchPolicy runs: one sequence by default; `batch` sequences decode
// in one forward pass per step, each after its own prompt of prompt_len
// tokens, and sequence b with a head start of b * stagger decode steps run
// alone before the timed steps, as if it had arrived that much earlier.
// stagger 0 puts every sequence's evictions on the same step (the worst
// case for a step's latency); interval / batch spreads them as arrivals at
// different times do in serving. (Longer prompts would not: the kept prompt
// moves the bound with it, so the eviction steps stay where they were.)
//
// spread_phase gives each sequence the eviction phase beacon-serve gives a
// request (EvictionSchedule::SpreadPhase of its prompt; --kv-eviction-phase
// spread, the server's default): with stagger 0 that is a burst of requests
// admitted on one step, as serving runs it. Off, every sequence evicts on
// the published schedule (--kv-eviction-phase aligned).
struct PolicyBenchShape {
  int32_t prompt_len = 32;
  int32_t steps = 1024;
  int32_t batch = 1;
  int32_t stagger = 0;
  bool spread_phase = false;
};

// Decodes `steps` greedy tokens for each sequence of `shape` under
// `options`. `policy_pool`: each compressor gets the runtime's CPU pool, as
// in serving; false runs the policy single-threaded (the comparison
// beacon-bench policy --policy-pool both prints).
absl::StatusOr<PolicyBenchResult> BenchPolicy(Runtime* rt, const KvPolicyOptions& options,
                                              const PolicyBenchShape& shape, bool policy_pool = true);

}  // namespace beacon

#endif  // BEACON_BENCH_POLICY_BENCH_H_
