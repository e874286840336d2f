// The null baseline: uniform random scores, so the kept set is the protected
// slots (prompt under keep_prompt, sinks, recent window) plus a uniformly
// random subset of the rest, independently per KV head. Any policy worth
// running should beat it.
//
// Determinism: the score of slot s at (layer, kv_head) during the e-th
// eviction of that layer is a counter-based hash of (seed, layer, kv_head, e,
// s): the same seed gives the same kept sets whatever the order in which the
// compressor visits heads, and different evictions draw fresh scores. The
// eviction count e of a layer is the number of OnCompacted calls seen for it
// (the compressor calls it once per layer per eviction, after scoring).
#include <cstdint>
#include <memory>
#include <vector>

#include "kv/policy/kv_policy.h"
#include "kv/policy/policies.h"
#include "util/splitmix.h"

namespace beacon {
namespace {

class RandomPolicy final : public KvPolicy {
 public:
  RandomPolicy(uint64_t seed, int n_layers) : seed_(seed), evictions_(n_layers, 0) {}

  std::string_view name() const override { return "random"; }

  void Score(int layer, int kv_head, const KeysView& keys, int32_t position, float* scores) override {
    uint64_t key = SplitMix64(seed_);
    key = SplitMix64(key ^ static_cast<uint64_t>(layer));
    key = SplitMix64(key ^ static_cast<uint64_t>(kv_head));
    key = SplitMix64(key ^ static_cast<uint64_t>(evictions_[layer]));
    const int32_t n = keys.n_slots();
    for (int32_t s = 0; s < n; ++s) {
      // The top 24 bits: every value exactly representable, uniform in [0, 1).
      scores[s] = static_cast<float>(SplitMix64(key ^ static_cast<uint64_t>(s)) >> 40) * 0x1.0p-24f;
    }
  }

  void OnCompacted(int layer, std::span<const std::vector<int32_t>> keep) override { ++evictions_[layer]; }

 private:
  uint64_t seed_;
  std::vector<int64_t> evictions_;  // per layer
};

}  // namespace

std::unique_ptr<KvPolicy> NewRandomPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m) {
  return std::make_unique<RandomPolicy>(o.seed, m.n_layers);
}

}  // namespace beacon
