#include "kernels/cuda/embedding.h"
#include "kernels/cuda/programmatic_launch.cuh"

namespace beacon {
namespace {

// One block per token; threads copy the row. Rows are 1-16 KiB, so a block
// per row gives enough parallelism even for a single decode token per
// sequence and keeps the bounds check to one id load per thread.
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    EmbeddingKernel(const __nv_bfloat16* __restrict__ table, int64_t vocab, int dim, const int32_t* __restrict__ ids,
                    __nv_bfloat16* __restrict__ out, int32_t* error_flag) {
  PdlEnter();
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  __nv_bfloat16* o = out + t * dim;
  if (id < 0 || id >= vocab) {
    if (threadIdx.x == 0 && error_flag != nullptr) atomicOr(error_flag, 1);
    const __nv_bfloat16 zero = __float2bfloat16_rn(0.0f);
    for (int i = threadIdx.x; i < dim; i += kThreads) o[i] = zero;
    return;
  }
  const __nv_bfloat16* row = table + static_cast<int64_t>(id) * dim;
  for (int i = threadIdx.x; i < dim; i += kThreads) o[i] = row[i];
}

}  // namespace

cudaError_t LaunchEmbedding(const __nv_bfloat16* table, int64_t vocab, int dim, const int32_t* ids, int64_t num_tokens,
                            __nv_bfloat16* out, int32_t* error_flag, KernelStream stream) {
  if (table == nullptr || ids == nullptr || out == nullptr || vocab <= 0 || dim <= 0 || num_tokens < 0 ||
      num_tokens > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (num_tokens == 0) return cudaSuccess;
  const LaunchConfig config(stream, static_cast<unsigned>(num_tokens), kThreads, 0);
  return LaunchResult(cudaLaunchKernelEx(config.get(), EmbeddingKernel, table, vocab, dim, ids, out, error_flag));
}

}  // namespace beacon
