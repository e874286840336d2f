#include "kernels/cuda/rope.h"

namespace beacon {
namespace {

// One block per token. The block first computes the token's head_dim / 2
// (cos, sin) pairs into shared memory, once, instead of once per head, then
// rotates every (head, pair) of Q and K with them. Each pair is read and
// written by one thread, so the in-place update needs no further sync.
constexpr int kThreads = 128;
constexpr int kMaxHeadDim = 1024;  // bounds the dynamic shared memory (8 KiB)

template <RopeStyle kStyle>
__device__ void RotateHeads(__nv_bfloat16* base, int num_heads, int head_dim, const float* cos_sin) {
  const int half = head_dim / 2;
  const int pairs = num_heads * half;
  for (int p = threadIdx.x; p < pairs; p += kThreads) {
    const int h = p / half;
    const int i = p - h * half;
    __nv_bfloat16* x = base + static_cast<int64_t>(h) * head_dim;
    const int ia = kStyle == RopeStyle::kInterleaved ? 2 * i : i;
    const int ib = kStyle == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
    const float a = __bfloat162float(x[ia]);
    const float b = __bfloat162float(x[ib]);
    const float c = cos_sin[2 * i];
    const float s = cos_sin[2 * i + 1];
    x[ia] = __float2bfloat16_rn(a * c - b * s);
    x[ib] = __float2bfloat16_rn(a * s + b * c);
  }
}

template <RopeStyle kStyle>
__global__ void __launch_bounds__(kThreads)
    RopeKernel(__nv_bfloat16* q, int64_t q_token_stride, int num_q_heads, __nv_bfloat16* k, int64_t k_token_stride,
               int num_kv_heads, const int32_t* __restrict__ positions, int head_dim, float theta,
               const float* __restrict__ inv_freq, float attention_factor) {
  extern __shared__ float cos_sin[];  // [head_dim / 2][2]
  const int64_t t = blockIdx.x;
  const float pos = static_cast<float>(positions[t]);
  const int half = head_dim / 2;
  for (int i = threadIdx.x; i < half; i += kThreads) {
    // Same fp32 formula as HF: 1 / theta^(2i / d), then position * inv_freq.
    const float f = inv_freq != nullptr ? inv_freq[i]
                                        : 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
    float s, c;
    sincosf(pos * f, &s, &c);  // full-range argument reduction (no fast math)
    cos_sin[2 * i] = c * attention_factor;
    cos_sin[2 * i + 1] = s * attention_factor;
  }
  __syncthreads();
  RotateHeads<kStyle>(q + t * q_token_stride, num_q_heads, head_dim, cos_sin);
  if (num_kv_heads > 0) {
    RotateHeads<kStyle>(k + t * k_token_stride, num_kv_heads, head_dim, cos_sin);
  }
}

}  // namespace

cudaError_t LaunchRope(__nv_bfloat16* q, int64_t q_token_stride, int num_q_heads, __nv_bfloat16* k,
                       int64_t k_token_stride, int num_kv_heads, const int32_t* positions, int64_t num_tokens,
                       int head_dim, const RopeParams& params, cudaStream_t stream) {
  const bool bad_shape = num_tokens < 0 || num_tokens > INT32_MAX || num_q_heads < 0 || num_kv_heads < 0 ||
                         head_dim <= 0 || head_dim % 2 != 0 || head_dim > kMaxHeadDim;
  if (bad_shape || q == nullptr || positions == nullptr || (num_kv_heads > 0 && k == nullptr) ||
      q_token_stride < static_cast<int64_t>(num_q_heads) * head_dim ||
      (num_kv_heads > 0 && k_token_stride < static_cast<int64_t>(num_kv_heads) * head_dim) ||
      (params.inv_freq == nullptr && !(params.theta > 0.0f)) || !(params.attention_factor > 0.0f)) {
    return cudaErrorInvalidValue;
  }
  if (num_tokens == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(num_tokens));
  const size_t shared = static_cast<size_t>(head_dim) * sizeof(float);
  switch (params.style) {
    case RopeStyle::kInterleaved:
      RopeKernel<RopeStyle::kInterleaved><<<grid, kThreads, shared, stream>>>(
          q, q_token_stride, num_q_heads, k, k_token_stride, num_kv_heads, positions, head_dim, params.theta,
          params.inv_freq, params.attention_factor);
      break;
    case RopeStyle::kHalf:
      RopeKernel<RopeStyle::kHalf><<<grid, kThreads, shared, stream>>>(
          q, q_token_stride, num_q_heads, k, k_token_stride, num_kv_heads, positions, head_dim, params.theta,
          params.inv_freq, params.attention_factor);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace beacon
