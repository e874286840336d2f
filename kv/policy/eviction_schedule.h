// The eviction arithmetic of one sequence, in one place: the bound it evicts
// down to, when a decode step triggers an eviction, when a recompute chunk
// does, and the peak slot count admission reserves. SequenceCompressor (the
// real eviction), Generation (recompute after preemption) and the scheduler's
// SimEngine (tests and the capacity planner) all ask this type, so the
// planner's footprints cannot drift from what the engine does.
//
// The rules (docs/design.md, "Eviction schedule"):
//   bound       = kept prompt + budget when keep_prompt, budget otherwise;
//   decode step = evicts when the cache holds more than the bound and
//                 either `interval` steps have passed since it last went
//                 above the bound (its first time, or the last eviction) or
//                 it reached bound + interval; for plain decoding both mean
//                 every eviction drops `interval` slots, the first included;
//                 a request's eviction phase p (KvPolicyOptions::
//                 eviction_phase, in [0, interval)) brings only the first
//                 eviction p steps early, so requests that start together
//                 evict on different steps (SpreadPhase);
//   recompute   = after every recompute chunk that ends past the prompt, a
//                 cache above the bound evicts to it, so a recomputing
//                 sequence holds at most max(prompt, bound) + one chunk;
//   peak        = min(prompt + max_tokens, max(prompt + 1, bound + interval))
//                 under a compressing policy, prompt + max_tokens otherwise.
//
// A value type: copyable, no allocation. Thread ownership: its sequence's.
#ifndef BEACON_KV_POLICY_EVICTION_SCHEDULE_H_
#define BEACON_KV_POLICY_EVICTION_SCHEDULE_H_

#include <cstdint>
#include <span>

#include "kv/policy/kv_policy.h"

namespace beacon {

class EvictionSchedule {
 public:
  EvictionSchedule(const KvPolicyOptions& options, int32_t prompt_len);

  // The peak slot count of a sequence with this prompt and output length:
  // what admission must reserve.
  static int64_t PeakSlots(const KvPolicyOptions& options, int32_t prompt_len, int32_t max_tokens);

  // The eviction phase of sample `sample_index` of `samples` with this
  // prompt, in [0, interval): a hash of the prompt's token ids, plus the
  // samples spread evenly over the interval. A function of the request
  // alone, so a request's output never depends on its batchmates, while a
  // burst of requests (or the n samples of one) that would all evict on
  // the same step spreads its evictions over the interval (issue 34: 16
  // sequences evicting on one step made that step 2.2x the median).
  static int32_t SpreadPhase(std::span<const int32_t> prompt, int32_t sample_index, int32_t samples, int32_t interval);

  bool compresses() const { return compresses_; }
  // Slots kept after an eviction.
  int32_t bound() const { return bound_; }

  // Counts one decode step that left `slots` cached; true when the sequence
  // must evict to bound() now.
  bool OnDecodeStep(int32_t slots);
  // True when a recompute that has replayed `replayed` tokens (of which the
  // first `prompt_len` are the prompt) and holds `slots` must evict now.
  bool EvictsAfterRecomputeChunk(int32_t replayed, int32_t slots) const;
  // The sequence evicted: the interval counts from here.
  void OnEvicted() {
    steps_above_bound_ = 0;
    first_due_ = interval_;
  }

 private:
  bool compresses_;
  int32_t prompt_len_;
  int32_t bound_;
  int32_t interval_;
  int32_t steps_above_bound_ = 0;  // decode steps since the cache last went above the bound
  int32_t first_due_;              // steps above the bound that trigger: interval - phase until the first eviction
};

}  // namespace beacon

#endif  // BEACON_KV_POLICY_EVICTION_SCHEDULE_H_
