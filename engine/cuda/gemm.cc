#include "engine/cuda/gemm.h"

#include "engine/cuda/cuda_status.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/swiglu.h"

namespace beacon {
namespace {

// cuBLAS's own recommendation for Hopper is 32 MiB of workspace.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

}  // namespace

Gemm::~Gemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

absl::Status Gemm::Init(cudaStream_t stream, bool small_batch_gemv, bool programmatic) {
  stream_ = stream;
  small_batch_gemv_ = small_batch_gemv;
  programmatic_ = programmatic;
  BEACON_CUBLAS_RETURN_IF_ERROR(cublasCreate(&handle_));
  BEACON_CUBLAS_RETURN_IF_ERROR(cublasSetStream(handle_, stream));
  if (absl::Status s = workspace_.Allocate(kWorkspaceBytes, "cuBLAS workspace"); !s.ok()) return s;
  BEACON_CUBLAS_RETURN_IF_ERROR(cublasSetWorkspace(handle_, workspace_.get(), workspace_.bytes()));
  // Tensor-core math with fp32 accumulation: the default for bf16 inputs.
  BEACON_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
  return absl::OkStatus();
}

absl::Status Gemm::Linear(const __nv_bfloat16* w, int64_t out, int64_t in, const __nv_bfloat16* x, int64_t n, void* y,
                          bool y_f32) {
  if (n == 0) return absl::OkStatus();
  if (out > INT32_MAX || in > INT32_MAX || n > INT32_MAX) return absl::InvalidArgumentError("GEMM dimension over 2^31");
  if (small_batch_gemv_ && GemvSupports(w, out, in, x, n, y)) {
    BEACON_CUDA_RETURN_IF_ERROR(LaunchGemv(w, out, in, x, n, y, y_f32, KernelStream(stream_, programmatic_)));
    return absl::OkStatus();
  }
  const float alpha = 1.0f, beta = 0.0f;
  BEACON_CUBLAS_RETURN_IF_ERROR(
      cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(n), static_cast<int>(in),
                   &alpha, w, CUDA_R_16BF, static_cast<int>(in), x, CUDA_R_16BF, static_cast<int>(in), &beta, y,
                   y_f32 ? CUDA_R_32F : CUDA_R_16BF, static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

absl::Status Gemm::GateUpSwiGlu(const __nv_bfloat16* w, int64_t ffn, int64_t in, const __nv_bfloat16* x, int64_t n,
                                __nv_bfloat16* gate_up, __nv_bfloat16* y) {
  if (n == 0) return absl::OkStatus();
  const KernelStream stream(stream_, programmatic_);
  if (small_batch_gemv_ && GemvSupports(w, 2 * ffn, in, x, n, y)) {  // 2 ffn <= 2^31 - 1 there
    BEACON_CUDA_RETURN_IF_ERROR(LaunchGemvSwiGlu(w, ffn, in, x, n, y, stream));
    return absl::OkStatus();
  }
  // Linear refuses 2 ffn over 2^31 - 1, so ffn fits an int below.
  if (absl::Status s = Linear(w, 2 * ffn, in, x, n, gate_up); !s.ok()) return s;
  BEACON_CUDA_RETURN_IF_ERROR(LaunchSwiGlu(gate_up, gate_up + ffn, 2 * ffn, y, ffn, n, static_cast<int>(ffn), stream));
  return absl::OkStatus();
}

}  // namespace beacon
