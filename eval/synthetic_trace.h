// Synthetic query/key traces with a known "thought revisiting" structure,
// for evaluating KV policies without a model (beacon-eval synthetic).
//
// One attention layer, GQA. The sequence is:
//   prompt  [0, prompt_len)            noise-only queries and keys
//   plan    [prompt_len, +plan_len)    plan_steps topics of equal length; a
//                                      plan token's key and query point along
//                                      its topic's direction (writing the plan
//                                      step reads the step so far)
//   middle  [plan_end, n_tokens)       "working" tokens: key and query along
//                                      the direction of the current segment
//                                      (segment_len tokens), so working
//                                      queries attend locally; every
//                                      ~revisit_every tokens a "revisit"
//                                      query points along a random plan
//                                      topic instead, and so attends to that
//                                      part of the plan span, hundreds or
//                                      thousands of tokens back.
// Revisit queries resemble the plan-time queries of their topic: what an
// FPS buffer of past queries (BeaconKV) can retain and recent-window
// scorers (SnapKV, R-KV) cannot see.
//
// Vectors are given pre-RoPE, as the engine hands them to policies. The
// plan directions live in the slowest-rotating RoPE pairs and the working
// directions in the next-slowest, under rope_theta 1e6 (the Qwen2.5/Qwen3
// base): long-range content matching survives rotation, as it does in real
// models, which carry it in their low-frequency dimensions. Every query and
// key also carries isotropic Gaussian noise.
#ifndef BEACON_EVAL_SYNTHETIC_TRACE_H_
#define BEACON_EVAL_SYNTHETIC_TRACE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kv/policy/kv_policy.h"

namespace beacon::eval {

struct SyntheticTraceOptions {
  int n_heads = 4;     // query heads
  int n_kv_heads = 2;  // KV heads (n_heads a multiple)
  int head_dim = 64;   // even, >= 16
  float rope_theta = 1e6f;
  int prompt_len = 16;
  int plan_len = 32;
  int plan_steps = 4;  // plan topics; plan_len a multiple
  int middle_len = 2000;
  int segment_len = 64;     // working tokens per cluster direction
  int revisit_every = 100;  // mean gap between revisit queries (uniform in [0.5, 1.5] x this)
  float plan_logit = 8.0f;  // q.k / sqrt(d) of a query and a key of the same topic, before noise
  float work_logit = 6.0f;  // the same for a working query and key of the same segment
  float noise = 0.5f;       // per-dimension standard deviation added to every q and k
  uint64_t seed = 1;

  // INVALID_ARGUMENT naming the field.
  absl::Status Validate() const;
  int n_tokens() const { return prompt_len + plan_len + middle_len; }
};

enum class TokenKind { kPrompt, kPlan, kWork, kRevisit };

struct SyntheticTrace {
  SyntheticTraceOptions options;
  std::vector<TokenKind> kind;  // by position
  std::vector<int> topic;       // plan topic of plan and revisit tokens, else -1
  std::vector<float> q;         // pre-RoPE, [n_tokens][n_heads][head_dim]
  std::vector<float> k;         // pre-RoPE, [n_tokens][n_kv_heads][head_dim]

  int n_tokens() const { return static_cast<int>(kind.size()); }
  int plan_begin() const { return options.prompt_len; }
  int plan_end() const { return options.prompt_len + options.plan_len; }
  const float* query(int pos, int head) const {
    return q.data() + (static_cast<size_t>(pos) * options.n_heads + head) * options.head_dim;
  }
  const float* key(int pos, int kv_head) const {
    return k.data() + (static_cast<size_t>(pos) * options.n_kv_heads + kv_head) * options.head_dim;
  }
  // What a policy must know of this "model" (one layer).
  PolicyModelInfo model_info() const;
};

// Deterministic in options (seed included). REQUIRES options.Validate().ok().
SyntheticTrace GenerateSyntheticTrace(const SyntheticTraceOptions& options);

// The rotary embedding the trace is meant to be read with (non-interleaved
// pairs, as the policies' model info says).
class TraceRope {
 public:
  explicit TraceRope(const SyntheticTraceOptions& options);
  // out = RoPE(x, position); out may equal x.
  void Apply(const float* x, int32_t position, float* out) const;

 private:
  int head_dim_;
  std::vector<float> inv_freq_;
};

// softmax over positions [0, n_keys) of q . keys[p] / sqrt(d), where `keys`
// is [n_keys] rows of `stride` floats of which the first head_dim are used
// (rotated keys). Writes probs[0, n_keys).
void AttentionProbs(const float* q, const float* keys, size_t stride, int32_t n_keys, int head_dim, float* probs);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_SYNTHETIC_TRACE_H_
