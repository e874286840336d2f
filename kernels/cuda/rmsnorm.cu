#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/cuda/rmsnorm.h"

namespace beacon {
namespace {

// One block per token row. Each thread owns the columns tid, tid + blockDim,
// ... in both passes, so a thread only ever re-reads what it wrote itself:
// that is what makes out == x and the residual round trip safe without extra
// synchronisation. Accesses are coalesced across a warp. `x` is not marked
// __restrict__ because `out` may alias it.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ float BlockSum(float v) {
  __shared__ float warp_sums[kWarps];
  __shared__ float total;
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < kWarps ? warp_sums[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) {
      s += __shfl_xor_sync(0xffffffffu, s, offset);
    }
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

template <bool kFusedAdd>
__global__ void __launch_bounds__(kThreads)
    RmsNormKernel(const __nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* __restrict__ weight,
                  __nv_bfloat16* out, int hidden, float eps) {
  PdlEnter();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * hidden;
  const __nv_bfloat16* xr = x + row;
  __nv_bfloat16* rr = kFusedAdd ? residual + row : nullptr;
  __nv_bfloat16* orow = out + row;

  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += kThreads) {
    float v = __bfloat162float(xr[i]);
    if constexpr (kFusedAdd) {
      const __nv_bfloat16 r = __float2bfloat16_rn(v + __bfloat162float(rr[i]));
      rr[i] = r;
      v = __bfloat162float(r);
    }
    sum_sq += v * v;
  }
  const float scale = rsqrtf(BlockSum(sum_sq) / static_cast<float>(hidden) + eps);

  for (int i = threadIdx.x; i < hidden; i += kThreads) {
    const float v = kFusedAdd ? __bfloat162float(rr[i]) : __bfloat162float(xr[i]);
    orow[i] = __float2bfloat16_rn(v * scale * __bfloat162float(weight[i]));
  }
}

template <bool kFusedAdd>
cudaError_t Launch(const __nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* weight, __nv_bfloat16* out,
                   int64_t num_tokens, int hidden, float eps, KernelStream stream) {
  if (x == nullptr || weight == nullptr || out == nullptr || (kFusedAdd && residual == nullptr) || num_tokens < 0 ||
      hidden <= 0 || !(eps >= 0.0f) || num_tokens > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (num_tokens == 0) return cudaSuccess;
  const LaunchConfig config(stream, static_cast<unsigned>(num_tokens), kThreads, 0);
  return LaunchResult(
      cudaLaunchKernelEx(config.get(), RmsNormKernel<kFusedAdd>, x, residual, weight, out, hidden, eps));
}

}  // namespace

cudaError_t LaunchRmsNorm(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* out, int64_t num_tokens,
                          int hidden, float eps, KernelStream stream) {
  return Launch<false>(x, nullptr, weight, out, num_tokens, hidden, eps, stream);
}

cudaError_t LaunchFusedAddRmsNorm(const __nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* weight,
                                  __nv_bfloat16* out, int64_t num_tokens, int hidden, float eps, KernelStream stream) {
  return Launch<true>(x, residual, weight, out, num_tokens, hidden, eps, stream);
}

}  // namespace beacon
