// The attention prologue of one layer, fused: bias, per-head RMSNorm of q and
// k, RoPE, and the write of this step's K/V into the paged cache
// (kernels/cuda/paged_kv.h).
//
// Memory layout (device pointers):
//   qkv  [n_tokens][(n_q_heads + 2 * n_kv_heads) * head_dim] bf16, the fused
//        QKV projection: q heads, then k heads, then v heads, each head's
//        head_dim elements contiguous
//   bias [(n_q_heads + 2 * n_kv_heads) * head_dim] bf16 (optional; Qwen2)
//   q_norm, k_norm [head_dim] bf16 (optional; Qwen3 per-head RMSNorm gains)
//   q_pre_rope [n_tokens][n_q_heads * head_dim] fp32 (optional output)
//   tok_seq, tok_slot, tok_pos [n_tokens] int32: block-table row, cache slot
//        and absolute position of each token
//
// Per token t, in fp32 from the bf16 inputs (one rounding per output):
//   x = x + bias                                  every head, if bias
//   x = x * rsqrt(mean(x^2) + eps) * gain         q heads if q_norm, k heads if k_norm
//   q_pre_rope[t] = q                             if q_pre_rope (what BeaconKV observes)
//   q, k = RoPE(q, k) at tok_pos[t]               as kernels/cuda/rope.h (style,
//                                                 theta or inv_freq, attention_factor,
//                                                 same fp32 formula)
//   qkv q heads = bf16(q)                         in place
//   cache K[layer][block][h][off] = bf16(k_h), V[...] = bf16(v_h), pos[...] = tok_pos[t]
//       for every kv head h, with block = tables.table[tok_seq[t] * stride +
//       tok_slot[t] / block_size] and off = tok_slot[t] % block_size.
// The k and v columns of qkv are left unchanged. Nothing else in the cache is
// written.
//
// Aliasing: q_pre_rope, the cache and qkv must not overlap; tokens must write
// distinct (row, slot) pairs (otherwise which write lands is unspecified).
//
// Returns cudaErrorInvalidValue for a null qkv, cache pointer, table or token
// array, n_tokens < 0 or > INT32_MAX, head counts <= 0, head_dim odd, < 2 or >
// 256, a cache layout whose n_kv_heads / head_dim differ from the params or
// whose block_size / num_blocks are <= 0, layer outside [0, n_layers), stride
// <= 0, eps < 0, an unknown RoPE style, theta <= 0 without inv_freq, or
// rope.attention_factor <= 0;
// cudaSuccess without launching for n_tokens == 0; otherwise the launch status.
// Asynchronous on `stream`; graph-capturable. Device-side REQUIRES (unchecked):
// tok_seq / tok_slot address existing table entries holding block ids in
// [0, num_blocks).
#ifndef BEACON_KERNELS_CUDA_QKV_ROPE_KV_WRITE_H_
#define BEACON_KERNELS_CUDA_QKV_ROPE_KV_WRITE_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernel_stream.h"
#include "kernels/cuda/paged_kv.h"
#include "kernels/cuda/rope.h"

namespace beacon {

struct QkvPrepParams {
  __nv_bfloat16* qkv = nullptr;  // [n_tokens][(n_q_heads + 2 * n_kv_heads) * head_dim]
  int64_t n_tokens = 0;
  int n_q_heads = 0, n_kv_heads = 0, head_dim = 0;
  const __nv_bfloat16* bias = nullptr;    // optional, added first
  const __nv_bfloat16* q_norm = nullptr;  // optional, after bias, before RoPE
  const __nv_bfloat16* k_norm = nullptr;  // optional, same for k
  float eps = 1e-6f;                      // RMSNorm epsilon
  int32_t reserved = 0;                   // explicit padding (see RopeParams::reserved)
  RopeParams rope;
  float* q_pre_rope = nullptr;  // optional out, fp32
};

cudaError_t LaunchQkvRopeKvWrite(const QkvPrepParams& p, const PagedKv& kv, int layer, const BlockTables& tables,
                                 const int32_t* tok_seq, const int32_t* tok_slot, const int32_t* tok_pos,
                                 KernelStream stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_QKV_ROPE_KV_WRITE_H_
