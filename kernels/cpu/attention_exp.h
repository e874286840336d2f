// The exponential both attention kernels use (internal to kernels/cpu): the
// tiled prefill kernel (prefill_attention.cc, rows in lanes) and the decode
// step (attention.cc, keys in lanes) must compute the same function, lane by
// lane, for a token's output to be bit-identical on either path.
#ifndef BEACON_KERNELS_CPU_ATTENTION_EXP_H_
#define BEACON_KERNELS_CPU_ATTENTION_EXP_H_

#include <immintrin.h>

namespace beacon {

#if defined(__AVX512F__)
// e^x for x <= 0 (scores minus their running max): 2^n * p(r) with
// n = round(x log2 e), r = x - n ln 2 (two-part ln 2), p the degree-6 Taylor
// polynomial (relative error < 2e-7 on |r| <= ln2/2). AttentionExp(0) is
// exactly 1; results below FLT_MIN (x < -87.3, including -inf) are exactly 0.
// Every operation is lane-wise and explicit (no contraction left to the
// compiler), so a lane's result depends on that lane's input only.
inline __m512 AttentionExp(__m512 x) {
  const __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(-88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
  return _mm512_maskz_scalef_ps(normal, p, n);
}
#endif

}  // namespace beacon

#endif  // BEACON_KERNELS_CPU_ATTENTION_EXP_H_
