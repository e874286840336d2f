// Loads of cached K/V elements as f32 (internal to kernels/cpu): the
// attention kernels are templated on the element type of the cache (float
// for an f32 cache, uint16_t holding bf16 bits for a bf16 one) and read
// through these, so both types run the same f32 arithmetic. Widening bf16 is
// exact (a 16-bit shift), which keeps the prefill and decode kernels
// bit-identical to each other on a bf16 cache as on an f32 one.
#ifndef BEACON_KERNELS_CPU_KV_ELEMENTS_H_
#define BEACON_KERNELS_CPU_KV_ELEMENTS_H_

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/dtype.h"

namespace beacon {

inline float KvToF32(float x) { return x; }
inline float KvToF32(uint16_t x) { return Bf16ToFp32(x); }

// Widens n elements to f32.
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
// 16 consecutive elements as one f32 vector (unaligned).
inline __m512 KvLoad16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 KvLoad16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#endif

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_KV_ELEMENTS_H_
