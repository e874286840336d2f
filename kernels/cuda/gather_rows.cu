#include "kernels/cuda/gather_rows.h"
#include "kernels/cuda/programmatic_launch.cuh"

namespace beacon {
namespace {

// One block per output row; 16-byte copies when the row allows them.
__global__ void GatherRowsKernel(const __nv_bfloat16* __restrict__ in, const int32_t* __restrict__ rows, int dim,
                                 __nv_bfloat16* __restrict__ out) {
  PdlEnter();
  const int64_t r = blockIdx.x;
  const __nv_bfloat16* src = in + static_cast<int64_t>(rows[r]) * dim;
  __nv_bfloat16* dst = out + r * dim;
  if (dim % 8 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    const int4* s = reinterpret_cast<const int4*>(src);
    int4* d = reinterpret_cast<int4*>(dst);
    for (int i = threadIdx.x; i < dim / 8; i += blockDim.x) d[i] = s[i];
  } else {
    for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
  }
}

}  // namespace

cudaError_t LaunchGatherRows(const __nv_bfloat16* in, const int32_t* rows, int64_t n_rows, int dim, __nv_bfloat16* out,
                             KernelStream stream) {
  if (in == nullptr || rows == nullptr || out == nullptr || n_rows < 0 || dim <= 0) return cudaErrorInvalidValue;
  if (n_rows == 0) return cudaSuccess;
  if (n_rows > 0x7fffffff) return cudaErrorInvalidValue;
  const LaunchConfig config(stream, static_cast<unsigned>(n_rows), 128, 0);
  return LaunchResult(cudaLaunchKernelEx(config.get(), GatherRowsKernel, in, rows, dim, out));
}

}  // namespace beacon
