// The KV eviction policy interface and its options.
//
// A policy sees what the engine computes anyway (the pre-RoPE query of every
// query head of every token, and, for policies that ask, the attention
// probabilities of each decode step) and, when the SequenceCompressor decides
// to evict (every `interval` decode steps once the cache exceeds its bound),
// scores every cached slot of one (layer, KV head). Which slots survive is
// decided by the common selection rule (selection.h): protected slots (the
// prompt when keep_prompt, the first `sinks` tokens, the last `window` slots)
// plus the top-scoring rest, the same count for every KV head.
//
// One policy object per sequence; thread ownership: the engine thread, except
// ObserveAttention, which the backend may call concurrently for *different*
// KV heads of one layer (policies keep per-(layer, head) state apart).
#ifndef BEACON_KV_POLICY_KV_POLICY_H_
#define BEACON_KV_POLICY_KV_POLICY_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/rope_scaling.h"
#include "kv/store/kv_cache.h"

namespace beacon {

class ThreadPool;  // kernels/cpu/thread_pool.h

// The policies (docs/design.md, "The method: BeaconKV"). A name ("beacon",
// "full", ...) is parsed once, where options are resolved (flags, requests,
// configs: ParseKvPolicy, KvPolicyOptions::DefaultsForName); code compares
// the enum, and KvPolicyName gives the name back for the wire, flags and
// reports.
enum class KvPolicyKind : uint8_t { kFull, kStreaming, kH2o, kSnapKv, kRkv, kRandom, kBeacon };

// "full", "streaming", "h2o", "snapkv", "rkv", "random", "beacon".
std::string_view KvPolicyName(KvPolicyKind policy);
// INVALID_ARGUMENT "kv_policy: unknown policy '<name>' (known: ...)".
absl::StatusOr<KvPolicyKind> ParseKvPolicy(std::string_view name);
// A comma-separated list of names ("beacon,snapkv"; empty items skipped), in
// order; INVALID_ARGUMENT as ParseKvPolicy for the first unknown one.
absl::StatusOr<std::vector<KvPolicyKind>> ParseKvPolicies(std::string_view comma_separated);
// Every policy, in the order tools report them; KvPolicyNames() their names.
std::span<const KvPolicyKind> KvPolicyKinds();
std::span<const std::string_view> KvPolicyNames();

// nlohmann::json's extension point (found by argument-dependent lookup; a
// template, so kv/ needs no JSON library): a policy is written as its name,
// never as the enum's number.
template <typename Json>
void to_json(Json& j, KvPolicyKind policy) {
  j = std::string(KvPolicyName(policy));
}

enum class BeaconFilter {
  kAll,     // every decode query enters the FPS buffer (prompt queries too
            // when beacon_prompt_queries)
  kGlobal,  // only queries whose attention mass beyond the recent window
            // exceeds `global_threshold` (the paper's "global queries")
};

// Every parameter of every policy. DefaultsFor() applies the published
// per-policy settings (docs/design.md, "Published settings and numbers") so
// that a comparison gives each policy its own paper's configuration.
struct KvPolicyOptions {
  // kFull: no eviction. Named by KvPolicyName on the wire, in flags and reports.
  KvPolicyKind policy = KvPolicyKind::kFull;
  int32_t budget = 512;        // slots kept per KV head after an eviction: generated
                               // tokens only when keep_prompt, all tokens otherwise
  int32_t interval = 128;      // decode steps between evictions
  int32_t eviction_phase = 0;  // per request, in [0, interval): the first eviction comes this
                               // many steps early (EvictionSchedule::SpreadPhase; 0 = the
                               // published schedule); later ones every `interval`
  int32_t sinks = 4;           // first tokens always kept (attention sinks)
  int32_t window = 32;         // most recent slots always kept
  bool keep_prompt = true;     // never evict prompt tokens
  // BeaconKV's R, K and U: R 4, K 8, U 16 since issue 45 (before: 16, 16, 64). Chosen on the long-chain
  // recap task at a budget in bytes, where the state's bytes come out of the KV slots: ablation on a
  // tuning seed, then confirmed on the evaluation seed (docs/fidelity.md "BeaconKV's defaults").
  int32_t recent_queries = 4;  // R: recent queries that score the cache
  int32_t beacons = 8;         // K: FPS-selected beacon queries per query head
  int32_t fps_bound = 16;      // U: FPS buffer size that triggers a shrink to K
  BeaconFilter beacon_filter = BeaconFilter::kAll;
  bool beacon_prompt_queries = false;  // kAll: prompt queries enter the FPS buffer too
                                       // (the recent ring takes them either way); off:
                                       // docs/fidelity.md "Prompt queries as beacons"
  // The ring and FPS buffers hold each query rounded to bf16, as the CUDA
  // state stores them (kernels/cuda/beacon_state.h: half the bytes of f32,
  // issue 19 defect 5): FPS, norms and scoring then see the rounded
  // vectors, and CPU and GPU choose alike. Off (f32) is CPU only, for
  // measuring what the rounding changes (docs/fidelity.md "bf16 policy
  // state"; beacon-eval --kv-beacon-state).
  bool beacon_bf16_state = true;
  // One ring entry and one FPS buffer per KV head instead of per query head,
  // holding the mean of its group's queries (pre-RoPE, summed in head order
  // in f32, divided by the group size, then rounded as above). The state
  // shrinks by the GQA group (6 on Qwen2.5-1.5B, 7 on R1-Distill-Qwen-7B),
  // so at a budget in bytes it leaves that many more KV slots; the price is
  // that a key one head alone attends to scores by the group's mean logit.
  // Off is the paper's per-head state. kAll only. On the GPU the state's
  // heads are then the KV heads (engine/cuda BeaconDimsFor,
  // LaunchBeaconGroupMeans). docs/fidelity.md "Group-shared beacon state".
  bool beacon_group_queries = false;
  float global_threshold = 0.5f;  // attention mass beyond `window` for kGlobal
  int32_t pool_kernel = 1;        // 1-D max-pool over token order (odd; 1 = off)
  float lambda = 0.1f;            // rkv: weight of attention importance against redundancy
  uint64_t seed = 0;              // random policy

  // The options with `policy`'s published defaults (R, pool kernel, lambda).
  static KvPolicyOptions DefaultsFor(KvPolicyKind policy);
  // DefaultsFor the named policy: where a name from a flag, a request or a
  // config file is parsed. INVALID_ARGUMENT (ParseKvPolicy) for an unknown name.
  static absl::StatusOr<KvPolicyOptions> DefaultsForName(std::string_view name);
  // INVALID_ARGUMENT naming the field.
  absl::Status Validate() const;
  bool compresses() const { return policy != KvPolicyKind::kFull; }
  std::string_view policy_name() const { return KvPolicyName(policy); }
};

// What a policy needs to know of the model.
struct PolicyModelInfo {
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float rope_theta = 10000.0f;
  // The model's RoPE table (ModelConfig::RopeFrequencies(): scaled
  // frequencies and YaRN's attention factor), with which stored pre-RoPE
  // queries are rotated exactly as the forward pass rotates them. Empty
  // inv_freq: the unscaled table of rope_theta. Else [head_dim / 2].
  RopeTable rope;
  bool rope_interleaved = false;
  int group() const { return n_heads / n_kv_heads; }
};

// Read access to one layer of one sequence's cached keys (after RoPE) and
// slot positions.
class KeysView {
 public:
  KeysView(const KvCache* cache, const SequenceKv* seq, int layer) : cache_(cache), seq_(seq), layer_(layer) {}
  int32_t n_slots() const { return seq_->num_slots(); }
  int head_dim() const { return cache_->shape().head_dim; }
  // Slots [s, s + block_size - s % block_size) of one head are contiguous:
  // key(h, s + i) == key(h, s) + i * head_dim within a block.
  int block_size() const { return cache_->shape().block_size; }
  // The cache's element type (kF32, kBF16 or kQ8_0).
  DType dtype() const { return cache_->dtype(); }
  // Slot's key in the cache's element type.
  const void* key_data(int kv_head, int32_t slot) const {
    const int bs = cache_->shape().block_size;
    return static_cast<const uint8_t*>(cache_->KData(layer_, seq_->block_ids()[slot / bs], kv_head)) +
           static_cast<size_t>(slot % bs) * cache_->shape().row_bytes();
  }
  // REQUIRES dtype() == kF32.
  const float* key(int kv_head, int32_t slot) const { return static_cast<const float*>(key_data(kv_head, slot)); }
  // Slots [0, n_slots()) of one head widened to f32, [slot][head_dim], in
  // `out` (resized): what the scalar scorers read on either cache type.
  void GatherF32(int kv_head, std::vector<float>* out) const;
  int32_t position(int kv_head, int32_t slot) const {
    const int bs = cache_->shape().block_size;
    return cache_->Positions(layer_, seq_->block_ids()[slot / bs], kv_head)[slot % bs];
  }

 private:
  const KvCache* cache_;
  const SequenceKv* seq_;
  int layer_;
};

// What a device backend keeps for one policy object (BeaconKV's query ring
// and FPS buffers in GPU memory, engine/cuda/): owned by the policy, so it
// lives and dies with the sequence, preemption and abort included.
class PolicyDeviceState {
 public:
  virtual ~PolicyDeviceState() = default;
};

class KvPolicy {
 public:
  virtual ~KvPolicy() = default;
  virtual std::string_view name() const = 0;

  // The options the policy was created with (CreateKvPolicy sets them).
  const KvPolicyOptions& options() const { return options_; }
  void set_options(const KvPolicyOptions& o) { options_ = o; }
  // Null until a device backend attaches its state.
  PolicyDeviceState* device_state() const { return device_state_.get(); }
  void set_device_state(std::unique_ptr<PolicyDeviceState> s) { device_state_ = std::move(s); }
  // The engine's CPU pool, or null (SequenceCompressor::set_thread_pool):
  // a policy may split its own work over it from ObserveQuery and Score,
  // which the engine thread calls outside any parallel region. Never from
  // ObserveAttention, which already runs on pool threads.
  void set_thread_pool(ThreadPool* pool) { pool_ = pool; }
  ThreadPool* thread_pool() const { return pool_; }
  // True when Score may run concurrently for different (layer, KV head)
  // pairs (and with no other call in flight), and OnCompacted for different
  // layers likewise: SequenceCompressor then scores every pair of an
  // eviction in parallel, then compacts the layers in parallel.
  virtual bool concurrent_scoring() const { return false; }

  // Every token run (prefill and decode), every layer: the pre-RoPE query
  // of every query head, [n_heads][head_dim], of the token at `position`.
  virtual void ObserveQuery(int layer, const float* q, int32_t position) {}

  // Once, before any observation: the cache's first `slots` slots are
  // protected whatever their score (the kept prompt and the sinks: they are
  // never evicted and slots stay in position order, so they stay first).
  virtual void SetProtectedLead(int32_t slots) {}

  // Once, before any observation (SequenceCompressor sets it): the tokens
  // at positions [0, tokens) are the prompt's, the rest generated (a
  // recompute after preemption replays both at their own positions). 0
  // until set: every token counts as generated.
  void SetPromptLength(int32_t tokens) { prompt_length_ = tokens; }
  int32_t prompt_length() const { return prompt_length_; }

  // Decode steps only, when wants_attention(): for one (layer, KV head), the
  // attention probabilities of the group's query heads over the sequence's
  // slots, [group][n_slots] (slot order = cache order).
  virtual bool wants_attention() const { return false; }
  virtual void ObserveAttention(int layer, int kv_head, const float* probs, int group, int32_t n_slots) {}

  // Scores the slots [0, keys.n_slots()) of (layer, kv_head); higher means
  // more worth keeping. `position` is the position of the next token.
  virtual void Score(int layer, int kv_head, const KeysView& keys, int32_t position, float* scores) = 0;

  // After a layer was compacted: keep[h] lists, ascending, the old slots of
  // KV head h that now occupy slots 0, 1, ... Policies with per-slot state
  // remap it here.
  virtual void OnCompacted(int layer, std::span<const std::vector<int32_t>> keep) {}

 private:
  KvPolicyOptions options_;
  int32_t prompt_length_ = 0;
  std::unique_ptr<PolicyDeviceState> device_state_;
  ThreadPool* pool_ = nullptr;
};

// Builds options.policy. INVALID_ARGUMENT for invalid options.
absl::StatusOr<std::unique_ptr<KvPolicy>> CreateKvPolicy(const KvPolicyOptions& options, const PolicyModelInfo& model);

}  // namespace beacon

#endif  // BEACON_KV_POLICY_KV_POLICY_H_
