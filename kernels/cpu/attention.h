// Attention of query heads over one KV head's slots in the paged cache.
//
// GQA-aware: the G query heads that share a KV head are computed together so
// each cached key and value is read once per token, not G times. The decode
// step of prefill_attention.h (a run of one token), with its arithmetic.
#ifndef BEACON_KERNELS_CPU_ATTENTION_H_
#define BEACON_KERNELS_CPU_ATTENTION_H_

#include <cstddef>
#include <cstdint>

namespace beacon {

// One (layer, KV head) of one sequence in the paged layout of kv/kv_cache.h:
// slot s is at k_head_base + block_ids[s / block_size] * block_stride
//                           + (s % block_size) * head_dim.
struct PagedHeadView {
  const float* k_head_base = nullptr;  // KvCache::K(layer, 0, head)
  const float* v_head_base = nullptr;  // KvCache::V(layer, 0, head)
  size_t block_stride = 0;
  const int32_t* block_ids = nullptr;
  int block_size = 16;
  int head_dim = 0;

  const float* key(int32_t slot) const {
    return k_head_base + block_ids[slot / block_size] * block_stride +
           static_cast<size_t>(slot % block_size) * head_dim;
  }
  const float* value(int32_t slot) const {
    return v_head_base + block_ids[slot / block_size] * block_stride +
           static_cast<size_t>(slot % block_size) * head_dim;
  }
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
