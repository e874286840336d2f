#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <mma.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/decode_attention_mma.h"
#include "kernels/cuda/decode_partition.cuh"
#include "kernels/cuda/programmatic_launch.cuh"

namespace beacon {
namespace {

namespace wmma = nvcuda::wmma;
using attention_tiles::kLog2e;
using attention_tiles::KvTileLoader;

// One block of 4 warps per (token, KV head, chunk of up to 16 query heads,
// partition), as the CUDA-core kernel. The partition's keys stream through
// shared memory in tiles of 64 (cp.async, kStages deep; rows padded by 16
// bytes, so the 8 rows a matrix load reads at once fall in distinct banks).
// Per tile:
//   1. S = Q K^T, warp w: keys 16w .. 16w + 15, all of head_dim; the group's
//      queries are 16 rows (zero past the group), held as fragments for the
//      whole partition;
//   2. online softmax, thread (row = tid / 8, part = tid % 8): 8 keys of one
//      head, the row's max and sum over its 8 lanes; P rounded to bf16 (the
//      sum adds the rounded values, so the weights P V uses are normalised
//      exactly); the row's running output rescaled in shared memory;
//   3. O += P V, warp w: head_dim columns [w d / 4, (w + 1) d / 4).
// The running output is fp32 in shared memory because CUDA leaves the
// element-to-lane mapping of an accumulator fragment unspecified, so a
// per-row rescale cannot be done in registers portably.
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kM = 16;           // query heads per block (tensor-core rows)
constexpr int kT = 16 * kWarps;  // keys per tile
constexpr int kStages = 2;
constexpr int kRowThreads = kThreads / kM;  // softmax threads per head
static_assert(decode_partition::kAlign % kT == 0, "partitions are whole tiles");
static_assert(kT / kRowThreads == 8, "softmax: 8 keys a thread");

template <int kD>
struct Layout {
  static constexpr int kLd = kD + 8;   // K, V and Q rows (bf16)
  static constexpr int kSLd = kT + 4;  // S (fp32)
  static constexpr int kPLd = kT + 8;  // P (bf16)
  static constexpr int kOLd = kD + 4;  // O (fp32)
  static constexpr size_t Up(size_t b) { return (b + 127) / 128 * 128; }
  static constexpr size_t kStagesBytes = Up(static_cast<size_t>(kStages) * 2 * kT * kLd * 2);
  static constexpr size_t kQ = kStagesBytes;
  static constexpr size_t kS = kQ + Up(kM * kLd * 2);
  static constexpr size_t kP = kS + Up(kM * kSLd * 4);
  static constexpr size_t kO = kP + Up(kM * kPLd * 2);
  // + 128: the kernel aligns the dynamic base itself (wmma needs 32 bytes;
  // CUDA guarantees 16).
  static constexpr size_t kTotal = kO + Up(kM * kOLd * 4) + 128;
};

__device__ __forceinline__ float RowMax(float v) {  // over the 8 lanes of a row
  for (int o = kRowThreads / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float RowSum(float v) {
  for (int o = kRowThreads / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int kD>
__global__ void __launch_bounds__(kThreads)
    DecodeMmaSplitKernel(const PagedAttentionParams p, int max_splits, float* ws_acc, float* ws_m, float* ws_l) {
  PdlEnter();
  using L = Layout<kD>;
  const int tid = threadIdx.x, warp = tid / 32;
  decode_partition::SplitWork w;
  if (!decode_partition::SplitWorkOf(p, kM, max_splits, kD, &w)) return;
  const int64_t t = w.t;
  const int kv_head = w.kv_head, qh0 = w.qh0, gb = w.gb, split = w.split, n_parts = w.n_parts;
  const int begin = w.begin, end = w.end;
  const int n_tiles = (end - begin + kT - 1) / kT;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((128 - reinterpret_cast<uintptr_t>(smem_raw) % 128) % 128);
  __nv_bfloat16* kv_s = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem + L::kQ);
  float* s_s = reinterpret_cast<float*>(smem + L::kS);
  __nv_bfloat16* p_s = reinterpret_cast<__nv_bfloat16*>(smem + L::kP);
  float* o_s = reinterpret_cast<float*>(smem + L::kO);

  const __nv_bfloat16* q = p.q + t * p.q_token_stride + static_cast<int64_t>(qh0) * kD;
  for (int i = tid; i < kM * kD; i += kThreads) {
    const int r = i / kD, c = i % kD;
    q_s[r * L::kLd + c] = r < gb ? q[r * kD + c] : __float2bfloat16(0.f);
  }
  for (int i = tid; i < kM * L::kOLd; i += kThreads) o_s[i] = 0.f;

  const int32_t* table_row = p.tables.table + static_cast<int64_t>(p.tok_seq[t]) * p.tables.stride;
  const KvTileLoader<8, kStages> loader(p.kv, table_row, p.layer, kv_head, kT, kD, L::kLd, /*swizzle=*/false, kv_s,
                                        kD / 8, tid, kThreads);
  auto issue = [&](int tile) {
    const int first = begin + tile * kT;
    loader.Issue(tile, first, min(kT, end - first));
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) issue(s);
    __pipeline_commit();  // empty groups keep the wait count uniform
  }
  __syncthreads();  // q_s
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> q_frag[kD / 16];
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) wmma::load_matrix_sync(q_frag[kk], q_s + kk * 16, L::kLd);

  const int row = tid / kRowThreads, part = tid % kRowThreads;
  const float scale_log2 = p.scale * kLog2e;
  float m_run = -INFINITY, l_run = 0.f;  // of head `row`; the same in its 8 lanes
  for (int tile = 0; tile < n_tiles; ++tile) {
    // The stage refilled here was last read in iteration tile - 1, whose
    // trailing barrier every thread has passed.
    if (tile + kStages - 1 < n_tiles) issue(tile + kStages - 1);
    __pipeline_commit();
    __pipeline_wait_prior(kStages - 1);
    __syncthreads();
    const __nv_bfloat16* ks = kv_s + static_cast<size_t>(tile % kStages) * 2 * kT * L::kLd;
    __nv_bfloat16* vs = kv_s + static_cast<size_t>(tile % kStages) * 2 * kT * L::kLd + kT * L::kLd;
    const int nv = min(kT, end - (begin + tile * kT));

    {  // 1. S = Q K^T for this warp's 16 keys
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> s_frag;
      wmma::fill_fragment(s_frag, 0.f);
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> k_frag;
        wmma::load_matrix_sync(k_frag, ks + 16 * warp * L::kLd + kk * 16, L::kLd);
        wmma::mma_sync(s_frag, q_frag[kk], k_frag, s_frag);
      }
      wmma::store_matrix_sync(s_s + 16 * warp, s_frag, L::kSLd, wmma::mem_row_major);
    }
    // V rows past the last key hold stale data; P is 0 there, but 0 * NaN is NaN.
    for (int i = tid; i < (kT - nv) * kD; i += kThreads) vs[(nv + i / kD) * L::kLd + i % kD] = __float2bfloat16(0.f);
    __syncthreads();
    {  // 2. online softmax of head `row` over keys part * 8 .. part * 8 + 7
      float s[8];
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int key = part * 8 + j;
        s[j] = row < gb && key < nv ? s_s[row * L::kSLd + key] * scale_log2 : -INFINITY;
        tile_max = fmaxf(tile_max, s[j]);
      }
      const float m_new = fmaxf(m_run, RowMax(tile_max));
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // no NaN from -inf - -inf
      const float alpha = exp2f(m_run - m_use);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const __nv_bfloat16 pr = __float2bfloat16_rn(exp2f(s[j] - m_use));
        p_s[row * L::kPLd + part * 8 + j] = pr;
        sum += __bfloat162float(pr);
      }
      l_run = l_run * alpha + RowSum(sum);
      m_run = m_new;
      for (int c = part * (kD / kRowThreads); c < (part + 1) * (kD / kRowThreads); ++c) o_s[row * L::kOLd + c] *= alpha;
    }
    __syncthreads();
    {  // 3. O += P V for this warp's columns
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> p_frag[kT / 16];
#pragma unroll
      for (int kk = 0; kk < kT / 16; ++kk) wmma::load_matrix_sync(p_frag[kk], p_s + kk * 16, L::kPLd);
#pragma unroll
      for (int j = 0; j < kD / (16 * kWarps); ++j) {
        const int col0 = warp * (kD / kWarps) + j * 16;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> o_frag;
        wmma::load_matrix_sync(o_frag, o_s + col0, L::kOLd, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < kT / 16; ++kk) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> v_frag;
          wmma::load_matrix_sync(v_frag, vs + kk * 16 * L::kLd + col0, L::kLd);
          wmma::mma_sync(o_frag, p_frag[kk], v_frag, o_frag);
        }
        wmma::store_matrix_sync(o_s + col0, o_frag, L::kOLd, wmma::mem_row_major);
      }
    }
    __syncthreads();
  }
  __pipeline_wait_prior(0);  // only empty groups remain

  if (row >= gb) return;
  const int64_t out_row = t * p.n_q_heads + qh0 + row;  // (token, q head)
  const bool single = n_parts == 1;
  for (int c = part * (kD / kRowThreads); c < (part + 1) * (kD / kRowThreads); ++c) {
    const float o = o_s[row * L::kOLd + c];
    if (single) {
      p.out[out_row * kD + c] = __float2bfloat16_rn(o / l_run);
    } else {
      ws_acc[(out_row * max_splits + split) * kD + c] = o;
    }
  }
  if (!single && part == 0) {
    ws_m[out_row * max_splits + split] = m_run;
    ws_l[out_row * max_splits + split] = l_run;
  }
}

template <int kD>
cudaError_t LaunchSplit(const PagedAttentionParams& p, int max_splits, float* ws_acc, float* ws_m, float* ws_l,
                        KernelStream stream) {
  constexpr size_t smem = Layout<kD>::kTotal;
  auto* kernel = DecodeMmaSplitKernel<kD>;
  if (const cudaError_t err = decode_partition::AllowSharedMemory(kernel, smem); err != cudaSuccess) return err;
  const LaunchConfig config(stream, decode_partition::SplitGrid(p, kM, max_splits), kThreads, smem);
  return LaunchResult(cudaLaunchKernelEx(config.get(), kernel, p, max_splits, ws_acc, ws_m, ws_l));
}

}  // namespace

bool DecodeMmaSupports(const PagedAttentionParams& p) {
  return p.kv.layout.head_dim == 64 || p.kv.layout.head_dim == 128;
}

cudaError_t LaunchDecodeMmaSplit(const PagedAttentionParams& p, int max_splits, float* ws_acc, float* ws_m, float* ws_l,
                                 KernelStream stream) {
  if (p.kv.layout.head_dim == 64) return LaunchSplit<64>(p, max_splits, ws_acc, ws_m, ws_l, stream);
  if (p.kv.layout.head_dim == 128) return LaunchSplit<128>(p, max_splits, ws_acc, ws_m, ws_l, stream);
  return cudaErrorInvalidValue;
}

}  // namespace beacon
