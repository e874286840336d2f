// Shared scoring arithmetic of the query-based policies (snapkv, rkv,
// beacon): rotate stored pre-RoPE queries, take each query's softmax over a
// KV head's cached keys, aggregate over queries, and max-pool along token
// order.
#ifndef BEACON_KV_POLICY_ATTENTION_SCORING_H_
#define BEACON_KV_POLICY_ATTENTION_SCORING_H_

#include <cstdint>
#include <vector>

#include "kv/policy/kv_policy.h"

namespace beacon {

enum class ScoreAggregate { kMax, kSum, kMean };

// The model's RoPE (PolicyModelInfo::rope, scaling and attention factor
// included), kept once per policy.
class QueryRotator {
 public:
  explicit QueryRotator(const PolicyModelInfo& model);
  // out = RoPE(q, position), as the forward pass rotates; out may equal q.
  void Rotate(const float* q, int32_t position, float* out) const;
  // Rotate in two halves, for callers that rotate many queries at few
  // positions: the cos/sin table of `position` (head_dim floats), then
  // out = RoPE(q) with that table. Bit for bit what Rotate gives; the table
  // costs head_dim / 2 double-precision cos and sin, the rotation none.
  void Table(int32_t position, float* cs) const;
  void Apply(const float* q, const float* cs, float* out) const;
  int head_dim() const { return head_dim_; }

 private:
  int head_dim_;
  bool interleaved_;
  RopeTable rope_;
};

// The pre-RoPE queries of the last `capacity` tokens of one layer, every
// query head, with their positions: the "recent queries" that snapkv, rkv
// and beacon score with. Entries are addressed by storage index j <
// size() (ring order, not time order: the aggregates are order-free).
class RecentQueryRing {
 public:
  RecentQueryRing(int capacity, int n_heads, int head_dim);
  // q: [n_heads][head_dim] of the token at `position`; overwrites the oldest.
  void Push(const float* q, int32_t position);
  int size() const { return count_; }
  const float* query(int j, int head) const {
    return data_.data() + (static_cast<size_t>(j) * n_heads_ + head) * head_dim_;
  }
  int32_t position(int j) const { return positions_[j]; }

 private:
  int capacity_, n_heads_, head_dim_;
  std::vector<float> data_;         // [capacity][n_heads][head_dim]
  std::vector<int32_t> positions_;  // [capacity]
  int next_ = 0;
  int count_ = 0;
};

// The state SnapKV and R-KV share: per layer, a ring of the last R
// (recent_queries) pre-RoPE queries of every query head with their
// positions, filled by ObserveQuery for every token, and the rotator that
// puts them at their own positions when a policy scores. `window`: the
// protected recent slots the policy scores before (slots past it are kept
// by selection.h whatever their score).
class RecentQueryPolicy : public KvPolicy {
 public:
  void ObserveQuery(int layer, const float* q, int32_t position) final { rings_[layer].Push(q, position); }

 protected:
  RecentQueryPolicy(const KvPolicyOptions& options, const PolicyModelInfo& model, int32_t window)
      : model_(model),
        window_(window),
        pool_kernel_(options.pool_kernel),
        rotator_(model),
        rings_(model.n_layers, RecentQueryRing(options.recent_queries, model.n_heads, model.head_dim)) {}

  PolicyModelInfo model_;
  int32_t window_;
  int pool_kernel_;
  QueryRotator rotator_;
  std::vector<RecentQueryRing> rings_;  // per layer
};

// For `n_queries` rotated query vectors [n_queries][head_dim], every query's
// attention distribution p_j = softmax(q_j . k / sqrt(d)) over the slots of
// (keys, kv_head); scores[s] = aggregate over j of p_j[s].
// With `query_positions` ([n_queries], may be null: no mask) the softmax is
// causal, as the query's own attention was: slot s is visible to query j
// only when its position is <= query_positions[j]; a query that sees no
// slot adds nothing. `scratch` is resized as needed.
// Precision: q . k in f32 from the cache's stored keys; for a bf16 cache on
// a build with AVX-512 BF16, unless `bf16_products` is false, the queries
// are rounded to bf16 first and the products summed by vdpbf16ps
// (kernels/cpu/key_logits.h), so scores there equal those of the
// bf16-rounded queries to f32 rounding. BeaconKV passes false when its
// state keeps f32 queries (beacon_bf16_state off: a measurement of what
// rounding changes, which must not round elsewhere).
void AttentionScores(const float* queries, int n_queries, const KeysView& keys, int kv_head, ScoreAggregate aggregate,
                     float* scores, std::vector<float>* scratch, const int32_t* query_positions = nullptr,
                     bool bf16_products = true);

// In place: scores[s] = max of scores over [s - kernel/2, s + kernel/2]
// (clipped at the ends). kernel <= 1 leaves scores unchanged.
void MaxPool1D(float* scores, int32_t n, int kernel);

}  // namespace beacon

#endif  // BEACON_KV_POLICY_ATTENTION_SCORING_H_
