// Block-wide farthest-point sampling (kv/policy/fps.h's rule) and the exact
// admission norm of ContinualFps::Add, shared by beacon_observe.cu (shrinks)
// and beacon_score.cu (beacon choice). Device code only; included by .cu
// files.
//
// Bit-compatibility with kv/policy/fps.cc. Every double operation is an explicit
// _rn intrinsic, so nvcc cannot contract or reorder it, and follows the
// order the CPU build executes (checked in GCC 12's -O3 -march=native
// assembly of fps.cc):
//   unit[i][c]  = double(p[i][c]) * inv[i]                 (one rounding)
//   mean[c]     = sum over i ascending of unit[i][c]       (unfused adds)
//   |mean|^2    = sum over c ascending of mean[c]*mean[c]  (mul, then add: the
//                 vectorised body; GCC fuses only a head_dim % 4 tail)
//   probe       = mean * (1 / sqrt(|mean|^2))              (when |mean|^2 > 0)
//   dot(i)      = fma chain over c ascending from 0.0      (the blocked dot
//                 products are contracted into FMAs)
//   min_dist[i] = min(min_dist[i], 1 - dot(i))
// Ties go to the lowest index in both rules, as the CPU's strict scans do.
#ifndef BEACON_KERNELS_CUDA_BEACON_FPS_CUH_
#define BEACON_KERNELS_CUDA_BEACON_FPS_CUH_

#include <cuda_runtime.h>
#include <math_constants.h>

#include <climits>
#include <cstddef>
#include <cstdint>

namespace beacon {
namespace beacon_fps {

// The state's bf16 form (beacon_state.h): Fp32ToBf16's integer steps
// (kernels/cpu/dtype.cc), so that a quiet NaN and every rounding agree with
// the CPU, and the exact widening back.
__device__ inline uint16_t StateBf16(float f) {
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
__device__ inline float StateF32(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

// Block size of every kernel that calls BlockFps.
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// Dynamic shared memory of BlockFps: n + dim + kWarps + 1 doubles, then
// kWarps + 1 ints.
inline size_t SmemBytes(int n, int dim) {
  return (static_cast<size_t>(n) + dim + kWarps + 1) * sizeof(double) + (kWarps + 1) * sizeof(int);
}

struct Smem {
  double* min_dist;  // [n]: +inf = not yet measured, -inf = chosen
  double* probe;     // [dim]
  double* red_val;   // [kWarps]
  double* scalar;    // [1]
  int* red_idx;      // [kWarps]
  int* result;       // [1]
};

__device__ inline Smem CarveSmem(void* base, int n, int dim) {
  Smem s;
  double* d = static_cast<double*>(base);
  s.min_dist = d;
  s.probe = d + n;
  s.red_val = s.probe + dim;
  s.scalar = s.red_val + kWarps;
  s.red_idx = reinterpret_cast<int*>(s.scalar + 1);
  s.result = s.red_idx + kWarps;
  return s;
}

// Is (av, ai) better than (bv, bi)? Smallest (kMin) or largest value, ties
// to the lowest index.
template <bool kMin>
__device__ inline bool Better(double av, int ai, double bv, int bi) {
  if (av != bv) return kMin ? av < bv : av > bv;
  return ai < bi;
}

// Block-wide arg-best; every thread passes its candidate (or the sentinel
// value +-inf with index INT_MAX) and every thread receives the winner's
// index. Contains two __syncthreads.
template <bool kMin>
__device__ int BlockArgBest(double v, int i, const Smem& s) {
  for (int off = 16; off > 0; off >>= 1) {
    const double ov = __shfl_down_sync(0xffffffffu, v, off);
    const int oi = __shfl_down_sync(0xffffffffu, i, off);
    if (Better<kMin>(ov, oi, v, i)) v = ov, i = oi;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) s.red_val[warp] = v, s.red_idx[warp] = i;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? s.red_val[lane] : (kMin ? CUDART_INF : -CUDART_INF);
    i = lane < kWarps ? s.red_idx[lane] : INT_MAX;
    for (int off = 16; off > 0; off >>= 1) {
      const double ov = __shfl_down_sync(0xffffffffu, v, off);
      const int oi = __shfl_down_sync(0xffffffffu, i, off);
      if (Better<kMin>(ov, oi, v, i)) v = ov, i = oi;
    }
    if (lane == 0) *s.result = i;
  }
  __syncthreads();
  return *s.result;
}

// unit(p) . probe, the CPU's FMA chain.
__device__ inline double UnitDot(const uint16_t* p, double inv, const double* probe, int dim) {
  double acc = 0.0;
  for (int c = 0; c < dim; ++c) acc = __fma_rn(__dmul_rn(static_cast<double>(StateF32(p[c])), inv), probe[c], acc);
  return acc;
}

// Chooses min(k, n) of the n points (bf16 rows of points [n][dim], inverse norms
// inv [n]) by the rule; afterwards s.min_dist[i] == -inf exactly for the
// chosen i. The selection order is not kept: callers need the set (a shrink
// keeps survivors in arrival order; the scores' max is order-free).
// REQUIRES 1 <= k, 1 <= n, blockDim.x == kThreads, all threads call it;
// `points` and `inv` may have been written by this block before a
// __syncthreads (they are read with coherent loads).
__device__ inline void BlockFps(const uint16_t* points, const double* inv, int n, int dim, int k, const Smem& s) {
  const int tid = threadIdx.x;
  if (k > n) k = n;
  // Rule 1: the point least similar to the mean of the unit vectors.
  for (int c = tid; c < dim; c += kThreads) {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) {
      acc = __dadd_rn(acc, __dmul_rn(static_cast<double>(StateF32(points[static_cast<size_t>(i) * dim + c])), inv[i]));
    }
    s.probe[c] = acc;
  }
  for (int i = tid; i < n; i += kThreads) s.min_dist[i] = CUDART_INF;
  __syncthreads();
  if (tid == 0) {
    double m2 = 0.0;
    for (int c = 0; c < dim; ++c) m2 = __dadd_rn(m2, __dmul_rn(s.probe[c], s.probe[c]));
    *s.scalar = m2 > 0.0 ? __ddiv_rn(1.0, __dsqrt_rn(m2)) : 0.0;  // 0: a zero mean stays zero
  }
  __syncthreads();
  const double scale = *s.scalar;
  if (scale != 0.0) {
    for (int c = tid; c < dim; c += kThreads) s.probe[c] = __dmul_rn(s.probe[c], scale);
  }
  __syncthreads();
  double best_v = CUDART_INF;
  int best_i = INT_MAX;
  for (int i = tid; i < n; i += kThreads) {  // ascending: strict keeps the lowest index
    const double dot = UnitDot(points + static_cast<size_t>(i) * dim, inv[i], s.probe, dim);
    if (dot < best_v) best_v = dot, best_i = i;
  }
  int next = BlockArgBest<true>(best_v, best_i, s);

  // Rule 2: repeatedly the point farthest from the chosen set.
  for (int count = 1;; ++count) {
    // Every thread finished reading min_dist and probe before BlockArgBest's
    // barriers, so both may be written now.
    if (tid == 0) s.min_dist[next] = -CUDART_INF;
    if (count == k) break;
    for (int c = tid; c < dim; c += kThreads) {
      s.probe[c] = __dmul_rn(static_cast<double>(StateF32(points[static_cast<size_t>(next) * dim + c])), inv[next]);
    }
    __syncthreads();
    best_v = -CUDART_INF;
    best_i = INT_MAX;
    for (int i = tid; i < n; i += kThreads) {
      double md = s.min_dist[i];
      if (md == -CUDART_INF) continue;  // chosen
      const double dist = __dsub_rn(1.0, UnitDot(points + static_cast<size_t>(i) * dim, inv[i], s.probe, dim));
      if (dist < md) md = dist;
      s.min_dist[i] = md;
      if (md > best_v) best_v = md, best_i = i;
    }
    next = BlockArgBest<false>(best_v, best_i, s);
  }
  __syncthreads();
}

// ContinualFps::Add's squared norm of q rounded to bf16 (what the state
// stores and BeaconPolicy hands ContinualFps), bit for bit, by one thread: 8
// accumulators over full groups of 8 elements (element i + j into
// accumulator j), the tail into accumulator 0, then 0.0 + acc[0] + ... +
// acc[7]. Products of two floats are exact in double, so fused or not they
// round alike.
__device__ inline double SquaredNorm(const float* q, int dim) {
  double acc[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  int i = 0;
  for (; i + 8 <= dim; i += 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const double x = StateF32(StateBf16(q[i + j]));
      acc[j] = __dadd_rn(acc[j], __dmul_rn(x, x));
    }
  }
  for (; i < dim; ++i) {
    const double x = StateF32(StateBf16(q[i]));
    acc[0] = __dadd_rn(acc[0], __dmul_rn(x, x));
  }
  double sum = 0.0;
#pragma unroll
  for (int j = 0; j < 8; ++j) sum = __dadd_rn(sum, acc[j]);
  return sum;
}

}  // namespace beacon_fps
}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_BEACON_FPS_CUH_
