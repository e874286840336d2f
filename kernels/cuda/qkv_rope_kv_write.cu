#include <cstdint>

#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/cuda/qkv_rope_kv_write.h"

namespace beacon {
namespace {

// One block per token; warp w handles heads w, w + kWarps, ... of the fused
// row (q heads, then k, then v). A lane owns rotation pairs i = lane + 32 m,
// i.e. elements (ia, ib) = (2i, 2i + 1) or (i, i + head_dim / 2), so bias,
// norm and rotation of a head stay in the lane's registers and the norm's sum
// of squares is one warp reduction. The token's (cos, sin) table is computed
// once into shared memory, as in rope.cu and with the same fp32 formula.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDim = 256;
constexpr int kMaxPairsPerLane = kMaxHeadDim / 2 / 32;

template <RopeStyle kStyle>
__global__ void __launch_bounds__(kThreads)
    QkvRopeKvWriteKernel(const QkvPrepParams p, const PagedKv kv, int layer, const BlockTables tables,
                         const int32_t* __restrict__ tok_seq, const int32_t* __restrict__ tok_slot,
                         const int32_t* __restrict__ tok_pos) {
  __shared__ float cos_sin[kMaxHeadDim];  // [head_dim / 2][2]
  PdlEnter();
  const int64_t t = blockIdx.x;
  const int d = p.head_dim, half = d / 2;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int32_t pos = tok_pos[t];
  for (int i = threadIdx.x; i < half; i += kThreads) {
    const float f = p.rope.inv_freq != nullptr
                        ? p.rope.inv_freq[i]
                        : 1.0f / powf(p.rope.theta, static_cast<float>(2 * i) / static_cast<float>(d));
    float s, c;
    sincosf(static_cast<float>(pos) * f, &s, &c);
    cos_sin[2 * i] = c * p.rope.attention_factor;
    cos_sin[2 * i + 1] = s * p.rope.attention_factor;
  }
  const int bs = kv.layout.block_size;
  const int32_t slot = tok_slot[t];
  const int32_t block = tables.table[static_cast<int64_t>(tok_seq[t]) * tables.stride + slot / bs];
  const int off = slot % bs;
  for (int h = threadIdx.x; h < p.n_kv_heads; h += kThreads) {
    kv.pos[kv.layout.PosIndex(layer, block, h, off)] = pos;
  }
  __syncthreads();

  const int n_heads = p.n_q_heads + 2 * p.n_kv_heads;
  __nv_bfloat16* row = p.qkv + t * n_heads * static_cast<int64_t>(d);
  for (int head = warp; head < n_heads; head += kWarps) {
    const bool is_q = head < p.n_q_heads;
    const bool is_v = head >= p.n_q_heads + p.n_kv_heads;
    const __nv_bfloat16* gain = is_q ? p.q_norm : (is_v ? nullptr : p.k_norm);
    __nv_bfloat16* x = row + static_cast<int64_t>(head) * d;
    const __nv_bfloat16* b = p.bias != nullptr ? p.bias + static_cast<int64_t>(head) * d : nullptr;

    float va[kMaxPairsPerLane], vb[kMaxPairsPerLane];
    float sum_sq = 0.f;
#pragma unroll
    for (int m = 0; m < kMaxPairsPerLane; ++m) {
      const int i = lane + 32 * m;
      va[m] = vb[m] = 0.f;
      if (i < half) {
        const int ia = kStyle == RopeStyle::kInterleaved ? 2 * i : i;
        const int ib = kStyle == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
        va[m] = __bfloat162float(x[ia]);
        vb[m] = __bfloat162float(x[ib]);
        if (b != nullptr) {
          va[m] += __bfloat162float(b[ia]);
          vb[m] += __bfloat162float(b[ib]);
        }
        sum_sq += va[m] * va[m] + vb[m] * vb[m];
      }
    }
    if (gain != nullptr) {  // warp-uniform
      for (int o = 16; o > 0; o >>= 1) sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, o);
      const float scale = rsqrtf(sum_sq / static_cast<float>(d) + p.eps);
#pragma unroll
      for (int m = 0; m < kMaxPairsPerLane; ++m) {
        const int i = lane + 32 * m;
        if (i < half) {
          const int ia = kStyle == RopeStyle::kInterleaved ? 2 * i : i;
          const int ib = kStyle == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
          va[m] = va[m] * scale * __bfloat162float(gain[ia]);
          vb[m] = vb[m] * scale * __bfloat162float(gain[ib]);
        }
      }
    }

    __nv_bfloat16* dst;  // q: in place; k, v: the token's cache row of this kv head
    if (is_q) {
      dst = x;
    } else {
      const int kv_head = is_v ? head - p.n_q_heads - p.n_kv_heads : head - p.n_q_heads;
      dst = (is_v ? kv.v : kv.k) + kv.layout.KvIndex(layer, block, kv_head, off);
    }
    float* pre =
        is_q && p.q_pre_rope != nullptr ? p.q_pre_rope + (t * p.n_q_heads + head) * static_cast<int64_t>(d) : nullptr;
#pragma unroll
    for (int m = 0; m < kMaxPairsPerLane; ++m) {
      const int i = lane + 32 * m;
      if (i < half) {
        const int ia = kStyle == RopeStyle::kInterleaved ? 2 * i : i;
        const int ib = kStyle == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
        float a = va[m], bb = vb[m];
        if (pre != nullptr) {
          pre[ia] = a;
          pre[ib] = bb;
        }
        if (!is_v) {
          const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
          const float ra = a * c - bb * s;
          bb = a * s + bb * c;
          a = ra;
        }
        dst[ia] = __float2bfloat16_rn(a);
        dst[ib] = __float2bfloat16_rn(bb);
      }
    }
  }
}

}  // namespace

cudaError_t LaunchQkvRopeKvWrite(const QkvPrepParams& p, const PagedKv& kv, int layer, const BlockTables& tables,
                                 const int32_t* tok_seq, const int32_t* tok_slot, const int32_t* tok_pos,
                                 KernelStream stream) {
  const PagedKvLayout& l = kv.layout;
  const bool bad_shape = p.n_tokens < 0 || p.n_tokens > INT32_MAX || p.n_q_heads <= 0 || p.n_kv_heads <= 0 ||
                         p.head_dim < 2 || p.head_dim > kMaxHeadDim || p.head_dim % 2 != 0 ||
                         l.n_kv_heads != p.n_kv_heads || l.head_dim != p.head_dim || l.block_size <= 0 ||
                         l.num_blocks <= 0 || layer < 0 || layer >= l.n_layers || tables.stride <= 0 || !(p.eps >= 0.f);
  const bool bad_ptr = p.qkv == nullptr || kv.k == nullptr || kv.v == nullptr || kv.pos == nullptr ||
                       tables.table == nullptr || tok_seq == nullptr || tok_slot == nullptr || tok_pos == nullptr;
  const bool bad_rope = (p.rope.style != RopeStyle::kHalf && p.rope.style != RopeStyle::kInterleaved) ||
                        (p.rope.inv_freq == nullptr && !(p.rope.theta > 0.f)) || !(p.rope.attention_factor > 0.f);
  if (bad_shape || bad_ptr || bad_rope) return cudaErrorInvalidValue;
  if (p.n_tokens == 0) return cudaSuccess;
  const LaunchConfig config(stream, static_cast<unsigned>(p.n_tokens), kThreads, 0);
  auto* kernel = p.rope.style == RopeStyle::kInterleaved ? QkvRopeKvWriteKernel<RopeStyle::kInterleaved>
                                                         : QkvRopeKvWriteKernel<RopeStyle::kHalf>;
  return LaunchResult(cudaLaunchKernelEx(config.get(), kernel, p, kv, layer, tables, tok_seq, tok_slot, tok_pos));
}

}  // namespace beacon
