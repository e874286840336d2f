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

// The weights are no kernel's output: the first lines of a row may come
// while the previous kernel (x's writer) finishes.
__device__ __forceinline__ void PrefetchRow(const uint4* wr, int chunks, int lane) {
  for (int k = 0, c = lane; k < kPrefetchChunks && c < chunks; ++k, c += 32) PrefetchL2(wr + c);
}

// One warp: the dot products of weight row `wr` with kN tokens' x (kN in
// 1..kGemvMaxTokens, so the accumulators stay in registers); every lane ends
// with every token's sum.
template <int kN>
__device__ __forceinline__ void RowDot(const uint4* wr, const uint4* xr, int chunks, int lane, float (&acc)[kN]) {
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
}

// acc[lane] (lane < kN), from registers without dynamic indexing.
template <int kN>
__device__ __forceinline__ float Pick(const float (&acc)[kN], int lane) {
  float v = 0.f;
#pragma unroll
  for (int t = 0; t < kN; ++t) v = t == lane ? acc[t] : v;
  return v;
}

template <int kN>
__global__ void __launch_bounds__(kThreads) GemvKernel(const __nv_bfloat16* __restrict__ w, int out, int chunks,
                                                       const __nv_bfloat16* __restrict__ x, void* y, bool y_f32) {
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  const uint4* wr = reinterpret_cast<const uint4*>(w) + static_cast<int64_t>(row) * chunks;
  if (row < out) PrefetchRow(wr, chunks, lane);
  PdlEnter();
  if (row >= out) return;  // whole warps leave together
  float acc[kN];
  RowDot<kN>(wr, reinterpret_cast<const uint4*>(x), chunks, lane, acc);
  if (lane < kN) {  // lane t writes token t (every lane holds every sum)
    const float v = Pick<kN>(acc, lane);
    const int64_t at = static_cast<int64_t>(lane) * out + row;
    if (y_f32) {
      static_cast<float*>(y)[at] = v;
    } else {
      static_cast<__nv_bfloat16*>(y)[at] = __float2bfloat16_rn(v);
    }
  }
}

// Row r of the output is silu(gate_r . x) * (up_r . x), gate row r and up row
// ffn + r of the fused matrix: each rounded to bf16 first, then the formula
// of swiglu.cu, so the result is that of this GEMV's bf16 output fed to
// LaunchSwiGlu, bit for bit.
template <int kN>
__global__ void __launch_bounds__(kThreads)
    GemvSwiGluKernel(const __nv_bfloat16* __restrict__ w, int ffn, int chunks, const __nv_bfloat16* __restrict__ x,
                     __nv_bfloat16* __restrict__ y) {
  const int lane = threadIdx.x % 32;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  const uint4* gate = reinterpret_cast<const uint4*>(w) + static_cast<int64_t>(row) * chunks;
  const uint4* up = gate + static_cast<int64_t>(ffn) * chunks;
  if (row < ffn) {
    PrefetchRow(gate, chunks, lane);
    PrefetchRow(up, chunks, lane);
  }
  PdlEnter();
  if (row >= ffn) return;  // whole warps leave together
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  float g[kN], u[kN];
  RowDot<kN>(gate, xr, chunks, lane, g);
  RowDot<kN>(up, xr, chunks, lane, u);
  if (lane < kN) {
    const float gv = __bfloat162float(__float2bfloat16_rn(Pick<kN>(g, lane)));
    const float uv = __bfloat162float(__float2bfloat16_rn(Pick<kN>(u, lane)));
    const float silu = gv / (1.0f + expf(-gv));  // as swiglu.cu
    y[static_cast<int64_t>(lane) * ffn + row] = __float2bfloat16_rn(silu * uv);
  }
}

template <int kN>
cudaError_t Launch(const __nv_bfloat16* w, int out, int chunks, const __nv_bfloat16* x, void* y, bool y_f32,
                   KernelStream stream) {
  const unsigned blocks = static_cast<unsigned>((out + kRowsPerBlock - 1) / kRowsPerBlock);
  const LaunchConfig config(stream, blocks, kThreads, 0);
  return LaunchResult(cudaLaunchKernelEx(config.get(), GemvKernel<kN>, w, out, chunks, x, y, y_f32));
}

template <int kN>
cudaError_t LaunchSwiGluRows(const __nv_bfloat16* w, int ffn, int chunks, const __nv_bfloat16* x, __nv_bfloat16* y,
                             KernelStream stream) {
  const unsigned blocks = static_cast<unsigned>((ffn + kRowsPerBlock - 1) / kRowsPerBlock);
  const LaunchConfig config(stream, blocks, kThreads, 0);
  return LaunchResult(cudaLaunchKernelEx(config.get(), GemvSwiGluKernel<kN>, w, ffn, chunks, x, y));
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

cudaError_t LaunchGemvSwiGlu(const __nv_bfloat16* w, int64_t ffn, int64_t in, const __nv_bfloat16* x, int64_t n,
                             __nv_bfloat16* y, KernelStream stream) {
  if (ffn > INT32_MAX / 2 || !GemvSupports(w, 2 * ffn, in, x, n, y)) return cudaErrorInvalidValue;
  const int f = static_cast<int>(ffn), chunks = static_cast<int>(in / 8);
  switch (n) {
    case 1: return LaunchSwiGluRows<1>(w, f, chunks, x, y, stream);
    case 2: return LaunchSwiGluRows<2>(w, f, chunks, x, y, stream);
    case 3: return LaunchSwiGluRows<3>(w, f, chunks, x, y, stream);
    case 4: return LaunchSwiGluRows<4>(w, f, chunks, x, y, stream);
    case 5: return LaunchSwiGluRows<5>(w, f, chunks, x, y, stream);
    case 6: return LaunchSwiGluRows<6>(w, f, chunks, x, y, stream);
    case 7: return LaunchSwiGluRows<7>(w, f, chunks, x, y, stream);
    default: return LaunchSwiGluRows<8>(w, f, chunks, x, y, stream);
  }
}

}  // namespace beacon
