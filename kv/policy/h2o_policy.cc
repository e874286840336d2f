// H2O, the Heavy-Hitter Oracle (Zhang et al., NeurIPS 2023): a token's worth
// is the attention it has accumulated so far; keep the heavy hitters plus the
// recent window (the window, sinks and prompt are protected by selection.h).
//
// Accumulator: for every (layer, KV head, slot), the sum over decode steps of
// the attention probability the slot received, summed over the GQA group's
// query heads:
//     acc[l][g][s] = sum_t sum_{h in group(g)} p_t,h[s]
// Summing (rather than averaging, or keeping a per-query-head set) over the
// group is the choice here: the engine keeps one token set per KV head, so
// the score must be per KV head, and the sum ranks exactly as the mean does
// while staying the plain "total mass received" of H2O. Only decode steps
// contribute (the engine reports attention for decode only): prompt tokens
// start at 0, which matters little because keep_prompt protects them, and a
// slot's own first step adds its self-attention as H2O's running sum does.
//
// Slot bookkeeping: ObserveAttention reports [group][n_slots] in slot order,
// and each decode step appends one slot, whose accumulator starts at 0. After
// an eviction OnCompacted(keep) moves acc[keep[g][i]] to acc[i] per head, so
// accumulated mass follows its token through compaction.
//
// Concurrency: the backend may call ObserveAttention concurrently for
// different KV heads of one layer. Every (layer, KV head) owns its own vector,
// allocated in the constructor; ObserveAttention touches (and may resize) only
// the vector of its own head, never the outer container.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "kv/policy/kv_policy.h"
#include "kv/policy/policies.h"

namespace beacon {
namespace {

class H2oPolicy final : public KvPolicy {
 public:
  explicit H2oPolicy(const PolicyModelInfo& m)
      : n_kv_heads_(m.n_kv_heads), acc_(static_cast<size_t>(m.n_layers) * m.n_kv_heads) {}

  std::string_view name() const override { return "h2o"; }
  bool wants_attention() const override { return true; }

  void ObserveAttention(int layer, int kv_head, const float* probs, int group, int32_t n_slots) override {
    std::vector<float>& acc = Acc(layer, kv_head);
    // New slots start at 0; a shorter report (the sequence was truncated
    // without an OnCompacted, e.g. recomputed) drops the vanished slots.
    acc.resize(n_slots, 0.0f);
    for (int h = 0; h < group; ++h) {
      const float* p = probs + static_cast<size_t>(h) * n_slots;
      for (int32_t s = 0; s < n_slots; ++s) acc[s] += p[s];
    }
  }

  void Score(int layer, int kv_head, const KeysView& keys, int32_t position, float* scores) override {
    const std::vector<float>& acc = Acc(layer, kv_head);
    const int32_t n = keys.n_slots();
    const int32_t known = std::min<int32_t>(n, static_cast<int32_t>(acc.size()));
    std::copy(acc.begin(), acc.begin() + known, scores);
    std::fill(scores + known, scores + n, 0.0f);  // slots never attended yet
  }

  void OnCompacted(int layer, std::span<const std::vector<int32_t>> keep) override {
    for (int g = 0; g < n_kv_heads_; ++g) {
      std::vector<float>& acc = Acc(layer, g);
      const std::vector<int32_t>& k = keep[g];
      if (acc.size() < k.size()) acc.resize(k.size(), 0.0f);  // unattended slots are 0
      // keep is ascending with k[i] >= i: the forward in-place move reads
      // every source before it is overwritten.
      for (size_t i = 0; i < k.size(); ++i) {
        acc[i] = k[i] < static_cast<int32_t>(acc.size()) ? acc[k[i]] : 0.0f;
      }
      acc.resize(k.size());
    }
  }

 private:
  std::vector<float>& Acc(int layer, int kv_head) { return acc_[static_cast<size_t>(layer) * n_kv_heads_ + kv_head]; }

  int n_kv_heads_;
  std::vector<std::vector<float>> acc_;  // [layer * n_kv_heads + kv_head][slot]
};

}  // namespace

std::unique_ptr<KvPolicy> NewH2oPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m) {
  return std::make_unique<H2oPolicy>(m);
}

}  // namespace beacon
