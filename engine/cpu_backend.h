// The CPU backend: the forward pass of the Llama/Qwen2/Qwen3 families over a
// ragged batch, on the kernels in kernels/cpu/ and the paged cache in kv/.
//
// Weights stay in the format they were loaded in (quantised GGUF types are
// multiplied directly with int8 activations); activations and KV are f32.
#ifndef BEACON_ENGINE_CPU_BACKEND_H_
#define BEACON_ENGINE_CPU_BACKEND_H_

#include <initializer_list>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/backend.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/thread_pool.h"
#include "model/weights.h"

namespace beacon {

class CpuBackend : public Backend {
 public:
  // `weights` and `pool` must outlive the backend. `pool` may be null
  // (single-threaded).
  CpuBackend(const ModelWeights* weights, ThreadPool* pool);
  ThreadPool* host_pool() const override { return pool_; }

  absl::Status Forward(std::span<const ForwardEntry> batch, std::vector<float>* logits) override;
  const ModelConfig& config() const override { return weights_->config; }
  std::string_view device() const override { return "cpu"; }

 private:
  // Per-token bookkeeping for one step, flattened over the batch.
  struct TokenRef {
    int entry;
    int32_t slot;  // KV slot this token's K/V is written to
    int32_t pos;   // RoPE position
  };

  void Resize(int64_t n_tokens);
  void Layer(int l, std::span<const ForwardEntry> batch);
  void Attention(int l, std::span<const ForwardEntry> batch);  // cpu_attention.cc
  void Linear(const Tensor& w, const float* x, int64_t n, float* y);

  const ModelWeights* weights_;
  ThreadPool* pool_;
  std::vector<float> inv_freq_;         // ModelConfig::RopeFrequencies()
  float rope_attention_factor_ = 1.0f;  // multiplies RoPE's cos and sin (YaRN)
  std::vector<TokenRef> tokens_;
  std::vector<float> rope_cs_;  // [n_tokens][head_dim]: RopeCosSin of each token's position
  // Activations, [n_tokens][width]; resized per step, reused across steps.
  std::vector<float> x_, xb_, q_, k_, v_, att_, gate_, up_;
  // Decode attention's per-(token, KV head) segment states and observed
  // probabilities (cpu_attention.cc); grown, reused across layers and steps.
  std::vector<float> decode_partials_, decode_scores_;
  QuantizedRows xq_;
  // Quantised matrices repacked for the 16-row integer kernel, keyed by the
  // tensor's data pointer (packed once at construction; see packed_matrix.h).
  absl::flat_hash_map<const void*, std::unique_ptr<PackedMatrix>> packed_;
  // Matrices of one layer that read the same input and share a packable
  // type, packed as one (rows concatenated): Q with K (and V when it has the
  // same type), gate with up. One matmul instead of two or three: one
  // fork-join and one activation quantisation fewer, and the same result per
  // row, since every row's dot product is computed alone.
  struct FusedLinear {
    std::unique_ptr<PackedMatrix> packed;  // null: not fused
    std::vector<int64_t> rows;             // rows of each part, in order
  };
  std::vector<FusedLinear> fused_qkv_, fused_gate_up_;  // per layer
  std::vector<float> fused_out_;                        // [n_tokens][rows]
  // Runs `f` over x and scatters part i of each output row to outs[i]
  // (row stride = that part's rows).
  void LinearFused(const FusedLinear& f, const float* x, int64_t n, std::initializer_list<float*> outs);
  static FusedLinear Fuse(std::initializer_list<const Tensor*> parts, ThreadPool* pool);
};

}  // namespace beacon

#endif  // BEACON_ENGINE_CPU_BACKEND_H_
