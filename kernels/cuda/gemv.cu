#include <cstdint>

#include "kernels/cuda/gemv.h"
#include "kernels/cuda/programmatic_launch.cuh"

namespace beacon {
namespace {

constexpr int kThreads = 256;  // 8 warps, 8 rows a block
constexpr int kRowsPerBlock = kThreads / 32;

__device__ __forceinline__ void Widen(const uint4& u, float (&f)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// Chunks of its row a lane asks L2 for before the wait (the loop's unroll).
constexpr int kPrefetchChunks = 4;

// kN tokens (1..kGemvMaxTokens), so the accumulators stay in registers.
template <int kN>
__global__ void __launch_bounds__(kThreads) GemvKernel(const __nv_bfloat16* __restrict__ w, int out, int chunks,
                                                       const __nv_bfloat16* __restrict__ x, void* y, bool y_f32) {
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  const uint4* wr = reinterpret_cast<const uint4*>(w) + static_cast<int64_t>(row) * chunks;
  // The weights are no kernel's output: their first lines may come while the
  // previous kernel (x's writer) finishes.
  if (row < out) {
    for (int k = 0, c = lane; k < kPrefetchChunks && c < chunks; ++k, c += 32) PrefetchL2(wr + c);
  }
  PdlEnter();
  if (row >= out) return;  // whole warps leave together
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  float acc[kN];
#pragma unroll
  for (int t = 0; t < kN; ++t) acc[t] = 0.f;
#pragma unroll 4
  for (int c = lane; c < chunks; c += 32) {
    float wf[8];
    Widen(__ldg(wr + c), wf);
#pragma unroll
    for (int t = 0; t < kN; ++t) {
      float xf[8];
      Widen(__ldg(xr + static_cast<int64_t>(t) * chunks + c), xf);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[t] = fmaf(wf[e], xf[e], acc[t]);
    }
  }
#pragma unroll
  for (int t = 0; t < kN; ++t) {
    for (int o = 16; o > 0; o >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
  }
  if (lane < kN) {  // lane t writes token t (every lane holds every sum)
    float v = 0.f;
#pragma unroll
    for (int t = 0; t < kN; ++t) v = t == lane ? acc[t] : v;
    const int64_t at = static_cast<int64_t>(lane) * out + row;
    if (y_f32) {
      static_cast<float*>(y)[at] = v;
    } else {
      static_cast<__nv_bfloat16*>(y)[at] = __float2bfloat16_rn(v);
    }
  }
}

template <int kN>
cudaError_t Launch(const __nv_bfloat16* w, int out, int chunks, const __nv_bfloat16* x, void* y, bool y_f32,
                   KernelStream stream) {
  const unsigned blocks = static_cast<unsigned>((out + kRowsPerBlock - 1) / kRowsPerBlock);
  const LaunchConfig config(stream, blocks, kThreads, 0);
  return LaunchResult(cudaLaunchKernelEx(config.get(), GemvKernel<kN>, w, out, chunks, x, y, y_f32));
}

}  // namespace

bool GemvSupports(const __nv_bfloat16* w, int64_t out, int64_t in, const __nv_bfloat16* x, int64_t n, const void* y) {
  const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return w != nullptr && x != nullptr && y != nullptr && aligned16(w) && aligned16(x) && n >= 1 &&
         n <= kGemvMaxTokens && out >= 1 && out <= INT32_MAX && in > 0 && in % 8 == 0 && in / 8 <= INT32_MAX;
}

cudaError_t LaunchGemv(const __nv_bfloat16* w, int64_t out, int64_t in, const __nv_bfloat16* x, int64_t n, void* y,
                       bool y_f32, KernelStream stream) {
  if (!GemvSupports(w, out, in, x, n, y)) return cudaErrorInvalidValue;
  const int o = static_cast<int>(out), chunks = static_cast<int>(in / 8);
  switch (n) {
    case 1: return Launch<1>(w, o, chunks, x, y, y_f32, stream);
    case 2: return Launch<2>(w, o, chunks, x, y, y_f32, stream);
    case 3: return Launch<3>(w, o, chunks, x, y, y_f32, stream);
    case 4: return Launch<4>(w, o, chunks, x, y, y_f32, stream);
    case 5: return Launch<5>(w, o, chunks, x, y, y_f32, stream);
    case 6: return Launch<6>(w, o, chunks, x, y, y_f32, stream);
    case 7: return Launch<7>(w, o, chunks, x, y, y_f32, stream);
    default: return Launch<8>(w, o, chunks, x, y, y_f32, stream);
  }
}

}  // namespace beacon
