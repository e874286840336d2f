// `beacon-bench growth`: how decode speed changes as one sequence's context
// grows. Under the full cache every step attends to every earlier token, so
// tokens/s falls as the sequence gets longer; under a compressing policy the
// cache is bounded (budget + interval) and the speed should stay flat, which
// is the cost argument for compressing long chains of thought. Each sample is
// the throughput of one window of decode steps, eviction and observation
// included: what a client of that one sequence would see.
#ifndef BEACON_BENCH_GROWTH_BENCH_H_
#define BEACON_BENCH_GROWTH_BENCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime.h"
#include "kv/policy/kv_policy.h"

namespace beacon {

struct GrowthSample {
  int32_t context = 0;       // tokens in the sequence at the window's end
  int32_t cached_slots = 0;  // KV slots held then (per head)
  double tokens_per_s = 0;   // over the window
};

// Decodes greedily from a `prompt_len`-token prompt until the sequence holds
// `total_tokens` tokens, one sample per `window` decode steps.
// INVALID_ARGUMENT when total_tokens exceeds the model's context or does not
// leave one window after the prompt.
absl::StatusOr<std::vector<GrowthSample>> BenchGrowth(Runtime* rt, const KvPolicyOptions& options, int32_t prompt_len,
                                                      int32_t total_tokens, int32_t window);

}  // namespace beacon

#endif  // BEACON_BENCH_GROWTH_BENCH_H_
