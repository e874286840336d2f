// SnapKV (Li et al., NeurIPS 2024, "SnapKV: LLM Knows What You Are Looking
// For Before Generation"), applied periodically during decode as R-KV and
// BeaconKV are: the attention of an observation window of recent queries
// predicts which cached keys will matter.
//
// Score of slot s of KV head g (group G = n_heads / n_kv_heads, observation
// window = the last R = recent_queries queries, each rotated at its own
// position p_j; V_s = the window's queries that see s, p_j >= pos(s)):
//   a_h[s]  = (1/|V_s|) sum_{j in V_s} softmax_s( q_j,h . k_s / sqrt(d) )
//   a_h     = maxpool_k(a_h) over the slots outside the observation window
//   score[s] = (1/G) sum_{h in group(g)} a_h[s]
// Following the paper's Algorithm 1 and the reference code read for this
// (FasterDecoding/SnapKV snapkv/monkeypatch/snapkv_utils.py, and
// NVIDIA/kvpress kvpress/presses/snapkv_press.py):
//  - the observation window's own KV is kept (Algorithm 1 concatenates the
//    selected past with the window), so the protected window is the
//    observation window (ProtectedWindow, policy_registry.h): at least R
//    slots, and the scored keys are those before it;
//  - the softmax runs over all cached keys under the causal mask. The paper
//    sums the window's votes over keys every window query sees. Here the
//    protected window is shorter than R only when the budget is, and then a
//    scored key may be seen by fewer than R window queries, so the votes are
//    averaged over the queries that see the key (kvpress takes the mean
//    too): that ranks as the paper's sum wherever every query sees every
//    scored key, and does not under-score a recent key fewer queries could
//    see (issue 45);
//  - pooling runs over the "past" only (keys before the observation window),
//    so the window's large self-attention does not bleed into its
//    neighbours. SnapKV offers avg and max pooling; we use max (pool_kernel,
//    7 by default for snapkv), as R-KV and the published settings do
//    (docs/design.md);
//  - original SnapKV has no GQA rule (it repeats K/V per query head); kvpress
//    averages the pooled per-query-head scores over the group
//    (FasterDecoding/SnapKV issue 22), which we follow, since the engine keeps
//    one token set per KV head.
// Slots inside the protected window keep their unpooled group mean: they are
// kept by selection.h whatever their score.
//
// State: per layer, a ring of the last R pre-RoPE queries (all query heads)
// with their positions, fed by ObserveQuery for every token
// (RecentQueryPolicy, attention_scoring.h). Engine thread.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kv/policy/attention_scoring.h"
#include "kv/policy/kv_policy.h"
#include "kv/policy/policies.h"
#include "kv/policy/policy_registry.h"

namespace beacon {
namespace {

class SnapKvPolicy final : public RecentQueryPolicy {
 public:
  // The observation window is the protected one (the file comment).
  SnapKvPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m) : RecentQueryPolicy(o, m, ProtectedWindow(o)) {}

  std::string_view name() const override { return "snapkv"; }

  void Score(int layer, int kv_head, const KeysView& keys, int32_t position, float* scores) override {
    const int32_t n = keys.n_slots();
    const int d = model_.head_dim;
    const int group = model_.group();
    const int32_t past = std::max<int32_t>(0, n - window_);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const RecentQueryRing& r = rings_[layer];

    key_pos_.resize(n);
    for (int32_t s = 0; s < n; ++s) key_pos_[s] = keys.position(kv_head, s);
    head_sum_.resize(n);
    seen_by_.resize(n);
    probs_.resize(n);
    rotated_.resize(d);
    keys.GatherF32(kv_head, &keys_);  // f32 rows on either cache type
    std::fill(scores, scores + n, 0.0f);

    // One RoPE table per ring position, shared by the group's heads.
    cs_.resize(static_cast<size_t>(r.size()) * d);
    for (int j = 0; j < r.size(); ++j) rotator_.Table(r.position(j), cs_.data() + static_cast<size_t>(j) * d);
    for (int i = 0; i < group; ++i) {
      const int h = kv_head * group + i;
      std::fill(head_sum_.begin(), head_sum_.end(), 0.0f);
      std::fill(seen_by_.begin(), seen_by_.end(), 0);
      for (int j = 0; j < r.size(); ++j) {
        const int32_t qpos = r.position(j);
        rotator_.Apply(r.query(j, h), cs_.data() + static_cast<size_t>(j) * d, rotated_.data());
        float mx = -std::numeric_limits<float>::infinity();
        for (int32_t s = 0; s < n; ++s) {
          if (key_pos_[s] > qpos) continue;
          probs_[s] = scale * Dot(rotated_.data(), &keys_[static_cast<size_t>(s) * d], d);
          mx = std::max(mx, probs_[s]);
        }
        if (mx == -std::numeric_limits<float>::infinity()) continue;  // no visible key
        float total = 0.0f;
        for (int32_t s = 0; s < n; ++s) {
          if (key_pos_[s] > qpos) continue;
          probs_[s] = std::exp(probs_[s] - mx);
          total += probs_[s];
        }
        const float inv = 1.0f / total;
        for (int32_t s = 0; s < n; ++s) {
          if (key_pos_[s] <= qpos) {
            head_sum_[s] += probs_[s] * inv;
            ++seen_by_[s];
          }
        }
      }
      for (int32_t s = 0; s < n; ++s) {
        if (seen_by_[s] > 0) head_sum_[s] /= static_cast<float>(seen_by_[s]);
      }
      MaxPool1D(head_sum_.data(), past, pool_kernel_);
      for (int32_t s = 0; s < n; ++s) scores[s] += head_sum_[s] / static_cast<float>(group);
    }
  }

 private:
  // Scratch reused across Score calls (engine thread only).
  std::vector<int32_t> key_pos_, seen_by_;
  std::vector<float> head_sum_, probs_, rotated_, keys_, cs_;
};

}  // namespace

std::unique_ptr<KvPolicy> NewSnapKvPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m) {
  return std::make_unique<SnapKvPolicy>(o, m);
}

}  // namespace beacon
