#include <cuda_pipeline.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/decode_attention_mma.h"
#include "kernels/cuda/decode_partition.cuh"
#include "kernels/cuda/paged_attention.h"
#include "kernels/cuda/programmatic_launch.cuh"

namespace beacon {
namespace {

using attention_tiles::Align16;
using attention_tiles::kLog2e;
using attention_tiles::KvTileLoader;
using attention_tiles::LoadBf16;
using attention_tiles::LoadF32;
using attention_tiles::Phys;

// Split-K decode. One block of kThreads per (token, KV head, head chunk of up
// to kMaxGroup query heads, partition). The partition's slots stream through
// shared memory in tiles of kTileKeys keys with a kStages-deep cp.async
// pipeline (16-byte copies), so each K/V row is read from HBM once and
// several tiles are in flight while one is computed. Per tile:
//   1. scores: thread (key, part) dots one key with every query head of the
//      block over 1/kDParts of head_dim (q in shared memory as fp32);
//   2. stats: warp w owns heads w and w + 4: tile max, rescale factor,
//      probabilities (written over the scores) and running sum;
//   3. P V: thread (chunk c, lane-group z) accumulates head_dim chunk c of
//      every head over keys z, z + Z, ...; the Z partial sums are added at the
//      end of the partition.
// Shared K/V rows are XOR-swizzled in 16-byte chunks when head_dim % 64 == 0
// (chunk c of key k sits at c ^ (k & 7)) so that both the key-per-thread reads of step 1 and the
// chunk-per-thread reads of step 3 are free of bank conflicts.
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxGroup = 8;
constexpr int kStages = 3;
constexpr int kMaxSplits = 1024;
constexpr int kMergeThreads = 128;

// kMaxDim: head_dim, or its upper bound when !kExact (head_dim is then read at
// run time). kVec: bf16 elements per copy (8 = 16 bytes; 2 when head_dim % 8).
template <int kMaxDim, int kVec, bool kExact>
struct Cfg {
  static constexpr int kTileKeys = kMaxDim <= 128 ? 64 : 32;
  static constexpr int kDParts = kThreads / kTileKeys;
  static_assert(kTileKeys % 32 == 0 && decode_partition::kAlign % kTileKeys == 0, "tile shape");
};

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Shared memory, in bytes from the dynamic base. The K/V stages double as the
// [Z][kMaxGroup][d] fp32 buffer of the final cross-lane-group reduction.
struct Smem {
  size_t q, sp, stats, total;
};
__host__ __device__ inline Smem DecodeSmem(int tile_keys, int d_parts, int d, int vec) {
  const size_t stages = static_cast<size_t>(kStages) * 2 * tile_keys * d * 2;
  const size_t reduce = static_cast<size_t>(kThreads / (d / vec)) * kMaxGroup * d * 4;
  Smem s;
  s.q = Align16(stages > reduce ? stages : reduce);
  s.sp = s.q + Align16(static_cast<size_t>(kMaxGroup) * d * 4);
  s.stats = s.sp + Align16(static_cast<size_t>(d_parts) * kMaxGroup * tile_keys * 4);
  s.total = s.stats + 3 * kMaxGroup * 4;
  return s;
}

template <int kMaxDim, int kVec, bool kExact>
__global__ void __launch_bounds__(kThreads)
    DecodeSplitKernel(const PagedAttentionParams p, int max_splits, float* ws_acc, float* ws_m, float* ws_l) {
  PdlEnter();
  using C = Cfg<kMaxDim, kVec, kExact>;
  constexpr int T = C::kTileKeys;
  const int d = kExact ? kMaxDim : p.kv.layout.head_dim;
  const int n_chunks = d / kVec;
  const bool swizzle = kVec == 8 && n_chunks % 8 == 0;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  decode_partition::SplitWork w;
  if (!decode_partition::SplitWorkOf(p, kMaxGroup, max_splits, d, &w)) return;
  const int64_t t = w.t;
  const int kv_head = w.kv_head, qh0 = w.qh0, gb = w.gb, split = w.split, n_parts = w.n_parts;
  const int begin = w.begin, end = w.end;
  const int n_tiles = (end - begin + T - 1) / T;

  extern __shared__ __align__(16) unsigned char smem[];
  const Smem layout = DecodeSmem(T, C::kDParts, d, kVec);
  __nv_bfloat16* kv_s = reinterpret_cast<__nv_bfloat16*>(smem);
  float* q_s = reinterpret_cast<float*>(smem + layout.q);  // [kMaxGroup][d]
  float* sp = reinterpret_cast<float*>(smem + layout.sp);  // [kDParts][kMaxGroup][T]
  float* alpha_s = reinterpret_cast<float*>(smem + layout.stats);
  float* m_s = alpha_s + kMaxGroup;
  float* l_s = m_s + kMaxGroup;

  const __nv_bfloat16* q = p.q + t * p.q_token_stride + static_cast<int64_t>(qh0) * d;
  for (int i = tid; i < gb * d; i += kThreads) q_s[i] = __bfloat162float(q[i]);

  const int32_t* table_row = p.tables.table + static_cast<int64_t>(p.tok_seq[t]) * p.tables.stride;
  const KvTileLoader<kVec, kStages> loader(p.kv, table_row, p.layer, kv_head, T, d, d, swizzle, kv_s, n_chunks, tid,
                                           kThreads);
  auto issue = [&](int tile) {
    const int first = begin + tile * T;
    loader.Issue(tile, first, min(T, end - first));
  };

  // Thread roles. Scores: key sc_key, chunks [c_lo, c_hi). P V: chunk pv_c,
  // keys pv_z + i * Z. Stats: heads warp + i * kWarps.
  const int sc_key = tid % T, sc_part = tid / T;
  const int per_part = (n_chunks + C::kDParts - 1) / C::kDParts;
  const int c_lo = sc_part * per_part, c_hi = min(n_chunks, c_lo + per_part);
  const int Z = kThreads / n_chunks;
  const int pv_c = tid % n_chunks, pv_z = tid / n_chunks;
  const bool pv_active = pv_z < Z;
  const float scale_log2 = p.scale * kLog2e;

  constexpr int kHeadsPerWarp = kMaxGroup / kWarps;
  float m_run[kHeadsPerWarp], l_run[kHeadsPerWarp];
#pragma unroll
  for (int i = 0; i < kHeadsPerWarp; ++i) m_run[i] = -INFINITY, l_run[i] = 0.f;
  float acc[kMaxGroup][kVec];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g)
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[g][e] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) issue(s);
    __pipeline_commit();  // empty groups keep the wait count uniform
  }
  for (int tile = 0; tile < n_tiles; ++tile) {
    // The stage refilled here was last read in iteration tile - 1, whose
    // trailing barrier every thread has passed.
    if (tile + kStages - 1 < n_tiles) issue(tile + kStages - 1);
    __pipeline_commit();
    __pipeline_wait_prior(kStages - 1);  // this thread's copies of `tile` landed
    __syncthreads();                     // ... and everyone else's (and q_s)
    const __nv_bfloat16* ks = kv_s + static_cast<size_t>(tile % kStages) * 2 * T * d;
    const __nv_bfloat16* vs = ks + T * d;
    const int nv = min(T, end - (begin + tile * T));

    {  // 1. partial scores
      float dot[kMaxGroup];
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) dot[g] = 0.f;
      if (sc_key < nv) {
        const __nv_bfloat16* krow = ks + sc_key * d;
        for (int c = c_lo; c < c_hi; ++c) {
          float kf[kVec];
          LoadBf16<kVec>(krow + Phys(swizzle, c, sc_key) * kVec, kf);
#pragma unroll
          for (int g = 0; g < kMaxGroup; ++g) {
            if (g < gb) {
              float qf[kVec];
              LoadF32<kVec>(q_s + g * d + c * kVec, qf);
#pragma unroll
              for (int e = 0; e < kVec; ++e) dot[g] = fmaf(qf[e], kf[e], dot[g]);
            }
          }
        }
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g < gb) sp[(sc_part * kMaxGroup + g) * T + sc_key] = dot[g];
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kHeadsPerWarp; ++i) {  // 2. online softmax statistics
      const int g = warp + i * kWarps;
      if (g < gb) {
        float s[T / 32];
        float tile_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < T / 32; ++j) {
          const int key = lane + 32 * j;
          float v = -INFINITY;
          if (key < nv) {
            v = 0.f;
#pragma unroll
            for (int part = 0; part < C::kDParts; ++part) v += sp[(part * kMaxGroup + g) * T + key];
            v *= scale_log2;
          }
          s[j] = v;
          tile_max = fmaxf(tile_max, v);
        }
        const float m_new = fmaxf(m_run[i], WarpMax(tile_max));
        const float m_use = m_new == -INFINITY ? 0.f : m_new;  // no NaN from -inf - -inf
        const float alpha = exp2f(m_run[i] - m_use);
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < T / 32; ++j) {
          const float pr = exp2f(s[j] - m_use);
          sp[g * T + lane + 32 * j] = pr;  // P over part 0 (same thread read it)
          sum += pr;
        }
        l_run[i] = l_run[i] * alpha + WarpSum(sum);
        m_run[i] = m_new;
        if (lane == 0) alpha_s[g] = alpha;
      }
    }
    __syncthreads();
    if (pv_active) {  // 3. P V
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g < gb) {
          const float a = alpha_s[g];
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc[g][e] *= a;
        }
      }
      for (int key = pv_z; key < nv; key += Z) {
        float vf[kVec];
        LoadBf16<kVec>(vs + key * d + Phys(swizzle, pv_c, key) * kVec, vf);
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g < gb) {
            const float pr = sp[g * T + key];
#pragma unroll
            for (int e = 0; e < kVec; ++e) acc[g][e] = fmaf(pr, vf[e], acc[g][e]);
          }
        }
      }
    }
    __syncthreads();
  }
  __pipeline_wait_prior(0);  // only empty groups remain; the stages are free

  float* red = reinterpret_cast<float*>(smem);  // [Z][kMaxGroup][d]
  if (pv_active) {
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g < gb) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) red[(pv_z * kMaxGroup + g) * d + pv_c * kVec + e] = acc[g][e];
      }
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < kHeadsPerWarp; ++i) {
      const int g = warp + i * kWarps;
      if (g < gb) m_s[g] = m_run[i], l_s[g] = l_run[i];
    }
  }
  __syncthreads();
  const bool single = n_parts == 1;
  for (int i = tid; i < gb * d; i += kThreads) {
    const int g = i / d, j = i - g * d;
    float sum = 0.f;
    for (int z = 0; z < Z; ++z) sum += red[(z * kMaxGroup + g) * d + j];
    const int64_t row = t * p.n_q_heads + qh0 + g;  // (token, q head)
    if (single) {
      p.out[row * d + j] = __float2bfloat16_rn(sum / l_s[g]);
    } else {
      ws_acc[(row * max_splits + split) * d + j] = sum;
    }
  }
  if (!single && tid < gb) {
    const int64_t at = (t * p.n_q_heads + qh0 + tid) * max_splits + split;
    ws_m[at] = m_s[tid];
    ws_l[at] = l_s[tid];
  }
}

// One block per (token, query head): out = sum_p 2^(m_p - M) acc_p /
// sum_p 2^(m_p - M) l_p with M = max_p m_p, over the token's partitions.
__global__ void __launch_bounds__(kMergeThreads)
    DecodeMergeKernel(const int32_t* __restrict__ tok_slot, int n_q_heads, int d, int max_splits,
                      const float* __restrict__ ws_acc, const float* __restrict__ ws_m, const float* __restrict__ ws_l,
                      __nv_bfloat16* __restrict__ out) {
  extern __shared__ float weight[];  // [max_splits]
  PdlEnter();
  const int64_t row = blockIdx.x;
  const int n = tok_slot[row / n_q_heads] + 1;
  if (n <= 0) return;
  const int n_parts = (n - 1) / decode_partition::Length(n, max_splits) + 1;
  if (n_parts <= 1) return;  // written by the split kernel
  const float* m = ws_m + row * max_splits;
  const float* l = ws_l + row * max_splits;
  float m_max = -INFINITY;
  for (int i = 0; i < n_parts; ++i) m_max = fmaxf(m_max, m[i]);
  for (int i = threadIdx.x; i < n_parts; i += kMergeThreads) weight[i] = exp2f(m[i] - m_max);
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < n_parts; ++i) total += weight[i] * l[i];
  const float inv = 1.f / total;
  const float* acc = ws_acc + row * max_splits * d;
  for (int j = threadIdx.x; j < d; j += kMergeThreads) {
    float o = 0.f;
    for (int i = 0; i < n_parts; ++i) o = fmaf(weight[i], acc[static_cast<int64_t>(i) * d + j], o);
    out[row * d + j] = __float2bfloat16_rn(o * inv);
  }
}

size_t AlignUp256(size_t b) { return (b + 255) / 256 * 256; }

template <int kMaxDim, int kVec, bool kExact>
cudaError_t LaunchSplit(const PagedAttentionParams& p, int max_splits, float* ws_acc, float* ws_m, float* ws_l,
                        KernelStream stream) {
  using C = Cfg<kMaxDim, kVec, kExact>;
  const int d = p.kv.layout.head_dim;
  const size_t smem = DecodeSmem(C::kTileKeys, C::kDParts, d, kVec).total;
  auto* kernel = DecodeSplitKernel<kMaxDim, kVec, kExact>;
  if (const cudaError_t err = decode_partition::AllowSharedMemory(kernel, smem); err != cudaSuccess) return err;
  const LaunchConfig config(stream, decode_partition::SplitGrid(p, kMaxGroup, max_splits), kThreads, smem);
  return LaunchResult(cudaLaunchKernelEx(config.get(), kernel, p, max_splits, ws_acc, ws_m, ws_l));
}

}  // namespace

bool PagedAttentionParamsValid(const PagedAttentionParams& p) {
  const PagedKvLayout& l = p.kv.layout;
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return p.q != nullptr && p.out != nullptr && p.kv.k != nullptr && p.kv.v != nullptr && aligned16(p.kv.k) &&
         aligned16(p.kv.v) && p.tables.table != nullptr && p.tables.stride > 0 && p.tok_seq != nullptr &&
         p.tok_slot != nullptr && l.n_layers > 0 && p.layer >= 0 && p.layer < l.n_layers && l.n_kv_heads > 0 &&
         l.n_kv_heads <= 65535 && p.n_q_heads > 0 && p.n_q_heads % l.n_kv_heads == 0 && l.head_dim >= 2 &&
         l.head_dim <= 256 && l.head_dim % 2 == 0 && l.block_size > 0 && l.num_blocks > 0 &&
         p.q_token_stride >= static_cast<int64_t>(p.n_q_heads) * l.head_dim && p.n_tokens >= 0 &&
         p.n_tokens <= INT32_MAX && std::isfinite(p.scale) &&
         static_cast<int64_t>(l.n_kv_heads) * ((p.n_q_heads / l.n_kv_heads + kMaxGroup - 1) / kMaxGroup) <= 65535;
}

size_t DecodeAttentionWorkspaceBytes(int64_t n_tokens, int n_q_heads, int head_dim, int max_splits) {
  if (n_tokens <= 0 || n_q_heads <= 0 || head_dim <= 0 || max_splits <= 1) return 0;
  const size_t rows = static_cast<size_t>(n_tokens) * n_q_heads * max_splits;
  return AlignUp256(rows * head_dim * sizeof(float)) + 2 * AlignUp256(rows * sizeof(float));
}

cudaError_t LaunchDecodeAttention(const PagedAttentionParams& p, int max_splits, void* workspace, KernelStream stream,
                                  DecodeAttentionKernel kernel) {
  if (!PagedAttentionParamsValid(p) || max_splits < 1 || max_splits > kMaxSplits ||
      (max_splits > 1 && workspace == nullptr) || p.n_tokens * p.n_q_heads > INT32_MAX ||
      reinterpret_cast<uintptr_t>(workspace) % sizeof(float) != 0) {
    return cudaErrorInvalidValue;
  }
  if (p.n_tokens == 0) return cudaSuccess;
  const int d = p.kv.layout.head_dim;
  const size_t rows = static_cast<size_t>(p.n_tokens) * p.n_q_heads * max_splits;
  float* ws_acc = static_cast<float*>(workspace);
  float* ws_m = max_splits > 1 ? ws_acc + AlignUp256(rows * d * sizeof(float)) / sizeof(float) : nullptr;
  float* ws_l = max_splits > 1 ? ws_m + AlignUp256(rows * sizeof(float)) / sizeof(float) : nullptr;

  cudaError_t err;
  if (kernel == DecodeAttentionKernel::kMma && DecodeMmaSupports(p)) {
    err = LaunchDecodeMmaSplit(p, max_splits, ws_acc, ws_m, ws_l, stream);
  } else if (d == 64) {
    err = LaunchSplit<64, 8, true>(p, max_splits, ws_acc, ws_m, ws_l, stream);
  } else if (d == 128) {
    err = LaunchSplit<128, 8, true>(p, max_splits, ws_acc, ws_m, ws_l, stream);
  } else if (d % 8 == 0) {
    err = LaunchSplit<256, 8, false>(p, max_splits, ws_acc, ws_m, ws_l, stream);
  } else {
    err = LaunchSplit<256, 2, false>(p, max_splits, ws_acc, ws_m, ws_l, stream);
  }
  if (err != cudaSuccess || max_splits == 1) return err;
  const LaunchConfig config(stream, static_cast<unsigned>(p.n_tokens * p.n_q_heads), kMergeThreads,
                            max_splits * sizeof(float));
  return LaunchResult(cudaLaunchKernelEx(config.get(), DecodeMergeKernel, p.tok_slot, p.n_q_heads, d, max_splits,
                                         ws_acc, ws_m, ws_l, p.out));
}

}  // namespace beacon
