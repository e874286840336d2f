#include "planner/cost_model.h"

#include <algorithm>
#include <limits>

#include "kernels/cuda/beacon_state_layout.h"
#include "kv/policy/policy_registry.h"

namespace beacon::planner {
namespace {

// Per-layer parameters that are neither matrices nor counted for FLOPs.
int64_t LayerSmallParams(const ModelConfig& c) {
  int64_t n = 2 * int64_t{c.hidden};            // attention and MLP RMSNorm
  if (c.qk_norm) n += 2 * int64_t{c.head_dim};  // Qwen3 q/k RMSNorm
  if (c.qkv_bias) n += int64_t{c.q_dim()} + 2 * int64_t{c.kv_dim()};
  return n;
}

}  // namespace

ModelCost ModelCostFromConfig(const ModelConfig& c, double weight_bytes_per_param, double kv_bytes_per_elem) {
  ModelCost m;
  m.name = c.name;
  m.n_layers = c.n_layers;
  m.n_heads = c.n_heads;
  m.n_kv_heads = c.n_kv_heads;
  m.head_dim = c.head_dim;
  m.hidden = c.hidden;
  m.vocab = c.vocab_size;
  m.context_length = c.context_length;
  m.weight_bytes_per_param = weight_bytes_per_param;
  m.kv_bytes_per_elem = kv_bytes_per_elem;
  const int64_t h = c.hidden;
  const int64_t matrices = h * c.q_dim() + 2 * h * c.kv_dim() + int64_t{c.q_dim()} * h + 3 * h * c.ffn_hidden;
  m.params_layers = c.n_layers * matrices;
  m.params_lm_head = int64_t{c.vocab_size} * h;
  const int64_t embeddings = int64_t{c.vocab_size} * h * (c.tie_embeddings ? 1 : 2);
  m.params_input_embedding = c.tie_embeddings ? 0 : int64_t{c.vocab_size} * h;
  m.params_total = m.params_layers + c.n_layers * LayerSmallParams(c) + h /* final norm */ + embeddings;
  return m;
}

double ModelCost::weight_bytes_read() const {
  // Everything but an untied input embedding (gathered, a few rows per step);
  // tied, the table is read once, as the LM head.
  return static_cast<double>(params_total - params_input_embedding) * weight_bytes_per_param;
}

PolicyCost PolicyCostFor(const KvPolicyOptions& kv) {
  PolicyCost p;
  p.compresses = kv.compresses();
  // What one eviction reads comes from the policy's registry row.
  const KvPolicySpec& spec = KvPolicySpecOf(kv.policy);
  p.scoring_queries = spec.scoring_queries != nullptr ? spec.scoring_queries(kv) : 0;
  p.observes_attention = spec.observes_attention != nullptr && spec.observes_attention(kv);
  p.key_redundancy = spec.key_redundancy;
  return p;
}

namespace {

BeaconDims DimsOf(const KvPolicyOptions& kv, const ModelCost& model) {
  BeaconDims d;
  d.n_layers = model.n_layers;
  d.n_heads = kv.beacon_group_queries ? model.n_kv_heads : model.n_heads;  // as BeaconDimsFor
  d.n_kv_heads = model.n_kv_heads;
  d.head_dim = model.head_dim;
  d.recent = kv.recent_queries;
  d.beacons = kv.beacons;
  d.fps_bound = kv.fps_bound;
  return d;
}

}  // namespace

double PolicyStateBytesPerSequence(const KvPolicyOptions& kv, const ModelCost& model) {
  if (kv.policy != KvPolicyKind::kBeacon) return 0;
  return static_cast<double>(BeaconStateLayout::For(DimsOf(kv, model)).total_bytes);
}

double EvictScratchBytes(const KvPolicyOptions& kv, const ModelCost& model, int64_t pool_slots, int32_t block_size) {
  if (kv.policy != KvPolicyKind::kBeacon || pool_slots <= 0 || block_size <= 0) return 0;
  int64_t slots = model.context_length > 0 ? std::min<int64_t>(model.context_length, pool_slots) : pool_slots;
  slots = std::min<int64_t>(slots, std::numeric_limits<int32_t>::max());
  return static_cast<double>(
      BeaconEvictScratchLayout::BytesForAtMost(DimsOf(kv, model), static_cast<int32_t>(slots), block_size));
}

double ReservedPolicyBytes(const KvPolicyOptions& kv, const ModelCost& model, int32_t max_running, int64_t pool_slots,
                           int32_t block_size) {
  return max_running * PolicyStateBytesPerSequence(kv, model) + EvictScratchBytes(kv, model, pool_slots, block_size);
}

StepCost CostModel::Step(const StepLoad& load) const {
  StepCost c;
  const ModelCost& m = model_;
  const double bpt = m.kv_bytes_per_token();
  const double per_pair_flops = 4.0 * m.head_dim * m.n_heads * m.n_layers;
  if (load.tokens > 0) {
    c.bytes = m.weight_bytes_read() + (load.kv_read_slots + load.kv_write_slots) * bpt;
    if (policy_.observes_attention) {
      // f32 probabilities of every query head, written by attention and read by the policy.
      c.bytes += 2.0 * 4.0 * m.n_heads * m.n_layers * static_cast<double>(load.observed_pairs);
    }
    c.flops = 2.0 * m.params_layers * load.tokens + 2.0 * m.params_lm_head * load.sampled +
              per_pair_flops * static_cast<double>(load.attn_pairs);
    c.memory_s = c.bytes / gpu_.effective_bandwidth();
    c.compute_s = c.flops / gpu_.effective_flops();
    c.overhead_s = gpu_.step_host_overhead_s + m.n_layers * gpu_.kernels_per_layer * gpu_.launch_overhead_s;
  }
  if (load.evictions > 0) {
    const double scored = static_cast<double>(load.evict_scored_slots);
    const double kept = static_cast<double>(load.evict_kept_slots);
    // Scoring reads K (half of K/V); compaction reads and writes kept K/V.
    c.evict_bytes = scored * bpt / 2 + 2.0 * kept * bpt;
    // q.k and softmax per (query head, scoring query, slot), per layer.
    c.evict_flops = (2.0 * m.head_dim + 5.0) * m.n_heads * m.n_layers * policy_.scoring_queries * scored;
    if (policy_.key_redundancy) {
      c.evict_flops += 2.0 * m.head_dim * m.n_kv_heads * m.n_layers * load.evict_scored_sq;
    }
    c.evict_s = std::max(c.evict_bytes / gpu_.effective_bandwidth(), c.evict_flops / gpu_.effective_flops()) +
                m.n_layers * gpu_.evict_kernels_per_layer * gpu_.launch_overhead_s;
  }
  c.total_s = std::max(c.memory_s, c.compute_s) + c.overhead_s + c.evict_s;
  return c;
}

}  // namespace beacon::planner
