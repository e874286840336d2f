#include "kv/policy/eviction_schedule.h"

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
      interval_(options.interval),
      first_due_(std::max(1, options.interval - options.eviction_phase)) {}

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
  return steps_above_bound_ >= first_due_ || slots >= bound_ + interval_;
}

int32_t EvictionSchedule::SpreadPhase(std::span<const int32_t> prompt, int32_t sample_index, int32_t samples,
                                      int32_t interval) {
  if (interval <= 1) return 0;
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the ids' bytes
  for (int32_t id : prompt) {
    uint32_t v = static_cast<uint32_t>(id);
    for (int b = 0; b < 4; ++b, v >>= 8) {
      h ^= v & 0xffu;
      h *= 0x100000001b3ULL;
    }
  }
  const int64_t base = static_cast<int64_t>(h % static_cast<uint64_t>(interval));
  const int64_t offset = samples > 1 ? int64_t{sample_index} * interval / samples : 0;
  return static_cast<int32_t>((base + offset) % interval);
}

bool EvictionSchedule::EvictsAfterRecomputeChunk(int32_t replayed, int32_t slots) const {
  return compresses_ && replayed > prompt_len_ && slots > bound_;
}

}  // namespace beacon
