// A model's weights on the device, in bf16, in the layout the CUDA forward
// pass consumes.
//
// Every matrix is row-major [out_features][in_features] (the host layout of
// model/weights.h), converted to bf16 at load: GGUF quantised types
// are dequantised on the host (DequantizeRow) and rounded once; BF16 sources
// are copied bit for bit. Projections that read the same input are fused
// into one matrix so each step runs one GEMM for them:
//   wqkv    [(n_heads + 2 n_kv_heads) head_dim][hidden]  rows q, then k, then v
//   w_gate_up [2 ffn_hidden][hidden]                     rows gate, then up
// Vectors (norm gains, biases) are bf16 too; bqkv concatenates the biases in
// the same order as wqkv's rows. `output` aliases `tok_embd` when tied.
#ifndef BEACON_ENGINE_CUDA_DEVICE_WEIGHTS_H_
#define BEACON_ENGINE_CUDA_DEVICE_WEIGHTS_H_

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/cuda/device_memory.h"
#include "model/weights.h"

namespace beacon {

struct DeviceLayerWeights {
  const __nv_bfloat16* attn_norm = nullptr;  // [hidden]
  const __nv_bfloat16* wqkv = nullptr;
  const __nv_bfloat16* bqkv = nullptr;    // null unless config.qkv_bias
  const __nv_bfloat16* q_norm = nullptr;  // null unless config.qk_norm
  const __nv_bfloat16* k_norm = nullptr;
  const __nv_bfloat16* wo = nullptr;        // [hidden][q_dim]
  const __nv_bfloat16* ffn_norm = nullptr;  // [hidden]
  const __nv_bfloat16* w_gate_up = nullptr;
  const __nv_bfloat16* w_down = nullptr;  // [hidden][ffn_hidden]
};

class DeviceWeights {
 public:
  // Converts and uploads every tensor (one allocation for all of them).
  // RESOURCE_EXHAUSTED when the device is too small, naming the bytes.
  absl::Status Upload(const ModelWeights& weights);

  const __nv_bfloat16* tok_embd() const { return tok_embd_; }        // [vocab][hidden]
  const __nv_bfloat16* output_norm() const { return output_norm_; }  // [hidden]
  const __nv_bfloat16* output() const { return output_; }            // [vocab][hidden]
  const DeviceLayerWeights& layer(int l) const { return layers_[l]; }
  // Bytes of the matrices one decode step streams (the roofline's numerator):
  // every layer's matrices and the output head once.
  size_t streamed_bytes() const { return streamed_bytes_; }
  size_t total_bytes() const { return memory_.bytes(); }

 private:
  DeviceAllocation memory_;
  const __nv_bfloat16* tok_embd_ = nullptr;
  const __nv_bfloat16* output_norm_ = nullptr;
  const __nv_bfloat16* output_ = nullptr;
  std::vector<DeviceLayerWeights> layers_;
  size_t streamed_bytes_ = 0;
};

// Host-side conversion of rows [row_begin, row_end) of `t` to bf16 bits,
// appended to `out` (exposed for tests: a GGUF Q4_1 row dequantised then
// rounded once).
void ConvertRowsToBf16(const Tensor& t, int64_t row_begin, int64_t row_end, std::vector<uint16_t>* out);

}  // namespace beacon

#endif  // BEACON_ENGINE_CUDA_DEVICE_WEIGHTS_H_
