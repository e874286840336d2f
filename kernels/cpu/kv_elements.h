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

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_KV_ELEMENTS_H_
