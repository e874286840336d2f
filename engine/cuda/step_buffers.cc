// The device buffers of a CudaBackend step (engine/cuda/cuda_backend.h),
// sized on demand: activations for the step's tokens and rows, the step's
// metadata, BeaconKV observe entries and grammar masks. Each grows only
// (to at least twice the need for the small ones), and a growth drops the
// captured CUDA graphs, whose nodes hold the old addresses.
#include <algorithm>
#include <vector>

#include "engine/cuda/beacon_device_state.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/cuda/paged_attention.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/token_bitmask.h"

namespace beacon {
namespace {

size_t Align256(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

absl::Status CudaBackend::EnsureCapacity(int64_t n_tokens, int64_t n_rows, int64_t meta_ints, int n_observe) {
  if (absl::Status s = EnsureActivations(n_tokens, n_rows); !s.ok()) return s;
  if (absl::Status s = EnsureMetadata(meta_ints); !s.ok()) return s;
  return EnsureObserveEntries(n_observe);
}

absl::Status CudaBackend::EnsureActivations(int64_t n_tokens, int64_t n_rows) {
  if (n_tokens <= cap_tokens_ && n_rows <= cap_rows_) return absl::OkStatus();
  const ModelConfig& c = config_;
  DropGraphs();  // every captured pointer changes
  cap_tokens_ = std::max<int64_t>({n_tokens, cap_tokens_, 64});
  cap_rows_ = std::max<int64_t>({n_rows, cap_rows_, 64});
  const int64_t T = cap_tokens_, R = cap_rows_;
  const size_t bf = sizeof(__nv_bfloat16);
  const int qkv_dim = c.q_dim() + 2 * c.kv_dim();
  std::vector<size_t> sizes = {
      Align256(T * c.hidden * bf),                                      // resid
      Align256(T * c.hidden * bf),                                      // xb
      Align256(T * qkv_dim * bf),                                       // qkv
      Align256(T * c.q_dim() * bf),                                     // att
      Align256(T * c.hidden * bf),                                      // proj
      Align256(T * 2 * c.ffn_hidden * bf),                              // gate_up
      Align256(T * c.ffn_hidden * bf),                                  // ffn
      Align256(R * c.hidden * bf),                                      // rows
      Align256(T * c.q_dim() * sizeof(float)),                          // q_pre
      Align256(T * c.kv_dim() * sizeof(float)),                         // q_mean (group-shared state)
      Align256(R * static_cast<size_t>(c.vocab_size) * sizeof(float)),  // logits
      Align256(R * sizeof(int32_t)),                                    // tokens
      Align256(DecodeAttentionWorkspaceBytes(T, c.n_heads, c.head_dim, options_.max_splits)),
  };
  size_t total = 0;
  for (size_t s : sizes) total += s;
  if (absl::Status s = activations_.Allocate(total, "activations"); !s.ok()) return s;
  char* at = activations_.as<char>();
  auto carve = [&](size_t i) {
    char* p = at;
    at += sizes[i];
    return p;
  };
  resid_ = reinterpret_cast<__nv_bfloat16*>(carve(0));
  xb_ = reinterpret_cast<__nv_bfloat16*>(carve(1));
  qkv_ = reinterpret_cast<__nv_bfloat16*>(carve(2));
  att_ = reinterpret_cast<__nv_bfloat16*>(carve(3));
  proj_ = reinterpret_cast<__nv_bfloat16*>(carve(4));
  gate_up_ = reinterpret_cast<__nv_bfloat16*>(carve(5));
  ffn_ = reinterpret_cast<__nv_bfloat16*>(carve(6));
  rows_ = reinterpret_cast<__nv_bfloat16*>(carve(7));
  q_pre_ = reinterpret_cast<float*>(carve(8));
  q_mean_ = reinterpret_cast<float*>(carve(9));
  logits_ = reinterpret_cast<float*>(carve(10));
  tokens_ = reinterpret_cast<int32_t*>(carve(11));
  attn_workspace_ = carve(12);
  if (absl::Status s = tokens_host_.Reserve(R * sizeof(int32_t), "sampled ids"); !s.ok()) return s;
  sampling_workspace_bytes_ = SamplingWorkspaceBytes(R, c.vocab_size);
  const size_t params = Align256(R * sizeof(DeviceSamplingParams));
  if (absl::Status s = sampling_dev_.Allocate(params + sampling_workspace_bytes_, "sampling parameters"); !s.ok()) {
    return s;
  }
  return sampling_host_.Reserve(R * sizeof(DeviceSamplingParams), "sampling parameters");
}

absl::Status CudaBackend::EnsureMetadata(int64_t meta_ints) {
  if (meta_ints <= cap_meta_) return absl::OkStatus();
  DropGraphs();
  cap_meta_ = std::max<int64_t>(meta_ints * 2, 4096);
  if (absl::Status s = meta_.Allocate(cap_meta_ * sizeof(int32_t), "step metadata"); !s.ok()) return s;
  return meta_host_.Reserve(cap_meta_ * sizeof(int32_t), "step metadata");
}

absl::Status CudaBackend::EnsureObserveEntries(int n_observe) {
  if (n_observe <= cap_observe_) return absl::OkStatus();
  DropGraphs();
  cap_observe_ = std::max(n_observe * 2, 64);
  const size_t bytes = cap_observe_ * sizeof(BeaconObserveEntry);
  if (absl::Status s = observe_dev_.Allocate(bytes, "BeaconKV observe entries"); !s.ok()) return s;
  return observe_host_.Reserve(bytes, "BeaconKV observe entries");
}

absl::Status CudaBackend::PlanObserve() {
  const int64_t n = plan_.n_tokens;
  defer_observe_ = plan_.all_decode && !groups_.empty() && n <= kDeferredObserveTokens;
  if (!defer_observe_ || n <= cap_observe_q_) return absl::OkStatus();
  DropGraphs();
  int64_t cap = 8;
  while (cap < n) cap *= 2;
  const ModelConfig& c = config_;
  const size_t bytes = static_cast<size_t>(c.n_layers) * cap * (c.q_dim() + c.kv_dim()) * sizeof(float);
  if (absl::Status s = observe_q_.Allocate(bytes, "BeaconKV deferred queries"); !s.ok()) return s;
  cap_observe_q_ = cap;
  return absl::OkStatus();
}

absl::Status CudaBackend::UploadMasks(std::span<const EntrySampling> sampling) {
  const int words = TokenMaskWords(config_.vocab_size);
  if (cap_mask_rows_ < cap_rows_) {
    // Captured graphs read the old buffer: they go with it.
    DropGraphs();
    const size_t bytes = static_cast<size_t>(cap_rows_) * words * sizeof(uint32_t);
    if (absl::Status s = masks_dev_.Allocate(bytes, "grammar masks"); !s.ok()) return s;
    if (absl::Status s = masks_host_.Reserve(bytes, "grammar masks"); !s.ok()) return s;
    cap_mask_rows_ = cap_rows_;
  }
  auto* host = masks_host_.as<uint32_t>();
  for (size_t r = 0; r < sampling.size(); ++r) {
    uint32_t* row = host + r * words;
    const std::span<const uint32_t> a = sampling[r].allowed;
    if (a.empty()) {
      std::fill(row, row + words, 0xffffffffu);  // unconstrained: every token allowed
    } else {
      const size_t n = std::min<size_t>(a.size(), words);
      std::copy(a.begin(), a.begin() + n, row);
      std::fill(row + n, row + words, 0u);  // a short mask allows nothing past its end, as on the host
    }
  }
  return CudaStatus(cudaMemcpyAsync(masks_dev_.get(), host, sampling.size() * words * sizeof(uint32_t),
                                    cudaMemcpyHostToDevice, stream_),
                    "uploading grammar masks");
}

}  // namespace beacon
