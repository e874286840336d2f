#include "kv/eviction_schedule.h"

#include <algorithm>

namespace beacon {
namespace {

int64_t Bound(const KvPolicyOptions& o, int32_t prompt_len) {
  return o.keep_prompt ? int64_t{prompt_len} + o.budget : int64_t{o.budget};
}

}  // namespace

EvictionSchedule::EvictionSchedule(const KvPolicyOptions& options, int32_t prompt_len)
    : compresses_(options.compresses()),
      prompt_len_(prompt_len),
      bound_(static_cast<int32_t>(Bound(options, prompt_len))),
      interval_(options.interval) {}

int64_t EvictionSchedule::PeakSlots(const KvPolicyOptions& o, int32_t prompt_len, int32_t max_tokens) {
  const int64_t total = static_cast<int64_t>(prompt_len) + max_tokens;
  if (!o.compresses()) return total;
  return std::min(total, std::max<int64_t>(prompt_len + 1, Bound(o, prompt_len) + o.interval));
}

bool EvictionSchedule::OnDecodeStep(int32_t slots) {
  if (!compresses_) return false;
  if (slots <= bound_) {
    // Not above the bound yet: the interval starts when the cache first
    // exceeds it, so the first eviction drops `interval` slots, as every
    // later one does, instead of scoring the whole cache to drop one.
    steps_above_bound_ = 0;
    return false;
  }
  ++steps_above_bound_;
  return steps_above_bound_ >= interval_ || slots >= bound_ + interval_;
}

bool EvictionSchedule::EvictsAfterRecomputeChunk(int32_t replayed, int32_t slots) const {
  return compresses_ && replayed > prompt_len_ && slots > bound_;
}

}  // namespace beacon
