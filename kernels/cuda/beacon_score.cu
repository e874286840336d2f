// LaunchBeaconScore (kernels/cuda/beacon_state.h): BeaconPolicy::Score for
// every (layer, kv head) of one sequence.
//
// Pipeline (one stream, no host round trip):
//   1. BeaconQueriesKernel, one block per (query head, layer): the beacon set
//      (BlockFps when the buffer holds more than K points, else the whole
//      buffer) and the head's scoring queries, rotated, into the workspace:
//      ring entries first, then the beacons in index order (the max
//      aggregate is order-free), with their count.
//   2-4. The softmax over slots needs each query's max and sum before any
//      probability: kernels/cuda/beacon_logits.cu computes the logits twice
//      (per-query softmax stats over groups of slots, a combine, then
//      probabilities and their max) instead
//      of storing a [queries][slots] matrix per head.
//   5. MaxPool1D when pool_kernel > 1.
#include <cmath>

#include "kernels/cuda/beacon_fps.cuh"
#include "kernels/cuda/beacon_logits.h"
#include "kernels/cuda/beacon_state.h"

namespace beacon {
namespace {

using beacon_fps::kThreads;

// RoPE of one pair of a query, QueryRotator's arithmetic (kv/policy/attention_scoring.cc
// with kernels/cpu/ops.cc's Rope on the model's RopeTable): double angle, fp32
// cos/sin times the attention factor, fp32 rotation. `in` is a bf16 state row
// (widened exactly); `in` and `out` do not alias.
__device__ inline void RotatePair(const uint16_t* in, float* out, int pair, int d, int32_t position, RopeStyle style,
                                  float theta, const float* inv_freq, float attention_factor) {
  const float f =
      inv_freq != nullptr ? inv_freq[pair] : static_cast<float>(pow(static_cast<double>(theta), -2.0 * pair / d));
  double sd, cd;
  sincos(static_cast<double>(position) * f, &sd, &cd);
  const float c = static_cast<float>(cd) * attention_factor, s = static_cast<float>(sd) * attention_factor;
  const int ia = style == RopeStyle::kInterleaved ? 2 * pair : pair;
  const int ib = style == RopeStyle::kInterleaved ? 2 * pair + 1 : pair + d / 2;
  const float x0 = beacon_fps::StateF32(in[ia]), x1 = beacon_fps::StateF32(in[ib]);
  out[ia] = x0 * c - x1 * s;
  out[ib] = x0 * s + x1 * c;
}

__global__ void __launch_bounds__(kThreads)
    BeaconQueriesKernel(BeaconDims dims, BeaconStateLayout lay, const void* state, int ring_valid, int32_t position,
                        RopeStyle style, float theta, const float* __restrict__ inv_freq, float attention_factor,
                        float* queries, int32_t* n_queries, int32_t* query_pos) {
  extern __shared__ double smem[];
  const int h = blockIdx.x, layer = blockIdx.y, tid = threadIdx.x;
  const int d = dims.head_dim, H = dims.n_heads, R = dims.recent, U = dims.fps_bound, K = dims.beacons;
  const int half = d / 2;
  const beacon_fps::Smem fs = beacon_fps::CarveSmem(smem, U, d);
  const char* base = static_cast<const char*>(state);
  const size_t lh = static_cast<size_t>(layer) * H + h;
  const uint16_t* ring = reinterpret_cast<const uint16_t*>(base + lay.ring) + static_cast<size_t>(layer) * R * H * d;
  const int32_t* ring_pos = reinterpret_cast<const int32_t*>(base + lay.ring_pos) + static_cast<size_t>(layer) * R;
  const uint16_t* pts = reinterpret_cast<const uint16_t*>(base + lay.fps_pts) + lh * U * d;
  const double* inv = reinterpret_cast<const double*>(base + lay.fps_inv) + lh * U;
  const int size = reinterpret_cast<const int32_t*>(base + lay.fps_size)[lh];

  // Beacons: min_dist[i] == -inf marks them (ContinualFps::Beacons).
  if (size > K) {
    beacon_fps::BlockFps(pts, inv, size, d, K, fs);
  } else {
    for (int i = tid; i < size; i += kThreads) fs.min_dist[i] = -CUDART_INF;
    __syncthreads();
  }
  // Rank the beacons in index order: rank r goes to query row ring_valid + r.
  if (tid == 0) {
    int r = 0;
    for (int i = 0; i < size; ++i) fs.min_dist[i] = fs.min_dist[i] == -CUDART_INF ? r++ : -1.0;
    *fs.result = r;
  }
  __syncthreads();
  const int n_beacons = *fs.result;

  const size_t q_max = static_cast<size_t>(R) + K;
  float* out = queries + lh * q_max * d;
  for (int idx = tid; idx < ring_valid * half; idx += kThreads) {
    const int j = idx / half, pair = idx - j * half;
    RotatePair(ring + (static_cast<size_t>(j) * H + h) * d, out + static_cast<size_t>(j) * d, pair, d, ring_pos[j],
               style, theta, inv_freq, attention_factor);
  }
  for (int idx = tid; idx < size * half; idx += kThreads) {
    const int i = idx / half, pair = idx - i * half;
    const double rank = fs.min_dist[i];
    if (rank < 0.0) continue;
    const size_t row = static_cast<size_t>(ring_valid) + static_cast<int>(rank);
    RotatePair(pts + static_cast<size_t>(i) * d, out + row * d, pair, d, position, style, theta, inv_freq,
               attention_factor);
  }
  // Causal positions: a ring query sees keys up to its own position, a
  // beacon (rotated at the current position) every key.
  int32_t* qp = query_pos + lh * q_max;
  for (int j = tid; j < ring_valid + n_beacons; j += kThreads) qp[j] = j < ring_valid ? ring_pos[j] : position;
  if (tid == 0) n_queries[lh] = ring_valid + n_beacons;
}

__global__ void MaxPoolKernel(const float* __restrict__ in, float* __restrict__ out, int32_t n_slots, int64_t total,
                              int half) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const int64_t row = idx / n_slots;
  const int32_t s = static_cast<int32_t>(idx - row * n_slots);
  const float* r = in + row * n_slots;
  const int32_t lo = s - half > 0 ? s - half : 0;
  const int32_t hi = s + half < n_slots - 1 ? s + half : n_slots - 1;
  float m = r[lo];
  for (int32_t t = lo + 1; t <= hi; ++t) m = fmaxf(m, r[t]);
  out[idx] = m;
}

}  // namespace

size_t BeaconScoreWorkspaceBytes(const BeaconDims& dims, int32_t n_slots) {
  if (!BeaconDimsValid(dims) || n_slots < 0) return 0;
  return BeaconScoreWorkspaceLayout::For(dims, n_slots).total;
}

cudaError_t LaunchBeaconScore(const BeaconDims& dims, const void* state, int32_t ring_count, const PagedKv& kv,
                              const int32_t* block_table, int32_t n_slots, int32_t position, const RopeParams& rope,
                              int pool_kernel, float* scores, void* workspace, cudaStream_t stream,
                              BeaconScoreKernel kernel) {
  const PagedKvLayout& kl = kv.layout;
  if (!BeaconDimsValid(dims) || dims.n_heads > 65535 || dims.n_layers > 65535 || ring_count < 0 || n_slots < 0 ||
      pool_kernel < 1 || pool_kernel % 2 == 0 || kl.n_layers != dims.n_layers || kl.n_kv_heads != dims.n_kv_heads ||
      kl.head_dim != dims.head_dim || kl.block_size <= 0 ||
      (rope.style != RopeStyle::kInterleaved && rope.style != RopeStyle::kHalf) ||
      (rope.inv_freq == nullptr && !(rope.theta > 0.0f)) || !(rope.attention_factor > 0.0f)) {
    return cudaErrorInvalidValue;
  }
  if (n_slots == 0) return cudaSuccess;
  if (state == nullptr || kv.k == nullptr || kv.pos == nullptr || block_table == nullptr || scores == nullptr ||
      workspace == nullptr) {
    return cudaErrorInvalidValue;
  }
  const BeaconScoreWorkspaceLayout w = BeaconScoreWorkspaceLayout::For(dims, n_slots);
  char* ws = static_cast<char*>(workspace);
  beacon_logits::Args a;
  a.dims = dims;
  a.kv = kv;
  a.block_table = block_table;
  a.n_slots = n_slots;
  float* queries = reinterpret_cast<float*>(ws + w.queries);
  int32_t* n_queries = reinterpret_cast<int32_t*>(ws + w.n_queries);
  int32_t* query_pos = reinterpret_cast<int32_t*>(ws + w.query_pos);
  a.queries = queries;
  a.n_queries = n_queries;
  a.query_pos = query_pos;
  a.partials = reinterpret_cast<float2*>(ws + w.partials);
  a.stats = reinterpret_cast<float2*>(ws + w.stats);
  // BeaconPolicy's scale, computed as the CPU computes it.
  a.scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
  a.out = pool_kernel > 1 ? reinterpret_cast<float*>(ws + w.raw) : scores;
  a.tensor_cores = kernel == BeaconScoreKernel::kMma;

  const int ring_valid = ring_count < dims.recent ? ring_count : dims.recent;
  const BeaconStateLayout lay = BeaconStateLayout::For(dims);
  const size_t smem = beacon_fps::SmemBytes(dims.fps_bound, dims.head_dim);
  BeaconQueriesKernel<<<dim3(dims.n_heads, dims.n_layers), kThreads, smem, stream>>>(
      dims, lay, state, ring_valid, position, rope.style, rope.theta, rope.inv_freq, rope.attention_factor, queries,
      n_queries, query_pos);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  err = beacon_logits::LaunchProbMax(a, stream);
  if (err != cudaSuccess || pool_kernel == 1) return err;
  const int64_t total = static_cast<int64_t>(dims.n_layers) * dims.n_kv_heads * n_slots;
  constexpr int kPoolThreads = 256;
  MaxPoolKernel<<<static_cast<unsigned>((total + kPoolThreads - 1) / kPoolThreads), kPoolThreads, 0, stream>>>(
      a.out, scores, n_slots, total, pool_kernel / 2);
  return cudaGetLastError();
}

}  // namespace beacon
