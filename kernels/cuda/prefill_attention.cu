#include <cuda_pipeline.h>

#include <cstdint>

#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/paged_attention.h"

namespace beacon {
namespace {

using attention_tiles::Align16;
using attention_tiles::kLog2e;
using attention_tiles::KvTileLoader;
using attention_tiles::LoadBf16;
using attention_tiles::LoadF32;
using attention_tiles::Phys;

// Chunked causal prefill. One block of kThreads per (sequence, query tile,
// KV head, head chunk). The query tile holds kRows rows: row r is token
// r / gp of the tile and query head r % gp of the block's chunk, where gp is
// the chunk's head count rounded up to a power of two (64 / gp tokens per
// tile). K/V tiles of kTileKeys keys stream through shared memory with a
// double-buffered cp.async pipeline and serve all 64 rows. Per tile:
//   1. scores: lane = key, warp w = rows 8w..8w+7 (q rows in shared memory
//      as fp32, broadcast within the warp), causal mask slot <= row's slot;
//   2. stats: four lanes per row (keys 8q..8q+7 each) keep the row's running
//      max and sum and turn scores into probabilities in place;
//   3. P V: thread (chunk c, row group) accumulates chunk c of its rows.
// The score tile is stored transposed, [key][row] with a row pitch of 65
// floats, which keeps steps 1 and 2 free of bank conflicts; K/V rows are
// XOR-swizzled as in decode_attention.cu.
constexpr int kThreads = 256;
constexpr int kRows = 64;
constexpr int kRowsPerWarp = kRows / (kThreads / 32);  // 8
constexpr int kTileKeys = 32;                          // = warp size (step 1)
constexpr int kStatLanes = kThreads / kRows;           // 4
constexpr int kSPitch = kRows + 1;
constexpr int kMaxGroup = 8;
constexpr int kStages = 2;

// Shared memory, in bytes from the dynamic base.
struct Smem {
  size_t q, s, ints, total;
};
__host__ __device__ inline Smem PrefillSmem(int d) {
  Smem m;
  m.q = Align16(static_cast<size_t>(kStages) * 2 * kTileKeys * d * 2);   // K/V stages
  m.s = m.q + Align16(static_cast<size_t>(kRows) * d * 4);               // q [row][d]
  m.ints = m.s + Align16(static_cast<size_t>(kTileKeys) * kSPitch * 4);  // P [key][row]
  m.total = m.ints + 3 * kRows * 4;                                      // row slot, alpha, l
  return m;
}

// kMaxDim / kVec / kExact as in decode_attention.cu: head_dim is kMaxDim when
// kExact, else read at run time (<= kMaxDim); kVec bf16 per copy.
template <int kMaxDim, int kVec, bool kExact>
__global__ void __launch_bounds__(kThreads)
    PrefillKernel(const PagedAttentionParams p, const int32_t* __restrict__ seq_first,
                  const int32_t* __restrict__ seq_n, int q_tiles, int gp) {
  constexpr int T = kTileKeys;
  constexpr int kMaxChunks = kMaxDim / kVec;
  constexpr int kPvRowGroupsMin = kThreads / kMaxChunks;
  constexpr int kPvRows = (kRows + kPvRowGroupsMin - 1) / kPvRowGroupsMin;  // bound on rows per thread
  const int d = kExact ? kMaxDim : p.kv.layout.head_dim;
  const int n_chunks = d / kVec;
  const bool swizzle = kVec == 8 && n_chunks % 8 == 0;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  const int seq = blockIdx.x / q_tiles;
  const int tok_per_tile = kRows / gp;
  const int tile_tok0 = (blockIdx.x % q_tiles) * tok_per_tile;
  const int seq_tokens = seq_n[seq];
  if (tile_tok0 >= seq_tokens) return;
  const int ntok = min(tok_per_tile, seq_tokens - tile_tok0);
  const int64_t tok0 = static_cast<int64_t>(seq_first[seq]) + tile_tok0;

  const int n_kv = p.kv.layout.n_kv_heads;
  const int group = p.n_q_heads / n_kv;
  const int head_chunks = (group + kMaxGroup - 1) / kMaxGroup;
  const int kv_head = blockIdx.y / head_chunks;
  const int g0 = (blockIdx.y % head_chunks) * kMaxGroup;
  const int gb = min(kMaxGroup, group - g0);
  const int qh0 = kv_head * group + g0;

  extern __shared__ __align__(16) unsigned char smem[];
  const Smem layout = PrefillSmem(d);
  __nv_bfloat16* kv_s = reinterpret_cast<__nv_bfloat16*>(smem);
  float* q_s = reinterpret_cast<float*>(smem + layout.q);      // [kRows][d]
  float* s_s = reinterpret_cast<float*>(smem + layout.s);      // [T][kSPitch]
  int* row_slot = reinterpret_cast<int*>(smem + layout.ints);  // -1: padding row
  float* alpha_s = reinterpret_cast<float*>(row_slot + kRows);
  float* l_s = alpha_s + kRows;

  for (int r = tid; r < kRows; r += kThreads) {
    const int tl = r / gp, g = r % gp;
    row_slot[r] = (tl < ntok && g < gb) ? p.tok_slot[tok0 + tl] : -1;
  }
  for (int i = tid; i < kRows * d; i += kThreads) {
    const int r = i / d, j = i - r * d;
    const int tl = r / gp, g = r % gp;
    float v = 0.f;
    if (tl < ntok && g < gb) {
      v = __bfloat162float(p.q[(tok0 + tl) * p.q_token_stride + static_cast<int64_t>(qh0 + g) * d + j]);
    }
    q_s[i] = v;
  }
  __syncthreads();
  int max_slot = -1;
  for (int r = 0; r < kRows; ++r) max_slot = max(max_slot, row_slot[r]);
  const int n_keys = max_slot + 1;
  const int n_tiles = (n_keys + T - 1) / T;

  const int32_t* table_row = p.tables.table + static_cast<int64_t>(p.tok_seq[tok0]) * p.tables.stride;
  const KvTileLoader<kVec, kStages> loader(p.kv, table_row, p.layer, kv_head, T, d, d, swizzle, kv_s, n_chunks, tid,
                                           kThreads);
  auto issue = [&](int tile) {
    const int first = tile * T;
    loader.Issue(tile, first, min(T, n_keys - first));
  };

  // Step 3 roles: chunk pv_c of rows [pv_r0, pv_r0 + pv_rows).
  const int pv_groups = kThreads / n_chunks;
  const int pv_rows = (kRows + pv_groups - 1) / pv_groups;
  const int pv_c = tid % n_chunks;
  const int pv_r0 = (tid / n_chunks) * pv_rows;
  const bool pv_active = tid < pv_groups * n_chunks && pv_r0 < kRows;
  // Step 2 roles.
  const int st_row = tid / kStatLanes, st_q = tid % kStatLanes;
  float m_run = -INFINITY, l_run = 0.f;
  const float scale_log2 = p.scale * kLog2e;

  float acc[kPvRows][kVec];
#pragma unroll
  for (int i = 0; i < kPvRows; ++i)
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[i][e] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) issue(s);
    __pipeline_commit();
  }
  for (int tile = 0; tile < n_tiles; ++tile) {
    if (tile + kStages - 1 < n_tiles) issue(tile + kStages - 1);
    __pipeline_commit();
    __pipeline_wait_prior(kStages - 1);
    __syncthreads();
    const __nv_bfloat16* ks = kv_s + static_cast<size_t>(tile % kStages) * 2 * T * d;
    const __nv_bfloat16* vs = ks + T * d;
    const int first = tile * T;
    const int nv = min(T, n_keys - first);

    {  // 1. scores of key `lane` against rows 8w..8w+7
      float dot[kRowsPerWarp];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) dot[i] = 0.f;
      if (lane < nv) {
        const __nv_bfloat16* krow = ks + lane * d;
        const float* qrow = q_s + warp * kRowsPerWarp * d;
        for (int c = 0; c < n_chunks; ++c) {
          float kf[kVec];
          LoadBf16<kVec>(krow + Phys(swizzle, c, lane) * kVec, kf);
#pragma unroll
          for (int i = 0; i < kRowsPerWarp; ++i) {
            float qf[kVec];
            LoadF32<kVec>(qrow + i * d + c * kVec, qf);
#pragma unroll
            for (int e = 0; e < kVec; ++e) dot[i] = fmaf(qf[e], kf[e], dot[i]);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const int r = warp * kRowsPerWarp + i;
        const bool visible = lane < nv && first + lane <= row_slot[r];
        s_s[lane * kSPitch + r] = visible ? dot[i] * scale_log2 : -INFINITY;
      }
    }
    __syncthreads();
    {  // 2. online softmax of row st_row over keys 8 st_q .. 8 st_q + 7
      constexpr int kKeys = T / kStatLanes;
      float s[kKeys];
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kKeys; ++j) {
        s[j] = s_s[(st_q * kKeys + j) * kSPitch + st_row];
        tile_max = fmaxf(tile_max, s[j]);
      }
#pragma unroll
      for (int o = 1; o < kStatLanes; o <<= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
      const float m_new = fmaxf(m_run, tile_max);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // fully masked so far: p = 0, no NaN
      const float alpha = exp2f(m_run - m_use);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kKeys; ++j) {
        const float pr = exp2f(s[j] - m_use);
        s_s[(st_q * kKeys + j) * kSPitch + st_row] = pr;
        sum += pr;
      }
#pragma unroll
      for (int o = 1; o < kStatLanes; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      l_run = l_run * alpha + sum;
      m_run = m_new;
      if (st_q == 0) alpha_s[st_row] = alpha;
    }
    __syncthreads();
    if (pv_active) {  // 3. P V
#pragma unroll
      for (int i = 0; i < kPvRows; ++i) {
        if (i < pv_rows && pv_r0 + i < kRows) {
          const float a = alpha_s[pv_r0 + i];
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[i][e] *= a;
        }
      }
      for (int key = 0; key < nv; ++key) {
        float vf[kVec];
        LoadBf16<kVec>(vs + key * d + Phys(swizzle, pv_c, key) * kVec, vf);
        const float* prow = s_s + key * kSPitch + pv_r0;
#pragma unroll
        for (int i = 0; i < kPvRows; ++i) {
          if (i < pv_rows && pv_r0 + i < kRows) {
            const float pr = prow[i];
#pragma unroll
            for (int e = 0; e < kVec; ++e) acc[i][e] = fmaf(pr, vf[e], acc[i][e]);
          }
        }
      }
    }
    __syncthreads();
  }
  __pipeline_wait_prior(0);

  if (st_q == 0) l_s[st_row] = l_run;
  __syncthreads();
  if (pv_active) {
    const int64_t out_stride = static_cast<int64_t>(p.n_q_heads) * d;
#pragma unroll
    for (int i = 0; i < kPvRows; ++i) {
      const int r = pv_r0 + i;
      if (i < pv_rows && r < kRows && row_slot[r] >= 0) {
        const float inv = 1.f / l_s[r];
        __nv_bfloat16* o = p.out + (tok0 + r / gp) * out_stride + static_cast<int64_t>(qh0 + r % gp) * d + pv_c * kVec;
#pragma unroll
        for (int e = 0; e < kVec; ++e) o[e] = __float2bfloat16_rn(acc[i][e] * inv);
      }
    }
  }
}

template <int kMaxDim, int kVec, bool kExact>
cudaError_t Launch(const PagedAttentionParams& p, const int32_t* seq_first, const int32_t* seq_n, int n_seqs,
                   int q_tiles, int head_chunks, int gp, cudaStream_t stream) {
  const size_t smem = PrefillSmem(p.kv.layout.head_dim).total;
  auto* kernel = PrefillKernel<kMaxDim, kVec, kExact>;
  if (smem > 48 * 1024) {
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  const dim3 grid(static_cast<unsigned>(static_cast<int64_t>(n_seqs) * q_tiles),
                  static_cast<unsigned>(p.kv.layout.n_kv_heads * head_chunks));
  kernel<<<grid, kThreads, smem, stream>>>(p, seq_first, seq_n, q_tiles, gp);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchPrefillAttention(const PagedAttentionParams& p, const int32_t* seq_first_token,
                                   const int32_t* seq_n_tokens, int n_seqs, int max_seq_tokens, cudaStream_t stream) {
  if (!PagedAttentionParamsValid(p) || seq_first_token == nullptr || seq_n_tokens == nullptr || n_seqs < 0 ||
      max_seq_tokens < 0) {
    return cudaErrorInvalidValue;
  }
  if (n_seqs == 0 || max_seq_tokens == 0 || p.n_tokens == 0) return cudaSuccess;
  const int group = p.n_q_heads / p.kv.layout.n_kv_heads;
  const int head_chunks = (group + kMaxGroup - 1) / kMaxGroup;
  const int chunk = group < kMaxGroup ? group : kMaxGroup;
  int gp = 1;
  while (gp < chunk) gp *= 2;
  const int tok_per_tile = kRows / gp;
  const int q_tiles = (max_seq_tokens + tok_per_tile - 1) / tok_per_tile;
  if (static_cast<int64_t>(n_seqs) * q_tiles > INT32_MAX) return cudaErrorInvalidValue;

  const int d = p.kv.layout.head_dim;
  if (d == 64) return Launch<64, 8, true>(p, seq_first_token, seq_n_tokens, n_seqs, q_tiles, head_chunks, gp, stream);
  if (d == 128) return Launch<128, 8, true>(p, seq_first_token, seq_n_tokens, n_seqs, q_tiles, head_chunks, gp, stream);
  if (d % 8 == 0)
    return Launch<256, 8, false>(p, seq_first_token, seq_n_tokens, n_seqs, q_tiles, head_chunks, gp, stream);
  return Launch<256, 2, false>(p, seq_first_token, seq_n_tokens, n_seqs, q_tiles, head_chunks, gp, stream);
}

}  // namespace beacon
