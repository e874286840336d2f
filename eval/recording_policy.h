// A KvPolicy that never evicts and only records: the attention
// probabilities of the latest decode step of every (layer, KV head). The
// model evaluation gives it to the full-cache reference sequence so that,
// after each step, every compressed replay can be scored by how much of the
// reference's attention mass its cache still holds.
//
// Thread ownership: as any KvPolicy. ObserveAttention may run concurrently
// for different KV heads of one layer; each (layer, KV head) has its own
// buffer, so those calls touch disjoint memory.
#ifndef BEACON_EVAL_RECORDING_POLICY_H_
#define BEACON_EVAL_RECORDING_POLICY_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kv/policy/kv_policy.h"

namespace beacon::eval {

class RecordingPolicy : public KvPolicy {
 public:
  explicit RecordingPolicy(const PolicyModelInfo& model);

  std::string_view name() const override { return "recording"; }
  bool wants_attention() const override { return true; }
  void ObserveAttention(int layer, int kv_head, const float* probs, int group, int32_t n_slots) override;
  // Never called: the sequence it serves is not compressed. Scores every
  // slot alike so that a misuse keeps the newest slots, harmlessly.
  void Score(int layer, int kv_head, const KeysView& keys, int32_t position, float* scores) override;

  // The recorded probabilities of query head g (within the KV head's group)
  // over the reference's slots, from the latest decode step; for a sequence
  // that never evicts, slot s holds position s. Empty before the first
  // decode step.
  std::span<const float> Probs(int layer, int kv_head, int g) const;
  // Slots covered by the latest record of (layer, kv_head).
  int32_t n_slots(int layer, int kv_head) const { return n_slots_[Index(layer, kv_head)]; }

 private:
  size_t Index(int layer, int kv_head) const { return static_cast<size_t>(layer) * n_kv_heads_ + kv_head; }

  int n_kv_heads_;
  std::vector<std::vector<float>> probs_;  // [layer * n_kv_heads + kv_head][group][n_slots]
  std::vector<int32_t> n_slots_;
};

// The attention-mass recall of a compressed sequence `kv` against the
// reference's latest record: for every (layer, KV head) and query head g of
// its group, the recorded probability summed over the positions `kv` holds
// for that (layer, KV head) (KvCache::Positions over its slots), averaged
// over layers and query heads. 1 when `kv` holds every position the
// reference attended to. `scratch` is reused between calls.
// REQUIRES the reference recorded a decode step; kv of the same model shape.
double AttentionRecall(const RecordingPolicy& ref, const SequenceKv& kv, const PolicyModelInfo& model,
                       std::vector<int32_t>* scratch);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_RECORDING_POLICY_H_
