// The roofline step-time model of the capacity planner.
//
// One engine step (a ragged batch of decode tokens and prefill chunks) takes
//
//   max(bytes / effective bandwidth, FLOPs / effective FLOP/s)
//     + host overhead + n_layers * kernels_per_layer * launch overhead
//     + eviction time (when any sequence evicts in the step)
//
// Bytes: the weights once per step (every matrix, the LM head included),
// every sequence's cached K/V read once by attention (the slots it holds,
// plus the step's own tokens), the step's new K/V written, and for policies
// that observe attention probabilities (h2o; beacon with the global filter)
// those probabilities written and read back in f32.
// FLOPs: 2 per matrix parameter per token (the LM head only for tokens that
// are sampled), 4 * head_dim per (query head, query token, key slot) pair of
// attention.
// Eviction (a roofline of its own, plus launches shared by the step's
// evicting sequences): scoring reads the K half of every scored slot and
// multiplies it with the policy's scoring queries (recent + beacons per
// query head; rkv adds key-key similarity, quadratic in the slots);
// compaction reads and writes the K/V of every kept slot.
// Prefill attention is causal: a chunk of n tokens after p cached ones forms
// n * p + n (n + 1) / 2 pairs and reads the p + n slots once.
#ifndef BEACON_PLANNER_COST_MODEL_H_
#define BEACON_PLANNER_COST_MODEL_H_

#include <cstdint>
#include <string>

#include "kv/policy/kv_policy.h"
#include "model/model_config.h"
#include "planner/gpu_profile.h"

namespace beacon::planner {

// What the roofline needs of a model: sizes in parameters and bytes.
struct ModelCost {
  std::string name;
  int n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, hidden = 0, vocab = 0;
  int context_length = 0;
  double weight_bytes_per_param = 2;   // bf16
  double kv_bytes_per_elem = 2;        // bf16
  int64_t params_total = 0;            // held in memory (embedding and LM head separately unless tied)
  int64_t params_layers = 0;           // matrix parameters of the layers (per token: 2 FLOPs each)
  int64_t params_lm_head = 0;          // vocab * hidden (per sampled token)
  int64_t params_input_embedding = 0;  // vocab * hidden when untied (gathered, not read whole), else 0

  double weight_bytes() const { return params_total * weight_bytes_per_param; }
  // Read per step: every layer parameter (norms included) and the LM head;
  // the embedding is only gathered.
  double weight_bytes_read() const;
  // K and V of one token, all layers and KV heads.
  double kv_bytes_per_token() const { return 2.0 * n_layers * n_kv_heads * head_dim * kv_bytes_per_elem; }
};

// `weight_bytes_per_param` / `kv_bytes_per_elem`: 2 for bf16, 1 for fp8.
ModelCost ModelCostFromConfig(const ModelConfig& c, double weight_bytes_per_param = 2, double kv_bytes_per_elem = 2);

// What the policy costs when it evicts or observes.
struct PolicyCost {
  int32_t scoring_queries = 0;      // per query head: recent + beacons (beacon), recent (snapkv, rkv)
  bool key_redundancy = false;      // rkv: key-key similarity over the scored slots
  bool observes_attention = false;  // h2o, beacon with the global filter
  bool compresses = false;
};
PolicyCost PolicyCostFor(const KvPolicyOptions& kv);

// Device memory a running sequence's policy state takes outside the KV pool:
// BeaconKV's query ring and FPS buffers (kernels/cuda/beacon_state_layout.h,
// the CUDA engine's own layout, bf16 points: 6.1 MB a sequence at Qwen3-4B's shape with
// the defaults R = 4, K = 8, U = 16; 24.5 MB with issue 45's earlier 16, 16, 64); 0 for the other policies, which keep
// no device state.
double PolicyStateBytesPerSequence(const KvPolicyOptions& kv, const ModelCost& model);

// Device memory BeaconKV's eviction takes outside the KV pool, once per
// replica (the CUDA engine's EvictScratch: block table, scores, kept lists
// and kernel workspaces of one eviction, kernels/cuda/beacon_state_layout.h),
// sized for the most slots one sequence can hold: min(context length,
// pool_slots). 0 for the other policies, which do not evict on the device.
double EvictScratchBytes(const KvPolicyOptions& kv, const ModelCost& model, int64_t pool_slots, int32_t block_size);

// All that beacon-serve reserves at start-up for the policy:
// max_running x PolicyStateBytesPerSequence + EvictScratchBytes.
double ReservedPolicyBytes(const KvPolicyOptions& kv, const ModelCost& model, int32_t max_running, int64_t pool_slots,
                           int32_t block_size);

// One step's work, summed over its sequences.
struct StepLoad {
  int64_t tokens = 0;          // tokens through the layers (prefill + decode)
  int64_t sampled = 0;         // tokens whose logits are computed
  int64_t kv_read_slots = 0;   // slots read by attention, summed over sequences
  int64_t kv_write_slots = 0;  // new slots written
  int64_t attn_pairs = 0;      // (query token, key slot) pairs, per query head and layer
  int64_t observed_pairs = 0;  // pairs whose probabilities a policy observes
  int32_t evictions = 0;       // sequences evicting in this step
  int64_t evict_scored_slots = 0;
  int64_t evict_kept_slots = 0;
  double evict_scored_sq = 0;  // sum of scored_slots^2 (rkv redundancy)
};

struct StepCost {
  double bytes = 0, flops = 0;         // forward pass
  double memory_s = 0, compute_s = 0;  // bytes / bandwidth, FLOPs / rate
  double overhead_s = 0;               // host + launches
  double evict_bytes = 0, evict_flops = 0;
  double evict_s = 0;  // roofline + launches of the evictions
  double total_s = 0;
  bool compute_bound() const { return compute_s > memory_s; }
};

class CostModel {
 public:
  CostModel(const ModelCost& model, const GpuProfile& gpu, const PolicyCost& policy)
      : model_(model), gpu_(gpu), policy_(policy) {}

  StepCost Step(const StepLoad& load) const;

  const ModelCost& model() const { return model_; }
  const GpuProfile& gpu() const { return gpu_; }
  const PolicyCost& policy() const { return policy_; }

 private:
  ModelCost model_;
  GpuProfile gpu_;
  PolicyCost policy_;
};

}  // namespace beacon::planner

#endif  // BEACON_PLANNER_COST_MODEL_H_
