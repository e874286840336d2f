// CUDA and cuBLAS errors as absl::Status: the engine boundary never lets a
// cudaError_t or cublasStatus_t escape (docs/design.md, "Conventions").
#ifndef BEACON_ENGINE_CUDA_CUDA_STATUS_H_
#define BEACON_ENGINE_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace beacon {

// OK for cudaSuccess; otherwise INTERNAL "<what>: <CUDA's error string>"
// (RESOURCE_EXHAUSTED for an out-of-memory error, which the caller can act on).
inline absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

inline absl::Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": cuBLAS status ", static_cast<int>(st), " (", cublasGetStatusString(st), ")"));
}

}  // namespace beacon

// Returns the Status of a failing CUDA call from the enclosing function.
#define BEACON_CUDA_RETURN_IF_ERROR(expr)                                                          \
  do {                                                                                             \
    if (absl::Status beacon_cuda_st = ::beacon::CudaStatus((expr), #expr); !beacon_cuda_st.ok()) { \
      return beacon_cuda_st;                                                                       \
    }                                                                                              \
  } while (0)

#define BEACON_CUBLAS_RETURN_IF_ERROR(expr)                                                              \
  do {                                                                                                   \
    if (absl::Status beacon_cublas_st = ::beacon::CublasStatus((expr), #expr); !beacon_cublas_st.ok()) { \
      return beacon_cublas_st;                                                                           \
    }                                                                                                    \
  } while (0)

#endif  // BEACON_ENGINE_CUDA_CUDA_STATUS_H_
