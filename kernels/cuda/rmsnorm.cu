#include <cstdint>

#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/cuda/rmsnorm.h"

namespace beacon {
namespace {

// One block per token row. Each thread owns the same columns (or 16-byte
// chunks of columns) in both passes, so a thread only ever re-reads what it wrote itself:
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

// kW consecutive bf16 values as floats: one element, or eight in one
// 16-byte access (the row and the pointers 16-byte aligned).
template <int kW>
__device__ __forceinline__ void Load(const __nv_bfloat16* p, float (&f)[kW]) {
  if constexpr (kW == 1) {
    f[0] = __bfloat162float(*p);
  } else {
    static_assert(kW == 8, "one element or one 16-byte chunk");
    attention_tiles::LoadBf16<8>(p, f);
  }
}

// Stores kW floats rounded to bf16 (round to nearest even).
template <int kW>
__device__ __forceinline__ void Store(__nv_bfloat16* p, const float (&f)[kW]) {
  if constexpr (kW == 1) {
    *p = __float2bfloat16_rn(f[0]);
  } else {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[i] = static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(f[2 * i]))) |
             static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(f[2 * i + 1]))) << 16;
    }
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// kW: elements a thread takes at once, 8 (16-byte accesses: a 2,560-wide row
// is 320 chunks, about one a thread, so a decode step's single row costs two
// memory round trips instead of ten dependent ones) or 1 (any width).
template <bool kFusedAdd, int kW>
__global__ void __launch_bounds__(kThreads)
    RmsNormKernel(const __nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* __restrict__ weight,
                  __nv_bfloat16* out, int hidden, float eps) {
  PdlEnter();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * hidden;
  const __nv_bfloat16* xr = x + row;
  __nv_bfloat16* rr = kFusedAdd ? residual + row : nullptr;
  __nv_bfloat16* orow = out + row;
  const int groups = hidden / kW;

  float sum_sq = 0.0f;
  for (int g = threadIdx.x; g < groups; g += kThreads) {
    float v[kW];
    Load<kW>(xr + g * kW, v);
    if constexpr (kFusedAdd) {
      float r[kW];
      Load<kW>(rr + g * kW, r);
#pragma unroll
      for (int e = 0; e < kW; ++e) v[e] = __bfloat162float(__float2bfloat16_rn(v[e] + r[e]));
      Store<kW>(rr + g * kW, v);  // exact: v is bf16 already
    }
#pragma unroll
    for (int e = 0; e < kW; ++e) sum_sq += v[e] * v[e];
  }
  const float scale = rsqrtf(BlockSum(sum_sq) / static_cast<float>(hidden) + eps);

  for (int g = threadIdx.x; g < groups; g += kThreads) {
    float v[kW], w[kW];
    Load<kW>((kFusedAdd ? rr : xr) + g * kW, v);
    Load<kW>(weight + g * kW, w);
#pragma unroll
    for (int e = 0; e < kW; ++e) v[e] = v[e] * scale * w[e];
    Store<kW>(orow + g * kW, v);
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
  const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec =
      hidden % 8 == 0 && aligned16(x) && aligned16(weight) && aligned16(out) && (!kFusedAdd || aligned16(residual));
  const LaunchConfig config(stream, static_cast<unsigned>(num_tokens), kThreads, 0);
  auto* kernel = vec ? RmsNormKernel<kFusedAdd, 8> : RmsNormKernel<kFusedAdd, 1>;
  return LaunchResult(cudaLaunchKernelEx(config.get(), kernel, x, residual, weight, out, hidden, eps));
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
