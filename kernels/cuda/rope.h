// Rotary position embedding (RoPE), applied in place to the query and key
// heads of a ragged batch of tokens.
//
// Memory layout (device pointers, bf16, strides in elements):
//   q [num_tokens, num_q_heads, head_dim]   token stride q_token_stride
//   k [num_tokens, num_kv_heads, head_dim]  token stride k_token_stride
//   positions [num_tokens] int32            absolute position of each token
// Within a token, heads are contiguous and each head's head_dim elements are
// contiguous; only the token stride is free, so q and k may be views into a
// fused QKV projection output [num_tokens, (nq + 2 * nkv) * head_dim]
// (q = qkv, k = qkv + nq * head_dim, both strides (nq + 2 * nkv) * head_dim);
// the V columns are not touched. The batch is ragged: sequences are simply
// concatenated along the token axis and each token carries its own position.
//
// Rotation (full rotary: rotary dim == head_dim, head_dim even). For pair
// index i in [0, head_dim / 2), angle = position * inv_freq[i], and the pair
// (a, b) becomes (a cos - b sin, a sin + b cos), where
//   kInterleaved: (a, b) = (x[2i], x[2i + 1])          GPT-J; llama.cpp
//                 ROPE_TYPE_NORM, i.e. Llama GGUF files, whose Q/K weights
//                 the converter permuted
//   kHalf:        (a, b) = (x[i], x[i + head_dim / 2])  GPT-NeoX; HF
//                 rotate_half, llama.cpp ROPE_TYPE_NEOX (Qwen2/3, HF Llama)
// inv_freq[i] = theta^(-2i / head_dim) unless `inv_freq` is given: a device
// array of head_dim / 2 floats computed by the host, for scaled variants
// (Llama 3 frequency scaling, YaRN) whose frequencies differ per pair: the
// model's RopeTable (kernels/cpu/rope_scaling.h), as the CPU backend uses.
// cos and sin are multiplied by attention_factor (YaRN's magnitude scaling,
// the table's; 1 otherwise), so the rotated pair is attention_factor times
// the plain rotation.
//
// Arithmetic is fp32 (angles, sincos, rotation) with one bf16 rounding per
// output, as in HF transformers' fp32 RoPE.
//
// The Q and K regions must not overlap (they are distinct heads).
//
// Returns cudaErrorInvalidValue for null q/positions, null k with
// num_kv_heads > 0, num_tokens < 0, a head count < 0, head_dim odd,
// non-positive or above 1024, token strides smaller than the heads they hold,
// theta <= 0 without inv_freq, or attention_factor <= 0; cudaSuccess without launching for num_tokens == 0;
// otherwise the launch status. Asynchronous on `stream`.
#ifndef BEACON_KERNELS_CUDA_ROPE_H_
#define BEACON_KERNELS_CUDA_ROPE_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/rope_style.h"

namespace beacon {

struct RopeParams {
  RopeStyle style = RopeStyle::kHalf;
  float theta = 10000.0f;           // base of the default frequencies
  const float* inv_freq = nullptr;  // optional device [head_dim / 2]; overrides theta
  float attention_factor = 1.0f;    // multiplies cos and sin (RopeTable::attention_factor)
  // The tail padding made explicit and zeroed. Kernels take this struct by value inside
  // their parameter structs, and uninitialised padding beside attention_factor could read
  // as a host pointer to the CPU emulation's argument check (tests/cuda_emu/launch.cc scans
  // parameter structs word by word): it did, flakily, in CudaBackendTest.DummyRopeScalingMatchesCpu.
  int32_t reserved = 0;
};
static_assert(sizeof(RopeParams) == 24, "RopeParams has no implicit padding");

cudaError_t LaunchRope(__nv_bfloat16* q, int64_t q_token_stride, int num_q_heads, __nv_bfloat16* k,
                       int64_t k_token_stride, int num_kv_heads, const int32_t* positions, int64_t num_tokens,
                       int head_dim, const RopeParams& params, cudaStream_t stream);

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_ROPE_H_
