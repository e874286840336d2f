// Attention of query heads over one KV head's slots in the paged cache.
//
// GQA-aware: the G query heads that share a KV head are computed together so
// each cached key and value is read once per token, not G times. The decode
// step of prefill_attention.h (a run of one token), with its arithmetic.
#ifndef BEACON_KERNELS_CPU_ATTENTION_H_
#define BEACON_KERNELS_CPU_ATTENTION_H_

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/dtype.h"

namespace beacon {

// One (layer, KV head) of one sequence in the paged layout of kv/kv_cache.h:
// slot s is at element k_head_base + block_ids[s / block_size] * block_stride
//                                  + (s % block_size) * head_dim,
// elements of `dtype`: kF32, or kBF16 (the kernels widen each element to f32
// exactly on load, so a bf16 cache gives the f32 arithmetic on the rounded
// values, and the prefill/decode bit-identity holds for both types).
struct PagedHeadView {
  const void* k_head_base = nullptr;  // KvCache::KData(layer, 0, head)
  const void* v_head_base = nullptr;  // KvCache::VData(layer, 0, head)
  size_t block_stride = 0;            // elements
  const int32_t* block_ids = nullptr;
  int block_size = 16;
  int head_dim = 0;
  DType dtype = DType::kF32;

  size_t offset(int32_t slot) const {
    return block_ids[slot / block_size] * block_stride + static_cast<size_t>(slot % block_size) * head_dim;
  }
  // Typed rows; T is float for kF32, uint16_t (bf16 bits) for kBF16.
  template <typename T>
  const T* key_as(int32_t slot) const {
    return static_cast<const T*>(k_head_base) + offset(slot);
  }
  template <typename T>
  const T* value_as(int32_t slot) const {
    return static_cast<const T*>(v_head_base) + offset(slot);
  }
  // REQUIRES dtype == kF32.
  const float* key(int32_t slot) const { return key_as<float>(slot); }
  const float* value(int32_t slot) const { return value_as<float>(slot); }
  // Row `slot` as f32: the cache itself (kF32) or `buf` (head_dim floats)
  // holding the widened bf16 row.
  const float* KeyF32(int32_t slot, float* buf) const;
  const float* ValueF32(int32_t slot, float* buf) const;
};

// out[g] = sum_s softmax_s(scale * q[g] . k_s) v_s over slots [0, n_keys),
// for g < n_q_heads. q and out are [n_q_heads][head_dim].
// `scores` is scratch of n_q_heads * n_keys floats; on return it holds the
// attention probabilities [g][s] (callers may read them for statistics).
// REQUIRES n_keys >= 1.
void PagedAttention(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, float scale, float* scores,
                    float* out);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_ATTENTION_H_
