// The dense projections of the CUDA forward pass, on cuBLAS: bf16 inputs,
// fp32 accumulation (CUBLAS_COMPUTE_32F), bf16 or fp32 output. With
// small_batch_gemv, products of at most kGemvMaxTokens tokens run on
// kernels/cuda/gemv.h instead (a matrix-vector kernel that streams the
// weights at memory speed), the rest on cuBLAS. With programmatic, those
// matrix-vector launches use programmatic dependent launch
// (kernels/cuda/kernel_stream.h); cuBLAS's launches are its own.
//
// Layout: y[n][out] = x[n][in] * W^T with W row-major [out][in] (the weight
// layout of device_weights.h). In cuBLAS's column-major terms this is
// C(out x n) = op_T(A: in x out, lda = in) * B(in x n, ldb = in), ldc = out.
//
// The handle runs on the backend's stream with a fixed workspace, so that
// GEMMs can be captured into CUDA graphs (cuBLAS allocates nothing then).
// Thread ownership: the engine thread.
#ifndef BEACON_ENGINE_CUDA_GEMM_H_
#define BEACON_ENGINE_CUDA_GEMM_H_

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "engine/cuda/device_memory.h"
#include "kernels/cuda/kernel_stream.h"

namespace beacon {

class Gemm {
 public:
  Gemm() = default;
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  absl::Status Init(cudaStream_t stream, bool small_batch_gemv = false, bool programmatic = false);

  // y = x W^T; y is bf16 unless y_f32. n == 0 does nothing.
  absl::Status Linear(const __nv_bfloat16* w, int64_t out, int64_t in, const __nv_bfloat16* x, int64_t n, void* y,
                      bool y_f32 = false);

  // The gated MLP's first half, y[n][ffn] = silu(x W_gate^T) * (x W_up^T), W
  // the fused gate/up matrix [2 ffn][in]: on the matrix-vector path one fused
  // kernel (LaunchGemvSwiGlu, bit for bit the two-step result); otherwise
  // Linear into `gate_up` [n][2 ffn], then LaunchSwiGlu.
  absl::Status GateUpSwiGlu(const __nv_bfloat16* w, int64_t ffn, int64_t in, const __nv_bfloat16* x, int64_t n,
                            __nv_bfloat16* gate_up, __nv_bfloat16* y);

 private:
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool small_batch_gemv_ = false;
  bool programmatic_ = false;
  DeviceAllocation workspace_;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_CUDA_GEMM_H_
