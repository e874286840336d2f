// Loads of cached K/V rows as f32 (internal to kernels/cpu): the attention
// kernels are templated on the row type of the cache (float for f32,
// uint16_t holding bf16 bits for bf16, BlockQ8_0 for q8_0) and read through
// these, so every type runs the same f32 arithmetic. Widening is exact (bf16:
// a 16-bit shift; q8_0: d * q, at most 11 x 8 significant bits), which keeps
// the prefill and decode kernels bit-identical to each other on any cache,
// and equal to DequantizeRow.
#ifndef BEACON_KERNELS_CPU_KV_ELEMENTS_H_
#define BEACON_KERNELS_CPU_KV_ELEMENTS_H_

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cpu/matmul_tiled.h"

namespace beacon {

inline float KvToF32(float x) { return x; }
inline float KvToF32(uint16_t x) { return Bf16ToFp32(x); }

// Widens a row of n elements to f32.
inline void KvRowToF32(const BlockQ8_0* src, int n, float* dst) { DequantizeRowFast(DType::kQ8_0, src, dst, n); }
template <typename T>
inline void KvRowToF32(const T* src, int n, float* dst) {
  int i = 0;
#if defined(__AVX512F__)
  if constexpr (sizeof(T) == 2) {
    for (; i + 16 <= n; i += 16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
      _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    }
  }
#elif defined(__AVX2__)
  if constexpr (sizeof(T) == 2) {
    for (; i + 8 <= n; i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
    }
  }
#endif
  for (; i < n; ++i) dst[i] = KvToF32(src[i]);
}

#if defined(__AVX512F__)
// Elements [c, c + 16) of a row as one f32 vector; REQUIRES c % 16 == 0.
inline __m512 KvLoad16(const float* row, int c) { return _mm512_loadu_ps(row + c); }
inline __m512 KvLoad16(const uint16_t* row, int c) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 KvLoad16(const BlockQ8_0* row, int c) {
  const BlockQ8_0& b = row[c / kQuantBlock];
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + c % kQuantBlock));
  return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b.d)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
}
#endif

#if defined(__AVX2__)
// Elements [c, c + 8) of a row as one f32 vector; REQUIRES c % 8 == 0.
inline __m256 KvLoad8(const float* row, int c) { return _mm256_loadu_ps(row + c); }
inline __m256 KvLoad8(const uint16_t* row, int c) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline __m256 KvLoad8(const BlockQ8_0* row, int c) {
  const BlockQ8_0& b = row[c / kQuantBlock];
  const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + c % kQuantBlock));
  return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b.d)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
}
#endif

// The K and V rows of slots [first, first + n) into kp[0, n) and vp[0, n),
// walking the block table (a division per slot cost ~25 cycles a key in the
// AVX2 decode kernel); entries [n, count) repeat the last row, a valid slot
// that a kernel masks. REQUIRES 1 <= n <= count.
template <typename T>
inline void SlotRows(const PagedHeadView& kv, int32_t first, int n, int count, const T** kp, const T** vp) {
  int32_t block = first / kv.block_size, in = first % kv.block_size;
  for (int j = 0; j < n; ++j) {
    const size_t bytes = kv.bytes(kv.block_ids[block] * kv.block_stride + static_cast<size_t>(in) * kv.head_dim);
    kp[j] = reinterpret_cast<const T*>(static_cast<const char*>(kv.k_head_base) + bytes);
    vp[j] = reinterpret_cast<const T*>(static_cast<const char*>(kv.v_head_base) + bytes);
    if (++in == kv.block_size) {
      in = 0;
      ++block;
    }
  }
  for (int j = n; j < count; ++j) {
    kp[j] = kp[n - 1];
    vp[j] = vp[n - 1];
  }
}

// Prefetches the K and V rows of slots [begin, end) into L1, slot by slot
// (walking the block table without a division per slot): a long context
// streams the cache from DRAM, and one core's demand loads alone reach
// ~8-10 GB/s on this pattern (2 KB runs per block and head). Measured on the
// default model's whole cache at 2,048 bf16 slots (beacon-kernels-bench
// BM_DecodeAttentionStep, AVX-512): 5.3 ms a step without, 3.0-3.4 ms with,
// 64 keys ahead (further was slower); a cache-resident head pays ~20% for it
// (BM_DecodeAttention).
// prefetcht0 as a volatile asm: GCC 12 deletes a loop whose only effect is
// __builtin_prefetch once it is inlined (a loop without side effects may be
// assumed to finish, and a prefetch is not one), so _mm_prefetch here
// silently compiled to nothing.
inline void PrefetchL1(const char* p) { asm volatile("prefetcht0 (%0)" : : "r"(p)); }

inline void PrefetchSlots(const PagedHeadView& kv, int32_t begin, int32_t end) {
  if (begin >= end) return;
  const int row_bytes = static_cast<int>(kv.row_bytes());
  int32_t block = begin / kv.block_size, in = begin % kv.block_size;
  for (int32_t s = begin; s < end; ++s) {
    const size_t o = kv.block_ids[block] * kv.block_stride + static_cast<size_t>(in) * kv.head_dim;
    const char* k = static_cast<const char*>(kv.k_head_base) + kv.bytes(o);
    const char* v = static_cast<const char*>(kv.v_head_base) + kv.bytes(o);
    for (int off = 0; off < row_bytes; off += 64) {  // every line: one per row measured slower
      PrefetchL1(k + off);
      PrefetchL1(v + off);
    }
    if (++in == kv.block_size) {
      in = 0;
      ++block;
    }
  }
}

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_KV_ELEMENTS_H_
