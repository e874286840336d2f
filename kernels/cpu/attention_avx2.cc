// Decode attention for builds without AVX-512 (attention.h, "The AVX2
// kernel"), and through it their prefill. Before it, such builds ran every
// token through the two-pass per-key loop of prefill_attention.cc (a dot
// product, std::exp and an axpy per key and head, every bf16 element widened
// one at a time): 2.8 GB/s of cache on one core of an AMD EPYC VM without
// AVX-512; docs/performance.md, "Without AVX-512: attention", has the
// figures after.
//
// Tiles of kTileKeys = 16 consecutive slots, anchored at slot 0 (segments of
// kAttentionSegment slots start on tiles), for up to kRows query heads at a
// time. Scores: for two keys at a time, each row's 8-lane partial dot
// products over head_dim (12 independent chains at 6 rows), then one tree of
// horizontal adds turns 8 keys' partials into a vector of 8 scores. That
// reads each key once, as the AVX-512 kernel's transpose does, at about half
// the instructions of an 8 x 8 transpose per 8 columns (measured: 1.45x on
// the whole kernel). Values: o[r] accumulates v_j p[r][j], 16 columns at a
// time.
//
// Per row, per tile, in this order (the online softmax of one segment):
//   s_j = LaneSums(sum over 8-column blocks, in order, of (scale q) * k_j);
//   m' = max(m, max_j s_j), alpha = Exp8(m - m'), p_j = Exp8(s_j - m'),
//   l = fma(l, alpha, the tree sum of p), o = o * alpha (when m' != m),
//   o = fma(v_j, p_j, o) for j in order;
// then the segments are folded left to right as attention_merge.h says, and
// o / l. Every operation is lane-wise or a fixed tree, so a token's bits
// depend on its query, its keys and the scale only: the same whether its
// segments ran on one thread or several, in a decode step or a prefill.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_elements.h"
#include "kernels/cpu/simd.h"

namespace beacon {

#if defined(__AVX2__) && defined(__FMA__)
namespace {

constexpr int kTileKeys = 16;       // keys per online-softmax tile (two vectors)
constexpr int kRows = 6;            // query heads per pass over the keys
constexpr int kMaxDim = 256;        // head_dim bound of the scratch
constexpr int kPrefetchAhead = 64;  // keys between a prefetch and its use
static_assert(kAttentionSegment % kTileKeys == 0, "segments start on tiles");

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// e^x for x <= 0 (scores minus their running max): attention_exp.h's
// function on 8 lanes. 2^n * p(r) with n = round(x log2 e), r = x - n ln 2
// (two-part ln 2), p the degree-6 Taylor polynomial (relative error < 2e-7 on
// |r| <= ln2/2). Exp8(0) is exactly 1; below x = -87.3 (including -inf and
// NaN) the result is exactly 0. 2^n is built in the exponent field: n >= -126
// wherever the result is kept, a normal power of two, so the product rounds
// once, as a scalef would.
inline __m256 Exp8(__m256 x) {
  const __m256 xc = _mm256_max_ps(x, _mm256_set1_ps(-88.0f));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_GE_OQ), y);
}

inline float Exp1(float x) { return _mm256_cvtss_f32(Exp8(_mm256_set1_ps(x))); }

// Lanes [0, n) of a tile's half that holds keys [half * 8, half * 8 + 8).
inline __m256 KeepMask(int nk, int half) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nk - 8 * half), lane));
}

struct Scratch {
  alignas(32) float qs[kRows][kMaxDim];   // scale * q
  alignas(32) float o[kRows][kMaxDim];    // unnormalised output
  alignas(32) float s[kRows][kTileKeys];  // scores, then probabilities
};

// The 8 lane sums of a[0..7] as one vector (lane j: the sum of a[j]'s
// lanes): pairs, then quads, then the two 128-bit halves.
inline __m256 LaneSums(const __m256 a[8]) {
  const __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}

// Scores of the tile's 16 keys for NR rows into w->s: for two keys at a
// time, each row's 8-lane partial dot products over c (2 * NR chains), then
// LaneSums of each 8 keys' partials.
template <int NR, typename T>
void Scores(Scratch* w, const T* const* kp, int d) {
  alignas(32) __m256 part[NR][kTileKeys];
  for (int j = 0; j < kTileKeys; j += 2) {
    __m256 a[NR], b[NR];
    for (int r = 0; r < NR; ++r) a[r] = b[r] = _mm256_setzero_ps();
    for (int c = 0; c < d; c += 8) {
      const __m256 k0 = KvLoad8(kp[j], c), k1 = KvLoad8(kp[j + 1], c);
      for (int r = 0; r < NR; ++r) {
        const __m256 q = _mm256_load_ps(&w->qs[r][c]);
        a[r] = _mm256_fmadd_ps(q, k0, a[r]);
        b[r] = _mm256_fmadd_ps(q, k1, b[r]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      part[r][j] = a[r];
      part[r][j + 1] = b[r];
    }
  }
  for (int r = 0; r < NR; ++r) {
    _mm256_store_ps(w->s[r], LaneSums(part[r]));
    _mm256_store_ps(w->s[r] + 8, LaneSums(part[r] + 8));
  }
}

// o[r] += sum_j v_j p[r][j] over the tile's nk keys, 16 columns at a time.
template <int NR, typename T>
void AccumulateValues(Scratch* w, const T* const* vp, int nk, int d) {
  for (int c0 = 0; c0 < d; c0 += 16) {
    const bool two = c0 + 16 <= d;  // else a last block of 8 columns
    __m256 a0[NR], a1[NR];
    for (int r = 0; r < NR; ++r) {
      a0[r] = _mm256_load_ps(&w->o[r][c0]);
      a1[r] = two ? _mm256_load_ps(&w->o[r][c0 + 8]) : _mm256_setzero_ps();
    }
    for (int j = 0; j < nk; ++j) {
      const __m256 v0 = KvLoad8(vp[j], c0);
      const __m256 v1 = two ? KvLoad8(vp[j], c0 + 8) : _mm256_setzero_ps();
      for (int r = 0; r < NR; ++r) {
        const __m256 p = _mm256_broadcast_ss(&w->s[r][j]);
        a0[r] = _mm256_fmadd_ps(v0, p, a0[r]);
        a1[r] = _mm256_fmadd_ps(v1, p, a1[r]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      _mm256_store_ps(&w->o[r][c0], a0[r]);
      if (two) _mm256_store_ps(&w->o[r][c0 + 8], a1[r]);
    }
  }
}

// Keys [begin, end) of NR (<= kRows) query heads q[r * d], from a fresh
// state, into the unnormalised partial state o[r * d], m[r], l[r]; raw
// scores (scale q.k) into probs[r * probs_stride + slot] when probs is not
// null. REQUIRES d % 8 == 0, d <= kMaxDim, begin < end, begin % kTileKeys == 0.
template <int NR, typename T>
void DecodeRows(const float* q, const PagedHeadView& kv, int32_t begin, int32_t end, float scale, float* probs,
                int32_t probs_stride, float* o, float* m, float* l, Scratch* w) {
  const int d = kv.head_dim;
  for (int r = 0; r < NR; ++r) {
    for (int c = 0; c < d; ++c) w->qs[r][c] = scale * q[r * d + c];
    std::fill(w->o[r], w->o[r] + d, 0.0f);
    m[r] = kNegInf;
    l[r] = 0.0f;
  }
  for (int32_t first = begin; first < end; first += kTileKeys) {
    if ((first - begin) % kPrefetchAhead == 0) {
      PrefetchSlots(kv, first + kPrefetchAhead, std::min<int32_t>(end, first + 2 * kPrefetchAhead));
    }
    const int nk = std::min<int32_t>(kTileKeys, end - first);
    const T* kp[kTileKeys];
    const T* vp[kTileKeys];
    SlotRows(kv, first, nk, kTileKeys, kp, vp);  // past end: a valid slot, masked below
    Scores<NR, T>(w, kp, d);
    const __m256 keep0 = KeepMask(nk, 0), keep1 = KeepMask(nk, 1);
    const __m256 neg_inf = _mm256_set1_ps(kNegInf);
    for (int r = 0; r < NR; ++r) {
      const __m256 s0 = _mm256_load_ps(w->s[r]), s1 = _mm256_load_ps(w->s[r] + 8);
      if (probs != nullptr) std::memcpy(probs + r * probs_stride + first, w->s[r], nk * sizeof(float));
      const __m256 mx = _mm256_max_ps(_mm256_blendv_ps(neg_inf, s0, keep0), _mm256_blendv_ps(neg_inf, s1, keep1));
      __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
      h = _mm_max_ps(h, _mm_movehl_ps(h, h));
      h = _mm_max_ss(h, _mm_movehdup_ps(h));
      const float mn = std::max(m[r], _mm_cvtss_f32(h));
      const float alpha = Exp1(m[r] - mn);
      const __m256 mnv = _mm256_set1_ps(mn);
      const __m256 p0 = _mm256_and_ps(keep0, Exp8(_mm256_sub_ps(s0, mnv)));
      const __m256 p1 = _mm256_and_ps(keep1, Exp8(_mm256_sub_ps(s1, mnv)));
      _mm256_store_ps(w->s[r], p0);
      _mm256_store_ps(w->s[r] + 8, p1);
      // The tile's sum: keys j and j + 8 paired, then simd.h's tree.
      l[r] = _mm_cvtss_f32(
          _mm_fmadd_ss(_mm_set_ss(l[r]), _mm_set_ss(alpha), _mm_set_ss(HorizontalSum(_mm256_add_ps(p0, p1)))));
      if (mn != m[r]) {
        const __m256 a = _mm256_set1_ps(alpha);
        for (int c = 0; c < d; c += 8) _mm256_store_ps(&w->o[r][c], _mm256_mul_ps(_mm256_load_ps(&w->o[r][c]), a));
      }
      m[r] = mn;
    }
    AccumulateValues<NR, T>(w, vp, nk, d);
  }
  for (int r = 0; r < NR; ++r) std::copy(w->o[r], w->o[r] + d, o + r * d);
}

// Partial layout (AttentionPartialFloats): o [G][d], then m [G], l [G].
template <typename T>
void DecodeSegment(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, int32_t seg, float scale,
                   float* scores, float* partial) {
  const int d = kv.head_dim;
  const int32_t begin = seg * kAttentionSegment, end = std::min(n_keys, begin + kAttentionSegment);
  float* pm = partial + static_cast<size_t>(n_q_heads) * d;
  float* pl = pm + n_q_heads;
  Scratch scratch;  // ~29 KB on the calling thread's stack, reused for every row pass
  for (int g = 0; g < n_q_heads; g += kRows) {
    const float* qg = q + static_cast<int64_t>(g) * d;
    float* og = partial + static_cast<int64_t>(g) * d;
    float* pg = scores != nullptr ? scores + static_cast<int64_t>(g) * n_keys : nullptr;
    switch (std::min(kRows, n_q_heads - g)) {
      case 1: DecodeRows<1, T>(qg, kv, begin, end, scale, pg, n_keys, og, pm + g, pl + g, &scratch); break;
      case 2: DecodeRows<2, T>(qg, kv, begin, end, scale, pg, n_keys, og, pm + g, pl + g, &scratch); break;
      case 3: DecodeRows<3, T>(qg, kv, begin, end, scale, pg, n_keys, og, pm + g, pl + g, &scratch); break;
      case 4: DecodeRows<4, T>(qg, kv, begin, end, scale, pg, n_keys, og, pm + g, pl + g, &scratch); break;
      case 5: DecodeRows<5, T>(qg, kv, begin, end, scale, pg, n_keys, og, pm + g, pl + g, &scratch); break;
      default: DecodeRows<kRows, T>(qg, kv, begin, end, scale, pg, n_keys, og, pm + g, pl + g, &scratch); break;
    }
  }
}

}  // namespace

bool Avx2AttentionSupported(int head_dim) { return head_dim > 0 && head_dim % 8 == 0 && head_dim <= kMaxDim; }

void PagedAttentionSegmentAvx2(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, int32_t seg,
                               float scale, float* scores, float* partial) {
  if (kv.dtype == DType::kBF16) {
    DecodeSegment<uint16_t>(q, n_q_heads, kv, n_keys, seg, scale, scores, partial);
  } else if (kv.dtype == DType::kQ8_0) {
    DecodeSegment<BlockQ8_0>(q, n_q_heads, kv, n_keys, seg, scale, scores, partial);
  } else {
    DecodeSegment<float>(q, n_q_heads, kv, n_keys, seg, scale, scores, partial);
  }
}

// attention_merge.h's fold on one row at a time (its lanes all equal), then
// o / l, and the raw scores turned into probabilities exp(s - m) / l.
void MergeAttentionSegmentsAvx2(const float* partials, int n_q_heads, int head_dim, int32_t n_keys, float* scores,
                                float* out) {
  const int d = head_dim;
  const int32_t n_seg = AttentionSegments(n_keys);
  const size_t stride = AttentionPartialFloats(n_q_heads, d);
  alignas(32) float o[kMaxDim];
  for (int g = 0; g < n_q_heads; ++g) {
    std::copy(partials + g * d, partials + (g + 1) * d, o);
    float m = partials[n_q_heads * d + g];
    float l = partials[n_q_heads * d + n_q_heads + g];
    for (int32_t i = 1; i < n_seg; ++i) {
      const float* pi = partials + i * stride;
      const float mb = pi[n_q_heads * d + g];
      const float mn = std::max(m, mb);
      const __m256 a = _mm256_set1_ps(Exp1(m - mn)), b = _mm256_set1_ps(Exp1(mb - mn));
      l = _mm256_cvtss_f32(
          _mm256_fmadd_ps(_mm256_set1_ps(l), a, _mm256_mul_ps(_mm256_set1_ps(pi[n_q_heads * d + n_q_heads + g]), b)));
      for (int c = 0; c < d; c += 8) {
        _mm256_store_ps(o + c,
                        _mm256_fmadd_ps(_mm256_load_ps(o + c), a, _mm256_mul_ps(_mm256_loadu_ps(pi + g * d + c), b)));
      }
      m = mn;
    }
    for (int c = 0; c < d; ++c) out[g * d + c] = o[c] / l;
    if (scores != nullptr) {
      float* p = scores + static_cast<size_t>(g) * n_keys;
      const __m256 mv = _mm256_set1_ps(m), lv = _mm256_set1_ps(l);
      int32_t j = 0;
      for (; j + 8 <= n_keys; j += 8) {
        _mm256_storeu_ps(p + j, _mm256_div_ps(Exp8(_mm256_sub_ps(_mm256_loadu_ps(p + j), mv)), lv));
      }
      for (; j < n_keys; ++j) p[j] = Exp1(p[j] - m) / l;
    }
  }
}

#else  // no AVX2: never called (Avx2AttentionSupported is false)

bool Avx2AttentionSupported(int) { return false; }
void PagedAttentionSegmentAvx2(const float*, int, const PagedHeadView&, int32_t, int32_t, float, float*, float*) {}
void MergeAttentionSegmentsAvx2(const float*, int, int, int32_t, float*, float*) {}

#endif

}  // namespace beacon
