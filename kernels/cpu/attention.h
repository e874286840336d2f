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

// One (layer, KV head) of one sequence in the paged layout of kv/store/kv_cache.h:
// slot s's row starts at element k_head_base + block_ids[s / block_size] *
// block_stride + (s % block_size) * head_dim, elements of `dtype`: kF32,
// kBF16, or kQ8_0 (head_dim % 32 == 0; a row is head_dim / 32 blocks of
// dtype.h). The kernels widen each element to f32 exactly on load, so a bf16
// or q8_0 cache gives the f32 arithmetic on the stored values, and the
// prefill/decode bit-identity holds for every type.
struct PagedHeadView {
  const void* k_head_base = nullptr;  // KvCache::KData(layer, 0, head)
  const void* v_head_base = nullptr;  // KvCache::VData(layer, 0, head)
  size_t block_stride = 0;            // elements
  const int32_t* block_ids = nullptr;
  int block_size = 16;
  int head_dim = 0;
  DType dtype = DType::kF32;

  // Element offset of a slot's row, and the bytes of `elems` elements.
  size_t offset(int32_t slot) const {
    return block_ids[slot / block_size] * block_stride + static_cast<size_t>(slot % block_size) * head_dim;
  }
  size_t bytes(size_t elems) const {
    switch (dtype) {
      case DType::kBF16: return 2 * elems;
      case DType::kQ8_0: return elems / kQuantBlock * sizeof(BlockQ8_0);
      default: return 4 * elems;
    }
  }
  size_t row_bytes() const { return bytes(head_dim); }
  // Typed rows: T is float for kF32, uint16_t (bf16 bits) for kBF16,
  // BlockQ8_0 for kQ8_0.
  template <typename T>
  const T* key_as(int32_t slot) const {
    return reinterpret_cast<const T*>(static_cast<const char*>(k_head_base) + bytes(offset(slot)));
  }
  template <typename T>
  const T* value_as(int32_t slot) const {
    return reinterpret_cast<const T*>(static_cast<const char*>(v_head_base) + bytes(offset(slot)));
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
// `scores`, when not null, is n_q_heads * n_keys floats; on return it holds
// the attention probabilities [g][s] (what a KV policy observes). Null skips
// them (cheaper; `out` is bit-identical either way).
// REQUIRES n_keys >= 1.
void PagedAttention(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, float scale, float* scores,
                    float* out);

// ---- A decode step cut into key segments, for parallel callers.
// Every row's keys are cut at multiples of kAttentionSegment slots, the
// online softmax runs within each segment from a fresh state, and the
// segments' states are folded left to right (attention_merge.h) -- in the
// prefill kernel too, so a token gets the same bits either way. A caller may
// run the segments of one (sequence, KV head) on different threads, then
// merge: PagedAttention does exactly this on one thread.
inline constexpr int32_t kAttentionSegment = 256;  // a multiple of 64 (the decode kernel's key group)
inline int32_t AttentionSegments(int32_t n_keys) { return (n_keys + kAttentionSegment - 1) / kAttentionSegment; }
// Floats of one segment's partial state for n_q_heads query heads.
inline size_t AttentionPartialFloats(int n_q_heads, int head_dim) {
  return static_cast<size_t>(n_q_heads) * (head_dim + 2);
}
// Whether this build's decode kernel takes head_dim in segments (AVX-512:
// head_dim % 16 == 0, <= 256; without AVX-512, the AVX2 kernel below:
// head_dim % 8 == 0, <= 256); else a caller runs PagedAttention whole.
bool SegmentedAttentionSupported(int head_dim);
// Segment `seg` (< AttentionSegments(n_keys)) of PagedAttention: writes its
// partial state into `partial` (AttentionPartialFloats) and, when `scores` is
// not null, its keys' raw scores into scores[g * n_keys + s].
// REQUIRES SegmentedAttentionSupported(kv.head_dim).
void PagedAttentionSegment(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, int32_t seg,
                           float scale, float* scores, float* partial);
// Folds the AttentionSegments(n_keys) partial states stored one after the
// other at `partials` into out [n_q_heads][head_dim] and turns the raw
// scores, when not null, into probabilities (PagedAttention's outputs).
void MergeAttentionSegments(const float* partials, int n_q_heads, int head_dim, int32_t n_keys, float* scores,
                            float* out);

// ---- The AVX2 kernel (attention_avx2.cc): what builds without AVX-512 run
// for every decode step and, token by token, for prefill (prefill_attention.h),
// behind the functions above. Its arithmetic is its own (8-lane vectors), so
// it agrees with the AVX-512 kernel to ~1e-6, not bit for bit; within a build
// decode and prefill give a token the same bits. Exposed so that tests check
// it on AVX-512 machines as well.
// Whether it is compiled (AVX2 and FMA) and takes head_dim (% 8 == 0, <= 256).
bool Avx2AttentionSupported(int head_dim);
// PagedAttentionSegment and MergeAttentionSegments on the AVX2 kernel.
// REQUIRES Avx2AttentionSupported(kv.head_dim) (head_dim).
void PagedAttentionSegmentAvx2(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, int32_t seg,
                               float scale, float* scores, float* partial);
void MergeAttentionSegmentsAvx2(const float* partials, int n_q_heads, int head_dim, int32_t n_keys, float* scores,
                                float* out);

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_ATTENTION_H_
