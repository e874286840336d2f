// Drives one sequence's KV compression: owns its policy, decides when to
// evict (every `interval` decode steps once the cache exceeds its bound, or
// at once when it reaches bound + interval), and evicts: scores every
// (layer, KV head), selects (selection.h), compacts (compaction.h) and
// returns whole tail blocks to the pool.
//
// When, and down to what bound, is EvictionSchedule's (eviction_schedule.h):
// a sequence never holds more than max(prompt + 1, bound + interval) slots.
// Thread ownership: the engine thread.
#ifndef BEACON_KV_POLICY_SEQUENCE_COMPRESSOR_H_
#define BEACON_KV_POLICY_SEQUENCE_COMPRESSOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kv/policy/eviction_schedule.h"
#include "kv/policy/kv_policy.h"
#include "kv/policy/selection.h"

namespace beacon {

class SequenceCompressor {
 public:
  // INVALID_ARGUMENT for invalid options or an unknown policy.
  static absl::StatusOr<std::unique_ptr<SequenceCompressor>> Create(const KvPolicyOptions& options,
                                                                    const PolicyModelInfo& model, int32_t prompt_len);

  // EvictionSchedule::PeakSlots: what admission must reserve. prompt +
  // max_tokens under `full`; constant in max_tokens under a compressing policy.
  static int64_t PeakSlots(const KvPolicyOptions& options, int32_t prompt_len, int32_t max_tokens) {
    return EvictionSchedule::PeakSlots(options, prompt_len, max_tokens);
  }

  KvPolicy* policy() { return policy_.get(); }
  const KvPolicyOptions& options() const { return options_; }
  // The engine's CPU pool (null: single-threaded), for the policy's own
  // work (KvPolicy::set_thread_pool) and, when the policy allows
  // concurrent scoring, for scoring every (layer, KV head) of a host
  // eviction in parallel. The caller must be the pool's one caller (the
  // engine thread) and call outside any parallel region.
  void set_thread_pool(ThreadPool* pool) {
    pool_ = pool;
    policy_->set_thread_pool(pool);
  }
  // Slots kept after an eviction.
  int32_t bound() const { return schedule_.bound(); }
  // The arithmetic of when this sequence evicts (shared with recompute and
  // the SimEngine).
  const EvictionSchedule& schedule() const { return schedule_; }

  // Called once after every decode step, when the step's K/V is in `kv`.
  void AfterDecodeStep(SequenceKv* kv, int32_t next_position);
  // Evicts down to bound() now, if above it. Returns slots evicted per head.
  // A device cache (KvCache::device_storage()) evicts on its device; if that
  // fails, nothing is evicted and failure() holds the error from then on:
  // the sequence's owner must end it (a cache that cannot shrink would
  // outgrow what admission reserved for it).
  int32_t Evict(SequenceKv* kv, int32_t next_position);
  // OK until a device eviction failed.
  const absl::Status& failure() const { return failure_; }

  int64_t evictions() const { return evictions_; }
  int64_t evicted_slots() const { return evicted_slots_; }

 private:
  SequenceCompressor(const KvPolicyOptions& options, const PolicyModelInfo& model, int32_t prompt_len,
                     std::unique_ptr<KvPolicy> policy);
  // Scores, selects and compacts every layer of a host cache.
  void EvictOnHost(SequenceKv* kv, int32_t n_keep, int32_t next_position);

  KvPolicyOptions options_;
  PolicyModelInfo model_;
  std::unique_ptr<KvPolicy> policy_;
  Protection protection_;
  EvictionSchedule schedule_;
  int64_t evictions_ = 0;
  int64_t evicted_slots_ = 0;
  absl::Status failure_;
  std::vector<float> scores_;
  std::vector<std::vector<int32_t>> keep_;
  ThreadPool* pool_ = nullptr;
  // The parallel path's per-(layer, KV head) scores and kept slots.
  std::vector<float> all_scores_;
  std::vector<std::vector<std::vector<int32_t>>> all_keep_;  // [layer][kv head]
};

}  // namespace beacon

#endif  // BEACON_KV_POLICY_SEQUENCE_COMPRESSOR_H_
