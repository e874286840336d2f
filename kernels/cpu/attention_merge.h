// Merging the online-softmax states of consecutive key segments (internal to
// kernels/cpu). Both attention kernels cut every row's keys at the same
// absolute slots (multiples of kAttentionSegment, attention.h), run the
// online softmax within each segment from a fresh state, and fold the
// segments' states left to right with this one lane-wise operation. A decode
// step can then run its segments on different threads and still give a token
// the bits a prefill gives it. Per lane (a row: a query head of a token):
//   m = max(ma, mb), a = exp(ma - m), b = exp(mb - m),
//   l = fma(la, a, lb * b), o = fma(oa, a, ob * b)     (each o column alike)
// A segment where a row has no key (a prefill row whose slot precedes it)
// has m = -inf, l = 0, o = 0, and folds in exactly: b = 0, a = exp(0) = 1.
#ifndef BEACON_KERNELS_CPU_ATTENTION_MERGE_H_
#define BEACON_KERNELS_CPU_ATTENTION_MERGE_H_

#include <immintrin.h>

#include "kernels/cpu/attention_exp.h"

namespace beacon {

#if defined(__AVX512F__)
// The scales of a fold: *a for the accumulated state, *b for the segment's;
// returns the new running max.
inline __m512 MergeScales(__m512 ma, __m512 mb, __m512* a, __m512* b) {
  const __m512 m = _mm512_max_ps(ma, mb);
  *a = AttentionExp(_mm512_sub_ps(ma, m));
  *b = AttentionExp(_mm512_sub_ps(mb, m));
  return m;
}

// la * a + lb * b (and the same for o): one rounding for the product lb * b,
// one for the fused multiply-add.
inline __m512 MergeSum(__m512 xa, __m512 a, __m512 xb, __m512 b) {
  return _mm512_fmadd_ps(xa, a, _mm512_mul_ps(xb, b));
}
#endif

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_ATTENTION_MERGE_H_
