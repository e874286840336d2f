#include "kernels/cpu/attention.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/ops.h"

namespace beacon {
namespace {

void PagedAttentionGeneric(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, float scale,
                           float* scores, float* out) {
  const int d = kv.head_dim;
  for (int32_t s = 0; s < n_keys; ++s) {
    const float* k = kv.key(s);
    for (int g = 0; g < n_q_heads; ++g) scores[g * n_keys + s] = scale * Dot(q + g * d, k, d);
  }
  for (int g = 0; g < n_q_heads; ++g) SoftmaxInPlace(scores + g * n_keys, n_keys);
  std::memset(out, 0, sizeof(float) * n_q_heads * d);
  for (int32_t s = 0; s < n_keys; ++s) {
    const float* v = kv.value(s);
    for (int g = 0; g < n_q_heads; ++g) Axpy(scores[g * n_keys + s], v, out + g * d, d);
  }
}

#if defined(__AVX512F__)
// head_dim = 16 * NC. Each query head's q and output live in NC registers
// while the keys (then values) stream past: a key or value is loaded once per
// query head from L1/L2 and no partial output is stored per slot.
template <int NC>
void PagedAttentionAvx512(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, float scale,
                          float* scores, float* out) {
  for (int g = 0; g < n_q_heads; ++g) {
    __m512 qv[NC];
    for (int c = 0; c < NC; ++c)
      qv[c] = _mm512_mul_ps(_mm512_loadu_ps(q + g * 16 * NC + 16 * c), _mm512_set1_ps(scale));
    float* sc = scores + static_cast<size_t>(g) * n_keys;
    for (int32_t s = 0; s < n_keys; ++s) {
      const float* k = kv.key(s);
      __m512 acc = _mm512_mul_ps(qv[0], _mm512_loadu_ps(k));
      for (int c = 1; c < NC; ++c) acc = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(k + 16 * c), acc);
      sc[s] = _mm512_reduce_add_ps(acc);
    }
    SoftmaxInPlace(sc, n_keys);
    __m512 o[NC];
    for (int c = 0; c < NC; ++c) o[c] = _mm512_setzero_ps();
    for (int32_t s = 0; s < n_keys; ++s) {
      const float* v = kv.value(s);
      const __m512 p = _mm512_set1_ps(sc[s]);
      for (int c = 0; c < NC; ++c) o[c] = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 16 * c), o[c]);
    }
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(out + g * 16 * NC + 16 * c, o[c]);
  }
}
#endif

}  // namespace

void PagedAttention(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, float scale, float* scores,
                    float* out) {
#if defined(__AVX512F__)
  switch (kv.head_dim) {
    case 64: return PagedAttentionAvx512<4>(q, n_q_heads, kv, n_keys, scale, scores, out);
    case 128: return PagedAttentionAvx512<8>(q, n_q_heads, kv, n_keys, scale, scores, out);
    case 256: return PagedAttentionAvx512<16>(q, n_q_heads, kv, n_keys, scale, scores, out);
    default: break;
  }
#endif
  PagedAttentionGeneric(q, n_q_heads, kv, n_keys, scale, scores, out);
}

}  // namespace beacon
