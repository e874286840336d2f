// RMSNorm on the GPU, plain and fused with the residual add that precedes it
// in every Llama-family block (pre-attention and pre-MLP norms, final norm).
//
// Memory layout (device pointers, row-major, bf16, rows contiguous: the row
// stride equals `hidden`):
//   x        [num_tokens, hidden]  the sub-layer output (or the embeddings)
//   residual [num_tokens, hidden]  the residual stream, updated in place
//   weight   [hidden]              the norm's gain
//   out      [num_tokens, hidden]  the normalised activations
//
// Arithmetic is fp32; bf16 only at loads and stores. Per token t:
//   fused:  r = bf16(x[t] + residual[t]);  residual[t] = r
//           out[t] = bf16(r * rsqrt(mean(r^2) + eps) * weight)
//   plain:  out[t] = bf16(x[t] * rsqrt(mean(x[t]^2) + eps) * weight)
// The fused kernel normalises the residual *as stored* (bf16-rounded), as
// vLLM's fused_add_rms_norm does, so the norm agrees with an unfused RMSNorm
// of the residual a later layer reads.
//
// Aliasing: `out` may equal `x` (in place). `residual` must not overlap `x`,
// `out` or `weight`.
//
// Launchers return cudaErrorInvalidValue for null pointers, num_tokens < 0,
// hidden <= 0 or eps < 0, cudaSuccess without launching for num_tokens == 0,
// and otherwise the launch status (cudaGetLastError). They are asynchronous
// on `stream`.
#ifndef BEACON_KERNELS_CUDA_RMSNORM_H_
#define BEACON_KERNELS_CUDA_RMSNORM_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernel_stream.h"

namespace beacon {

cudaError_t LaunchRmsNorm(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* out, int64_t num_tokens,
                          int hidden, float eps, KernelStream stream);

cudaError_t LaunchFusedAddRmsNorm(const __nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* weight,
                                  __nv_bfloat16* out, int64_t num_tokens, int hidden, float eps, KernelStream stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_RMSNORM_H_
