// SwiGLU activation of the Llama-family MLP: out = silu(gate) * up, with
// silu(g) = g / (1 + exp(-g)).
//
// Memory layout (device pointers, bf16, row-major, strides in elements):
//   gate [num_tokens, dim]  row stride in_stride
//   up   [num_tokens, dim]  row stride in_stride
//   out  [num_tokens, dim]  row stride out_stride
// The fused gate_up projection output [num_tokens, 2 * dim] (gate columns
// first, as in vLLM's MergedColumnParallelLinear) is passed as
//   gate = gate_up, up = gate_up + dim, in_stride = 2 * dim.
// Separate gate and up buffers are passed with in_stride = dim.
//
// Arithmetic is fp32 with a single bf16 rounding of the product.
//
// Aliasing: `out` may equal `gate` or `up` when out_stride == in_stride (each
// element is read and then written by the same thread); other overlaps are
// undefined.
//
// Returns cudaErrorInvalidValue for null pointers, num_tokens < 0, dim <= 0,
// strides smaller than dim or more than 2^31 - 1 blocks (one per token and
// 512 columns); cudaSuccess without launching for num_tokens == 0; otherwise
// the launch status. Asynchronous on `stream` (programmatic on a programmatic
// KernelStream, kernel_stream.h).
#ifndef BEACON_KERNELS_CUDA_SWIGLU_H_
#define BEACON_KERNELS_CUDA_SWIGLU_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernel_stream.h"

namespace beacon {

cudaError_t LaunchSwiGlu(const __nv_bfloat16* gate, const __nv_bfloat16* up, int64_t in_stride, __nv_bfloat16* out,
                         int64_t out_stride, int64_t num_tokens, int dim, KernelStream stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_SWIGLU_H_
