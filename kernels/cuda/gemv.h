// Small-batch projections, y[n][out] = x[n][in] * W^T for n <= kGemvMaxTokens
// tokens, streaming the bf16 weight matrix once at memory speed.
//
// Why not cuBLAS here: a decode step at batch 1-8 is a matrix-vector product
// whose time is the weight bytes over HBM bandwidth, and cuBLAS's GEMM
// kernels for bf16 at n <= 8 are suspected of reading under peak (the first
// H200 run put our whole batch-1 step, and the PyTorch peer's, at 41% of the
// roofline; issue 44; not yet profiled). Each warp here owns one output row: its lanes read the row in
// 16-byte chunks (a row of 2,560 bf16 is 10 chunks a lane, all in flight
// together), multiply every token's x chunk (x is small and stays in L1/L2)
// and reduce by shuffles. Used by engine/cuda/gemm.cc when
// CudaBackendOptions::small_batch_gemv is set; otherwise cuBLAS.
//
// Layout: W row-major [out][in] (device_weights.h), x [n][in] dense, y
// [n][out] dense, bf16 or fp32 (y_f32). Arithmetic: fp32 products and sums
// (a lane's chunks in order, then a shuffle tree), one rounding to bf16.
//
// Returns cudaErrorInvalidValue unless GemvSupports(...) holds; otherwise the
// launch status. Asynchronous on `stream`, allocates nothing (capturable);
// programmatic on a programmatic KernelStream (kernel_stream.h: the weights'
// first lines are asked of L2 before the wait).
#ifndef BEACON_KERNELS_CUDA_GEMV_H_
#define BEACON_KERNELS_CUDA_GEMV_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernel_stream.h"

namespace beacon {

constexpr int kGemvMaxTokens = 8;

// 1 <= n <= kGemvMaxTokens, 1 <= out <= 2^31 - 1, in > 0 and a multiple of 8
// (whole 16-byte chunks), w and x non-null and 16-byte aligned, y non-null.
bool GemvSupports(const __nv_bfloat16* w, int64_t out, int64_t in, const __nv_bfloat16* x, int64_t n, const void* y);

cudaError_t LaunchGemv(const __nv_bfloat16* w, int64_t out, int64_t in, const __nv_bfloat16* x, int64_t n, void* y,
                       bool y_f32, KernelStream stream);

// The MLP's first half at batch <= kGemvMaxTokens, in one kernel: y[n][ffn] =
// silu(x W_gate^T) * (x W_up^T) with W the fused gate/up matrix [2 ffn][in]
// (gate rows first, device_weights.h). A warp streams gate row r and up row
// ffn + r, rounds both products to bf16 and applies swiglu.cu's formula, so y
// equals LaunchGemv's bf16 output fed to LaunchSwiGlu bit for bit, without
// the [n][2 ffn] intermediate or the second launch. cudaErrorInvalidValue
// unless GemvSupports(w, 2 ffn, in, x, n, y).
cudaError_t LaunchGemvSwiGlu(const __nv_bfloat16* w, int64_t ffn, int64_t in, const __nv_bfloat16* x, int64_t n,
                             __nv_bfloat16* y, KernelStream stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_GEMV_H_
