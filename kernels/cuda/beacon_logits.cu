#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/beacon_logit_tiles.cuh"
#include "kernels/cuda/beacon_logits.h"

namespace beacon::beacon_logits {
namespace {

__device__ inline size_t QueryRows(const BeaconDims& d) { return static_cast<size_t>(d.recent) + d.beacons; }

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
template <class Tile>
__global__ void __launch_bounds__(kThreads) StatsKernel(Args a, int chunks_per_group) {
  __shared__ KeyRows rows;
  __shared__ typename Tile::Smem ts;
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
    Tile::StageQueries(qh, nq, q0, d, ts);
    for (int32_t chunk = first_chunk; chunk < end_chunk; ++chunk) {
      const int32_t s0 = chunk * kChunkSlots;
      // The previous tile read `rows` before a barrier every thread has passed.
      SetKeyRows(a, layer, h / group, s0, rows);
      __syncthreads();
      const bool in = s0 + lane < a.n_slots;
      const int32_t kpos = rows.pos[lane];
      Tile::StageKeys(rows, 0, d, ts);
      float acc[kQueriesPerThread];
      Tile::Logits(qh, nq, q0, d, rows, 0, ts, acc);
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

// Grid (ceil(chunks / C), n_kv_heads, n_layers), C = Tile::kKeyChunks
// consecutive chunks a block: out = max over the group's queries of their
// probabilities, starting from 0. A tile that keeps C chunks of keys
// resident stages each query tile once for all of them.
template <class Tile>
__global__ void __launch_bounds__(kThreads) ProbMaxKernel(Args a) {
  constexpr int C = Tile::kKeyChunks;
  __shared__ KeyRows rows[C];
  __shared__ typename Tile::Smem ts;
  __shared__ float red[kWarps][32];
  const int kv_head = blockIdx.y, layer = blockIdx.z;
  const int d = a.dims.head_dim, group = a.dims.n_heads / a.dims.n_kv_heads;
  const int32_t s_first = static_cast<int32_t>(blockIdx.x) * C * kChunkSlots;
  int n_chunks = (a.n_slots - s_first + kChunkSlots - 1) / kChunkSlots;  // this block's, >= 1
  n_chunks = n_chunks < C ? n_chunks : C;
  for (int c = 0; c < n_chunks; ++c) SetKeyRows(a, layer, kv_head, s_first + c * kChunkSlots, rows[c]);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  bool valid[C];
  int32_t kpos[C];
  float best[C];
#pragma unroll
  for (int c = 0; c < C; ++c) {
    valid[c] = c < n_chunks && s_first + c * kChunkSlots + lane < a.n_slots;
    kpos[c] = c < n_chunks ? rows[c].pos[lane] : INT32_MAX;
    best[c] = 0.0f;
  }
  for (int c = 0; c < n_chunks; ++c) Tile::StageKeys(rows[c], c, d, ts);  // serve every head of the group
  const size_t q_rows = QueryRows(a.dims);
  for (int g = 0; g < group; ++g) {
    const size_t lh = static_cast<size_t>(layer) * a.dims.n_heads + kv_head * group + g;
    const int nq = a.n_queries[lh];
    const float* qh = a.queries + lh * q_rows * d;
    const float2* st = a.stats + lh * q_rows;
    const int32_t* qpos = a.query_pos + lh * q_rows;
    for (int q0 = 0; q0 < nq; q0 += kTileQueries) {
      Tile::StageQueries(qh, nq, q0, d, ts);
#pragma unroll
      for (int c = 0; c < C; ++c) {
        if (c >= n_chunks) break;  // uniform in the block
        float acc[kQueriesPerThread];
        Tile::Logits(qh, nq, q0, d, rows[c], c, ts, acc);
#pragma unroll
        for (int r = 0; r < kQueriesPerThread; ++r) {
          const int q = q0 + warp * kQueriesPerThread + r;
          if (q >= nq) break;
          if (!valid[c] || kpos[c] > qpos[q]) continue;  // past n_slots, or newer than the query
          const float2 ms = st[q];
          best[c] = fmaxf(best[c], expf(acc[r] * a.scale - ms.x) * ms.y);
        }
      }
    }
  }
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (c >= n_chunks) break;
    __syncthreads();  // red's previous chunk has been read
    red[warp][lane] = best[c];
    __syncthreads();
    if (warp == 0 && valid[c]) {
      float m = red[0][lane];
      for (int w = 1; w < kWarps; ++w) m = fmaxf(m, red[w][lane]);
      a.out[(static_cast<size_t>(layer) * a.dims.n_kv_heads + kv_head) * a.n_slots + s_first + c * kChunkSlots + lane] =
          m;
    }
  }
}

template <class StatsTile, class ProbTile>
cudaError_t Launch(const Args& a, cudaStream_t stream) {
  constexpr unsigned kPer = ProbTile::kKeyChunks;
  const unsigned prob_blocks = (static_cast<unsigned>(NumChunks(a.n_slots)) + kPer - 1) / kPer;
  const unsigned groups = static_cast<unsigned>(NumGroups(a.n_slots));
  const BeaconDims& d = a.dims;
  auto* stats = StatsKernel<StatsTile>;
  stats<<<dim3(groups, d.n_heads, d.n_layers), kThreads, 0, stream>>>(a, static_cast<int>(ChunksPerGroup(a.n_slots)));
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  CombineKernel<<<static_cast<unsigned>(d.n_layers * d.n_heads), kThreads, 0, stream>>>(a, static_cast<int>(groups));
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  auto* prob_max = ProbMaxKernel<ProbTile>;
  prob_max<<<dim3(prob_blocks, d.n_kv_heads, d.n_layers), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

// The probability pass keeps as many chunks of keys resident as fit the
// static 48 KiB beside the query tile: 4 at head_dim 64, 2 at 128.
cudaError_t LaunchProbMax(const Args& a, cudaStream_t stream) {
  if (a.tensor_cores && a.dims.head_dim == 64) return Launch<MmaTile<64, 1>, MmaTile<64, 4>>(a, stream);
  if (a.tensor_cores && a.dims.head_dim == 128) return Launch<MmaTile<128, 1>, MmaTile<128, 2>>(a, stream);
  return Launch<SimtTile, SimtTile>(a, stream);
}

}  // namespace beacon::beacon_logits
