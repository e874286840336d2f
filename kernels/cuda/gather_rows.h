// Row gather for the logits head: out[r] = in[rows[r]], bf16 rows of `dim`
// elements. The CUDA backend gathers each entry's last hidden state (or all
// of them) before the vocabulary GEMM, so the head runs on n_rows, not on
// every prompt token of a prefill chunk.
//
// Memory layout (device pointers, row-major, rows contiguous):
//   in   [n_in][dim]   bf16
//   rows [n_rows]      int32, each in [0, n_in) (the caller's plan guarantees it)
//   out  [n_rows][dim] bf16; must not overlap `in`
//
// Returns cudaErrorInvalidValue for null pointers, n_rows < 0 or dim <= 0;
// cudaSuccess without launching for n_rows == 0; otherwise the launch status.
// Asynchronous on `stream`; graph-capturable.
#ifndef BEACON_KERNELS_CUDA_GATHER_ROWS_H_
#define BEACON_KERNELS_CUDA_GATHER_ROWS_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernel_stream.h"

namespace beacon {

cudaError_t LaunchGatherRows(const __nv_bfloat16* in, const int32_t* rows, int64_t n_rows, int dim, __nv_bfloat16* out,
                             KernelStream stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_GATHER_ROWS_H_
