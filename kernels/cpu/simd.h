// AVX2 helpers shared by the CPU kernels (internal to kernels/cpu). One
// definition each, so that every kernel reduces in the same order: the
// batch-invariance of the logits depends on it.
#ifndef BEACON_KERNELS_CPU_SIMD_H_
#define BEACON_KERNELS_CPU_SIMD_H_

#include <immintrin.h>

namespace beacon {

// The sum of the 8 lanes: (lo + hi) halves, then pairs, then the last two.
inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_SIMD_H_
