// cuBLAS: handles, stream and workspace binding, and cublasGemmEx.
//
// Contract:
//  - cublasGemmEx computes column-major C = alpha * op(A) * op(B) + beta * C
//    with op in {N, T}, A/B both bf16 or both fp32, C bf16 or fp32, fp32
//    compute, alpha/beta read from host memory (the default pointer mode).
//    Accumulation is a plain fp32 dot product in index order; cuBLAS sums
//    in another order (and in tensor-core tiles), so results agree to
//    rounding, not bit for bit. Other combinations: NOT_SUPPORTED.
//  - The arguments are validated as cuBLAS does (dimensions, leading
//    dimensions), and every operand must lie entirely inside device memory
//    (reported otherwise). A GEMM is a stream operation on the handle's
//    stream: it runs at issue or is recorded into a capture (streams.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "cublas_v2.h"
#include "emu_internal.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

using namespace emu::internal;

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  NoteUsed();
  if (ProhibitedDuringCapture("cublasCreate")) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!IsValidStream(stream)) return CUBLAS_STATUS_INVALID_VALUE;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

// A user workspace must be device memory, 256-byte aligned.
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && !IsDeviceRange(workspace, bytes)) {
    Report(Severity::kError, "cublasSetWorkspace: workspace not (entirely) in device memory", false);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) return CUBLAS_STATUS_INVALID_VALUE;
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

// Math modes change cuBLAS's algorithm choice, not the emulated result.
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  return handle == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

namespace {

size_t ElementBytes(cudaDataType_t t) { return t == CUDA_R_16BF ? 2 : 4; }

float Load(const void* base, cudaDataType_t t, size_t i) {
  if (t == CUDA_R_16BF) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  return static_cast<const float*>(base)[i];
}

void Store(void* base, cudaDataType_t t, size_t i, float v) {
  if (t == CUDA_R_16BF) {
    static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
  } else {
    static_cast<float*>(base)[i] = v;
  }
}

// Bytes spanned by a column-major rows x cols matrix with leading dimension ld.
size_t Span(int rows, int cols, int ld, size_t element) {
  return (static_cast<size_t>(cols - 1) * ld + rows) * element;
}

}  // namespace

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t a_type, int lda, const void* B,
                            cudaDataType_t b_type, int ldb, const void* beta, void* C, cudaDataType_t c_type, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const bool ops_ok =
      (transa == CUBLAS_OP_N || transa == CUBLAS_OP_T) && (transb == CUBLAS_OP_N || transb == CUBLAS_OP_T);
  const bool types_ok = (a_type == CUDA_R_16BF || a_type == CUDA_R_32F) && a_type == b_type &&
                        (c_type == CUDA_R_16BF || c_type == CUDA_R_32F) && compute == CUBLAS_COMPUTE_32F;
  if (!ops_ok || !types_ok) return CUBLAS_STATUS_NOT_SUPPORTED;
  const int a_rows = transa == CUBLAS_OP_N ? m : k, a_cols = transa == CUBLAS_OP_N ? k : m;
  const int b_rows = transb == CUBLAS_OP_N ? k : n, b_cols = transb == CUBLAS_OP_N ? n : k;
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const bool operands_on_device = (k == 0 || (IsDeviceRange(A, Span(a_rows, a_cols, lda, ElementBytes(a_type))) &&
                                              IsDeviceRange(B, Span(b_rows, b_cols, ldb, ElementBytes(b_type))))) &&
                                  IsDeviceRange(C, Span(m, n, ldc, ElementBytes(c_type)));
  if (!operands_on_device) {
    Report(Severity::kError, "cublasGemmEx: an operand is not (entirely) in device memory", false);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  auto gemm = [=] {
    // op(B) as fp32 columns once (n is the token count, small), then each row
    // of op(A) once, and one dot product per element of C.
    std::vector<float> b_cols(static_cast<size_t>(n) * k), a_row(k);
    for (int j = 0; j < n; ++j) {
      for (int l = 0; l < k; ++l) {
        b_cols[static_cast<size_t>(j) * k + l] = Load(
            B, b_type, transb == CUBLAS_OP_N ? static_cast<size_t>(j) * ldb + l : static_cast<size_t>(l) * ldb + j);
      }
    }
    for (int i = 0; i < m; ++i) {
      for (int l = 0; l < k; ++l) {
        a_row[l] = Load(A, a_type,
                        transa == CUBLAS_OP_T ? static_cast<size_t>(i) * lda + l : static_cast<size_t>(l) * lda + i);
      }
      for (int j = 0; j < n; ++j) {
        const float* b = &b_cols[static_cast<size_t>(j) * k];
        float acc = 0.f;
        for (int l = 0; l < k; ++l) acc += a_row[l] * b[l];
        const size_t c = static_cast<size_t>(j) * ldc + i;
        Store(C, c_type, c, be != 0.f ? al * acc + be * Load(C, c_type, c) : al * acc);
      }
    }
  };
  if (Enqueue(handle->stream, "cublasGemmEx", gemm) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  return CUBLAS_STATUS_SUCCESS;
}
