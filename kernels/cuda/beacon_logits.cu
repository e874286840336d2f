#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/beacon_logits.h"

namespace beacon::beacon_logits {
namespace {

// A block scores kChunkSlots slots (lane = slot) against tiles of
// kTileQueries queries (warp w holds queries w * 8 .. w * 8 + 7 of the tile
// in registers), staging head_dim in chunks of kDimChunk through shared
// memory. Per 4 dimensions a thread does one float4 key load (row pitch
// kDimChunk + 4 floats: the 8 lanes of a quarter-warp hit distinct banks),
// eight broadcast float4 query loads and 32 FMAs.
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kQueriesPerThread = 8;
constexpr int kTileQueries = kWarps * kQueriesPerThread;
constexpr int kDimChunk = 64;
constexpr int kKeyPitch = kDimChunk + 4;

struct TileSmem {
  __align__(16) float keys[kChunkSlots * kKeyPitch];
  __align__(16) float queries[kTileQueries * kDimChunk];
  const __nv_bfloat16* key_row[kChunkSlots];  // nullptr past n_slots
  int32_t key_pos[kChunkSlots];               // kv.pos of the chunk's slots (INT32_MAX past n_slots)
};

__device__ inline size_t QueryRows(const BeaconDims& d) { return static_cast<size_t>(d.recent) + d.beacons; }

// Caller synchronises before the first LogitTile.
__device__ void SetKeyRows(const Args& a, int layer, int kv_head, int32_t s0, TileSmem& sm) {
  if (threadIdx.x < kChunkSlots) {
    const int32_t s = s0 + static_cast<int32_t>(threadIdx.x);
    const PagedKvLayout& l = a.kv.layout;
    const bool in = s < a.n_slots;
    sm.key_row[threadIdx.x] =
        in ? a.kv.k + l.KvIndex(layer, a.block_table[s / l.block_size], kv_head, s % l.block_size) : nullptr;
    sm.key_pos[threadIdx.x] =
        in ? a.kv.pos[l.PosIndex(layer, a.block_table[s / l.block_size], kv_head, s % l.block_size)] : INT32_MAX;
  }
}

// acc[r] = q[q0 + warp * 8 + r] . key[lane] over head_dim, FMAs in ascending
// dimension order; rows past nq and slots past n_slots see zeros. Every
// thread of the block calls it (it synchronises).
__device__ void LogitTile(const float* qh, int nq, int q0, int d, TileSmem& sm, float (&acc)[kQueriesPerThread]) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  constexpr int kPairs = kDimChunk / 2;
#pragma unroll
  for (int r = 0; r < kQueriesPerThread; ++r) acc[r] = 0.0f;
  const bool warp_busy = q0 + warp * kQueriesPerThread < nq;
  for (int c0 = 0; c0 < d; c0 += kDimChunk) {
    const int width = d - c0 < kDimChunk ? d - c0 : kDimChunk;  // even
    for (int idx = tid; idx < kChunkSlots * kPairs; idx += kThreads) {
      const int s = idx / kPairs, c = 2 * (idx - s * kPairs);
      float2 v = make_float2(0.0f, 0.0f);
      const __nv_bfloat16* row = sm.key_row[s];
      if (row != nullptr && c < width) v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(row + c0 + c));
      sm.keys[s * kKeyPitch + c] = v.x;
      sm.keys[s * kKeyPitch + c + 1] = v.y;
    }
    for (int idx = tid; idx < kTileQueries * kPairs; idx += kThreads) {
      const int j = idx / kPairs, c = 2 * (idx - j * kPairs);
      const int q = q0 + j;
      float2 v = make_float2(0.0f, 0.0f);
      if (q < nq && c < width) v = *reinterpret_cast<const float2*>(qh + static_cast<size_t>(q) * d + c0 + c);
      sm.queries[j * kDimChunk + c] = v.x;
      sm.queries[j * kDimChunk + c + 1] = v.y;
    }
    __syncthreads();
    if (warp_busy) {
      const int width4 = (width + 3) & ~3;  // the padding holds zeros
      const float* krow = sm.keys + lane * kKeyPitch;
      const float* qrows = sm.queries + warp * kQueriesPerThread * kDimChunk;
      for (int c = 0; c < width4; c += 4) {
        const float4 k = *reinterpret_cast<const float4*>(krow + c);
#pragma unroll
        for (int r = 0; r < kQueriesPerThread; ++r) {
          const float4 q = *reinterpret_cast<const float4*>(qrows + r * kDimChunk + c);
          acc[r] = fmaf(q.x, k.x, acc[r]);
          acc[r] = fmaf(q.y, k.y, acc[r]);
          acc[r] = fmaf(q.z, k.z, acc[r]);
          acc[r] = fmaf(q.w, k.w, acc[r]);
        }
      }
    }
    __syncthreads();
  }
}

__device__ inline float WarpMax(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ inline float WarpSum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Grid (groups, n_heads, n_layers): (max, sum exp(x - max)) of every query
// of head h over the group's chunks, merged chunk by chunk (online softmax:
// the running sum is rescaled by exp(old max - new max)).
__global__ void __launch_bounds__(kThreads) StatsKernel(Args a, int chunks_per_group) {
  __shared__ TileSmem sm;
  const int h = blockIdx.y, layer = blockIdx.z;
  const size_t lh = static_cast<size_t>(layer) * a.dims.n_heads + h;
  const int nq = a.n_queries[lh];
  if (nq == 0) return;
  const int d = a.dims.head_dim, group = a.dims.n_heads / a.dims.n_kv_heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t q_rows = QueryRows(a.dims);
  const float* qh = a.queries + lh * q_rows * d;
  const int32_t* qpos = a.query_pos + lh * q_rows;
  const int32_t first_chunk = static_cast<int32_t>(blockIdx.x) * chunks_per_group;
  int32_t end_chunk = first_chunk + chunks_per_group;
  const int32_t n_chunks = static_cast<int32_t>(NumChunks(a.n_slots));
  if (end_chunk > n_chunks) end_chunk = n_chunks;
  for (int q0 = 0; q0 < nq; q0 += kTileQueries) {
    // Running stats of the thread's warp's queries (equal in every lane).
    float run_m[kQueriesPerThread], run_l[kQueriesPerThread];
#pragma unroll
    for (int r = 0; r < kQueriesPerThread; ++r) run_m[r] = -INFINITY, run_l[r] = 0.0f;
    for (int32_t chunk = first_chunk; chunk < end_chunk; ++chunk) {
      const int32_t s0 = chunk * kChunkSlots;
      SetKeyRows(a, layer, h / group, s0, sm);  // the previous LogitTile ended with a barrier
      __syncthreads();
      const bool in = s0 + lane < a.n_slots;
      const int32_t kpos = sm.key_pos[lane];
      float acc[kQueriesPerThread];
      LogitTile(qh, nq, q0, d, sm, acc);
#pragma unroll
      for (int r = 0; r < kQueriesPerThread; ++r) {
        const int q = q0 + warp * kQueriesPerThread + r;
        if (q >= nq) break;                        // uniform in the warp
        const bool valid = in && kpos <= qpos[q];  // causal: keys newer than the query are masked
        const float x = valid ? acc[r] * a.scale : -INFINITY;
        const float m = WarpMax(x);
        if (m == -INFINITY) continue;  // the query sees no slot of this chunk (uniform in the warp)
        const float e = WarpSum(valid ? expf(x - m) : 0.0f);
        const float new_m = fmaxf(run_m[r], m);
        run_l[r] = run_l[r] * expf(run_m[r] - new_m) + e * expf(m - new_m);
        run_m[r] = new_m;
      }
    }
#pragma unroll
    for (int r = 0; r < kQueriesPerThread; ++r) {
      const int q = q0 + warp * kQueriesPerThread + r;
      if (q >= nq) break;
      if (lane == 0) a.partials[(lh * q_rows + q) * gridDim.x + blockIdx.x] = make_float2(run_m[r], run_l[r]);
    }
  }
}

// Grid (n_layers * n_heads): per query, (max, 1 / sum) over all groups; a
// warp per query.
__global__ void __launch_bounds__(kThreads) CombineKernel(Args a, int n_groups) {
  const size_t lh = blockIdx.x;
  const int nq = a.n_queries[lh];
  const size_t q_rows = QueryRows(a.dims);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int q = warp; q < nq; q += kWarps) {
    const float2* p = a.partials + (lh * q_rows + q) * n_groups;
    float m = -INFINITY;
    for (int c = lane; c < n_groups; c += 32) m = fmaxf(m, p[c].x);
    m = WarpMax(m);
    float l = 0.0f;
    // A query that saw no slot at all (every partial -inf): stats (-inf, 0),
    // and ProbMaxKernel gives it nothing.
    for (int c = lane; c < n_groups && m != -INFINITY; c += 32) l += p[c].y * expf(p[c].x - m);
    l = WarpSum(l);
    if (lane == 0) a.stats[lh * q_rows + q] = make_float2(m, m == -INFINITY ? 0.0f : 1.0f / l);
  }
}

// Grid (chunks, n_kv_heads, n_layers): out = max over the group's queries of
// their probabilities, starting from 0.
__global__ void __launch_bounds__(kThreads) ProbMaxKernel(Args a) {
  __shared__ TileSmem sm;
  __shared__ float red[kWarps][32];
  const int kv_head = blockIdx.y, layer = blockIdx.z;
  const int d = a.dims.head_dim, group = a.dims.n_heads / a.dims.n_kv_heads;
  const int32_t s0 = static_cast<int32_t>(blockIdx.x) * kChunkSlots;
  SetKeyRows(a, layer, kv_head, s0, sm);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool valid = s0 + lane < a.n_slots;
  const int32_t kpos = sm.key_pos[lane];
  const size_t q_rows = QueryRows(a.dims);
  float best = 0.0f;
  for (int g = 0; g < group; ++g) {
    const size_t lh = static_cast<size_t>(layer) * a.dims.n_heads + kv_head * group + g;
    const int nq = a.n_queries[lh];
    const float* qh = a.queries + lh * q_rows * d;
    const float2* st = a.stats + lh * q_rows;
    const int32_t* qpos = a.query_pos + lh * q_rows;
    for (int q0 = 0; q0 < nq; q0 += kTileQueries) {
      float acc[kQueriesPerThread];
      LogitTile(qh, nq, q0, d, sm, acc);
#pragma unroll
      for (int r = 0; r < kQueriesPerThread; ++r) {
        const int q = q0 + warp * kQueriesPerThread + r;
        if (q >= nq) break;
        if (!valid || kpos > qpos[q]) continue;  // past n_slots, or newer than the query
        const float2 ms = st[q];
        best = fmaxf(best, expf(acc[r] * a.scale - ms.x) * ms.y);
      }
    }
  }
  red[warp][lane] = best;
  __syncthreads();
  if (warp == 0 && valid) {
    float m = red[0][lane];
    for (int w = 1; w < kWarps; ++w) m = fmaxf(m, red[w][lane]);
    a.out[(static_cast<size_t>(layer) * a.dims.n_kv_heads + kv_head) * a.n_slots + s0 + lane] = m;
  }
}

}  // namespace

cudaError_t LaunchProbMax(const Args& a, cudaStream_t stream) {
  const unsigned chunks = static_cast<unsigned>(NumChunks(a.n_slots));
  const unsigned groups = static_cast<unsigned>(NumGroups(a.n_slots));
  const BeaconDims& d = a.dims;
  StatsKernel<<<dim3(groups, d.n_heads, d.n_layers), kThreads, 0, stream>>>(
      a, static_cast<int>(ChunksPerGroup(a.n_slots)));
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  CombineKernel<<<static_cast<unsigned>(d.n_layers * d.n_heads), kThreads, 0, stream>>>(a, static_cast<int>(groups));
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  ProbMaxKernel<<<dim3(chunks, d.n_kv_heads, d.n_layers), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace beacon::beacon_logits
