// R-KV (Cai et al., 2025, "R-KV: Redundancy-aware KV Cache Compression for
// Reasoning Models"): keep keys that recent queries attend to, and drop keys
// that repeat other keys (reasoning traces restate themselves).
//
// Read from the authors' reference (Zefan-Cai/R-KV: rkv/compression/r1_kv.py,
// rkv/utils.py compute_attention_scores and cal_similarity) and written here
// for one (layer, KV head g) with n slots, the protected recent `window`
// slots at the end and past = n - window slots before them:
//
// Importance, from the last R (= recent_queries, 8 for rkv) queries, each
// rotated at its own position p_j:
//   l_j[s]   = max_{h in group(g)} q_j,h . k_s / sqrt(d)   (GQA: max over the
//              group's logits, before the softmax, as the reference does)
//   a_j      = softmax over the past slots s < past (keys after p_j masked;
//              the reference needs no mask because its observation queries
//              follow every past key)
//   imp      = maxpool_7( (1/R) sum_j a_j )   over the past slots
//
// Redundancy, over all n cached keys of the head, u_s = k_s / (|k_s| + 1e-8):
//   c[i][j]  = u_i . u_j for i != j, c[i][i] = 0
//   r_i      = the last j with c[i][j] > 0.5, or 0 when there is none (the
//              reference's max over masked indices); c[i][r_i] := 0, so the
//              most recent near-duplicate of each key is exempted from the
//              redundancy that key confers
//   red[j]   = softmax_j( (1/n) sum_i c[i][j] )
//
// Score:  score[s] = lambda * imp[s] - (1 - lambda) * red[s]   (s < past)
// with lambda = options.lambda (0.1, R-KV's published setting in
// docs/design.md; the reference code defaults to 0.07). Both terms are distributions over the
// slots (imp: a mean of softmaxes, pooled; red: a softmax), which is the
// reference's normalisation that makes the two comparable. Window slots
// (protected by selection.h) get importance 0.
//
// Cost: the redundancy term is O(n^2 d) per head, computed row by row in O(n)
// memory: R-KV's own cost, acceptable every `interval` steps.
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

namespace beacon {
namespace {

constexpr float kSimilarityThreshold = 0.5f;  // reference cal_similarity threshold
constexpr float kNormEpsilon = 1e-8f;

class RkvPolicy final : public RecentQueryPolicy {
 public:
  RkvPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m)
      : RecentQueryPolicy(o, m, o.window), lambda_(o.lambda) {}

  std::string_view name() const override { return "rkv"; }

  void Score(int layer, int kv_head, const KeysView& keys, int32_t position, float* scores) override {
    const int32_t n = keys.n_slots();
    const int32_t past = std::max<int32_t>(0, n - window_);
    importance_.assign(n, 0.0f);
    keys.GatherF32(kv_head, &keys_);  // f32 rows on either cache type
    Importance(layer, kv_head, keys, past);
    Redundancy(kv_head, keys);
    for (int32_t s = 0; s < n; ++s) scores[s] = lambda_ * importance_[s] - (1.0f - lambda_) * redundancy_[s];
  }

 private:
  // importance_[0, past) = pooled mean attention of the ring's queries.
  void Importance(int layer, int kv_head, const KeysView& keys, int32_t past) {
    const RecentQueryRing& r = rings_[layer];
    if (past == 0 || r.size() == 0) return;
    const int d = model_.head_dim;
    const int group = model_.group();
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    rotated_.resize(static_cast<size_t>(group) * d);
    logits_.resize(past);
    cs_.resize(d);
    for (int j = 0; j < r.size(); ++j) {
      const int32_t qpos = r.position(j);
      rotator_.Table(qpos, cs_.data());  // one table for the group's heads
      for (int i = 0; i < group; ++i) {
        const int h = kv_head * group + i;
        rotator_.Apply(r.query(j, h), cs_.data(), rotated_.data() + static_cast<size_t>(i) * d);
      }
      float mx = -std::numeric_limits<float>::infinity();
      for (int32_t s = 0; s < past; ++s) {
        float l = -std::numeric_limits<float>::infinity();
        if (keys.position(kv_head, s) <= qpos) {
          const float* k = &keys_[static_cast<size_t>(s) * d];
          for (int i = 0; i < group; ++i)
            l = std::max(l, scale * Dot(rotated_.data() + static_cast<size_t>(i) * d, k, d));
        }
        logits_[s] = l;
        mx = std::max(mx, l);
      }
      if (mx == -std::numeric_limits<float>::infinity()) continue;  // no visible past key
      float total = 0.0f;
      for (int32_t s = 0; s < past; ++s) {
        logits_[s] = std::exp(logits_[s] - mx);  // exp(-inf) = 0 for masked keys
        total += logits_[s];
      }
      const float w = 1.0f / (total * static_cast<float>(r.size()));
      for (int32_t s = 0; s < past; ++s) importance_[s] += logits_[s] * w;
    }
    MaxPool1D(importance_.data(), past, pool_kernel_);
  }

  // redundancy_[0, n) = softmax of the column means of the exempted cosine
  // similarity matrix (see the file comment).
  void Redundancy(int kv_head, const KeysView& keys) {
    const int32_t n = keys.n_slots();
    const int d = model_.head_dim;
    unit_.resize(static_cast<size_t>(n) * d);
    for (int32_t s = 0; s < n; ++s) {
      const float* k = &keys_[static_cast<size_t>(s) * d];
      const float inv = 1.0f / (std::sqrt(Dot(k, k, d)) + kNormEpsilon);
      for (int c = 0; c < d; ++c) unit_[static_cast<size_t>(s) * d + c] = k[c] * inv;
    }
    redundancy_.assign(n, 0.0f);
    row_.resize(n);
    for (int32_t i = 0; i < n; ++i) {
      const float* ui = unit_.data() + static_cast<size_t>(i) * d;
      int32_t retain = 0;
      for (int32_t j = 0; j < n; ++j) {
        row_[j] = j == i ? 0.0f : Dot(ui, unit_.data() + static_cast<size_t>(j) * d, d);
        if (row_[j] > kSimilarityThreshold) retain = j;
      }
      row_[retain] = 0.0f;
      for (int32_t j = 0; j < n; ++j) redundancy_[j] += row_[j];
    }
    for (int32_t j = 0; j < n; ++j) redundancy_[j] /= static_cast<float>(n);
    if (n > 0) SoftmaxInPlace(redundancy_.data(), n);
  }

  float lambda_;
  // Scratch reused across Score calls (engine thread only).
  std::vector<float> importance_, redundancy_, unit_, row_, logits_, rotated_, cs_;
  std::vector<float> keys_;  // Score's keys as f32, [slot][head_dim]
};

}  // namespace

std::unique_ptr<KvPolicy> NewRkvPolicy(const KvPolicyOptions& o, const PolicyModelInfo& m) {
  return std::make_unique<RkvPolicy>(o, m);
}

}  // namespace beacon
