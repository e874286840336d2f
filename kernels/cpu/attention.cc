#include "kernels/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_exp.h"
#include "kernels/cpu/attention_merge.h"
#include "kernels/cpu/kv_elements.h"
#include "kernels/cpu/prefill_attention.h"

namespace beacon {
namespace {

// A decode step is a prefill of one token, and must give that token the same
// bits as PrefillAttention does (the engine's logits then do not depend on
// how a prompt was chunked). The prefill kernel keeps rows (query heads) in
// vector lanes, which a decode step's G rows (3 on the default model) would
// fill a fifth of; this kernel keeps keys in lanes instead (a 16-key tile
// transposed), and applies to each row exactly the operations of
// prefill_attention.h's arithmetic, in the same order:
//   s_j = sum_c (scale q[c]) k_j[c], one fused multiply-add per c in order;
//   per 16-key tile: m' = max(m, max_j s_j), alpha = AttentionExp(m - m'),
//   p_j = AttentionExp(s_j - m'), l = fma(l, alpha, tree sum of p),
//   o = o * alpha (when m' != m), then o = fma(v_j, p_j, o) for j in order;
//   at the end o / l.
// The lane-wise operations give the same value in any lane, max is exact in
// any order, and the tree sum pairs the same keys as the prefill kernel's.
#if defined(__AVX512F__)
constexpr int kKT = kPrefillKeyTile;  // 16: one key per lane
constexpr int kRows = 4;              // query heads per pass over the keys
constexpr int kTiles = 4;             // key tiles scored together (independent chains)
constexpr int kMaxDim = 256;
constexpr int kPrefetchAhead = kTiles * kKT;  // keys between a prefetch and its use

// r[i] lane j <- r[j] lane i.
inline void Transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  __m512 u[16];  // u[4b + k] holds column k (+4, +8, +12) of rows 4b..4b+3, per 128-bit lane
  for (int b = 0; b < 4; ++b) {
    const __m512d a0 = _mm512_castps_pd(t[4 * b]), a1 = _mm512_castps_pd(t[4 * b + 1]);
    const __m512d a2 = _mm512_castps_pd(t[4 * b + 2]), a3 = _mm512_castps_pd(t[4 * b + 3]);
    u[4 * b] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    u[4 * b + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    u[4 * b + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    u[4 * b + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
  for (int k = 0; k < 4; ++k) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xdd);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88);
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xdd);
    r[k] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[k + 8] = _mm512_shuffle_f32x4(v0, v2, 0xdd);
    r[k + 4] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[k + 12] = _mm512_shuffle_f32x4(v1, v3, 0xdd);
  }
}

// ((p0 + p8) + (p4 + p12)) + ... : the prefill kernel's tree, keys in lanes.
inline float TileSum(__m512 p) {
  const __m256 a =
      _mm256_add_ps(_mm512_castps512_ps256(p), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1)));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

struct DecodeScratch {
  alignas(64) float qs[kRows][kMaxDim];        // scale * q
  alignas(64) float o[kRows][kMaxDim];         // unnormalised output
  alignas(64) float kt[kTiles][kMaxDim][kKT];  // transposed key tiles
  alignas(64) float s[kTiles][kRows][kKT];     // scores, then probabilities
};

// Scores of NT key tiles for NR rows: NT * NR independent fma chains over c.
template <int NT, int NR>
void Scores(DecodeScratch* w, int d) {
  __m512 acc[NT][NR];
  for (int t = 0; t < NT; ++t) {
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_setzero_ps();
  }
  for (int c = 0; c < d; ++c) {
    for (int t = 0; t < NT; ++t) {
      const __m512 k = _mm512_load_ps(w->kt[t][c]);
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_fmadd_ps(_mm512_set1_ps(w->qs[r][c]), k, acc[t][r]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    for (int r = 0; r < NR; ++r) _mm512_store_ps(w->s[t][r], acc[t][r]);
  }
}

// o[r] += sum_j v_j p[r][j] over one tile's nk keys, 64 columns at a time.
template <int NR, typename T>
void AccumulateValues(DecodeScratch* w, int t, const T* const* vp, int nk, int d) {
  for (int c0 = 0; c0 < d; c0 += 64) {
    const int nv = std::min(4, (d - c0) / 16);  // 4 but in a last block of 16 or 32 columns
    __m512 acc[NR][4];
    for (int r = 0; r < NR; ++r) {
      for (int i = 0; i < 4; ++i) acc[r][i] = i < nv ? _mm512_load_ps(&w->o[r][c0 + 16 * i]) : _mm512_setzero_ps();
    }
    for (int j = 0; j < nk; ++j) {
      __m512 v[4];
      for (int i = 0; i < 4; ++i) v[i] = i < nv ? KvLoad16(vp[j], c0 + 16 * i) : _mm512_setzero_ps();
      for (int r = 0; r < NR; ++r) {
        const __m512 p = _mm512_set1_ps(w->s[t][r][j]);
        for (int i = 0; i < 4; ++i) acc[r][i] = _mm512_fmadd_ps(v[i], p, acc[r][i]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      for (int i = 0; i < nv; ++i) _mm512_store_ps(&w->o[r][c0 + 16 * i], acc[r][i]);
    }
  }
}

// Keys [begin, end) of NR (<= kRows) query heads q[r * d], from a fresh
// state, into the unnormalised partial state o[r * d], m[r], l[r]; raw
// scores (scale q.k) into probs[r * probs_stride + slot] when probs is not
// null. T: the cache's element type. REQUIRES d % 16 == 0, d <= kMaxDim,
// begin < end, begin a multiple of kTiles * kKT.
template <int NR, typename T>
void DecodeRows(const float* q, const PagedHeadView& kv, int32_t begin, int32_t end, float scale, float* probs,
                int32_t probs_stride, float* o, float* m, float* l, DecodeScratch* w) {
  const int d = kv.head_dim;
  for (int r = 0; r < NR; ++r) {
    for (int c = 0; c < d; ++c) w->qs[r][c] = scale * q[r * d + c];
    std::fill(w->o[r], w->o[r] + d, 0.0f);
    m[r] = -std::numeric_limits<float>::infinity();
    l[r] = 0.0f;
  }
  for (int32_t base = begin; base < end; base += kTiles * kKT) {
    // Prefetch the keys and values kPrefetchAhead keys on (kv_elements.h).
    PrefetchSlots(kv, base + kPrefetchAhead, std::min<int32_t>(end, base + kPrefetchAhead + kTiles * kKT));
    const int nt = std::min<int32_t>(kTiles, (end - base + kKT - 1) / kKT);
    const T* vp[kTiles][kKT];
    for (int t = 0; t < nt; ++t) {
      const int32_t first = base + t * kKT;
      const int nk = std::min<int32_t>(kKT, end - first);
      const T* kp[kKT];
      for (int j = 0; j < kKT; ++j) {  // past end: a valid slot, masked below
        kp[j] = kv.key_as<T>(first + std::min(j, nk - 1));
        vp[t][j] = kv.value_as<T>(first + std::min(j, nk - 1));
      }
      for (int c0 = 0; c0 < d; c0 += 16) {
        __m512 rows[16];
        for (int j = 0; j < 16; ++j) rows[j] = KvLoad16(kp[j], c0);
        Transpose16(rows);
        for (int i = 0; i < 16; ++i) _mm512_store_ps(w->kt[t][c0 + i], rows[i]);
      }
    }
    switch (nt) {
      case 1: Scores<1, NR>(w, d); break;
      case 2: Scores<2, NR>(w, d); break;
      case 3: Scores<3, NR>(w, d); break;
      default: Scores<4, NR>(w, d); break;
    }
    for (int t = 0; t < nt; ++t) {
      const int32_t first = base + t * kKT;
      const int nk = std::min<int32_t>(kKT, end - first);
      const __mmask16 keep = static_cast<__mmask16>(nk == kKT ? 0xffff : (1u << nk) - 1);
      for (int r = 0; r < NR; ++r) {
        const __m512 s = _mm512_load_ps(w->s[t][r]);
        if (probs != nullptr) _mm512_mask_storeu_ps(probs + r * probs_stride + first, keep, s);
        const float mt =
            _mm512_reduce_max_ps(_mm512_mask_mov_ps(_mm512_set1_ps(-std::numeric_limits<float>::infinity()), keep, s));
        const float mn = std::max(m[r], mt);
        const float alpha = _mm_cvtss_f32(_mm512_castps512_ps128(AttentionExp(_mm512_set1_ps(m[r] - mn))));
        const __m512 p = _mm512_maskz_mov_ps(keep, AttentionExp(_mm512_sub_ps(s, _mm512_set1_ps(mn))));
        _mm512_store_ps(w->s[t][r], p);
        l[r] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(l[r]), _mm_set_ss(alpha), _mm_set_ss(TileSum(p))));
        if (mn != m[r]) {
          const __m512 a = _mm512_set1_ps(alpha);
          for (int c = 0; c < d; c += 16) _mm512_store_ps(&w->o[r][c], _mm512_mul_ps(_mm512_load_ps(&w->o[r][c]), a));
        }
        m[r] = mn;
      }
      AccumulateValues<NR, T>(w, t, vp[t], nk, d);
    }
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
  DecodeScratch scratch;  // ~73 KB on the calling thread's stack, reused for every row pass
  for (int g = 0; g < n_q_heads; g += kRows) {
    const float* qg = q + static_cast<int64_t>(g) * d;
    float* og = partial + static_cast<int64_t>(g) * d;
    float* pg = scores != nullptr ? scores + static_cast<int64_t>(g) * n_keys : nullptr;
    switch (std::min(kRows, n_q_heads - g)) {
      case 1: DecodeRows<1, T>(qg, kv, begin, end, scale, pg, n_keys, og, pm + g, pl + g, &scratch); break;
      case 2: DecodeRows<2, T>(qg, kv, begin, end, scale, pg, n_keys, og, pm + g, pl + g, &scratch); break;
      case 3: DecodeRows<3, T>(qg, kv, begin, end, scale, pg, n_keys, og, pm + g, pl + g, &scratch); break;
      default: DecodeRows<4, T>(qg, kv, begin, end, scale, pg, n_keys, og, pm + g, pl + g, &scratch); break;
    }
  }
}
#endif  // __AVX512F__

}  // namespace

const float* PagedHeadView::KeyF32(int32_t slot, float* buf) const {
  if (dtype == DType::kF32) return key(slot);
  if (dtype == DType::kQ8_0) {
    KvRowToF32(key_as<BlockQ8_0>(slot), head_dim, buf);
  } else {
    KvRowToF32(key_as<uint16_t>(slot), head_dim, buf);
  }
  return buf;
}

const float* PagedHeadView::ValueF32(int32_t slot, float* buf) const {
  if (dtype == DType::kF32) return value(slot);
  if (dtype == DType::kQ8_0) {
    KvRowToF32(value_as<BlockQ8_0>(slot), head_dim, buf);
  } else {
    KvRowToF32(value_as<uint16_t>(slot), head_dim, buf);
  }
  return buf;
}

bool SegmentedAttentionSupported(int head_dim) {
#if defined(__AVX512F__)
  return head_dim % 16 == 0 && head_dim <= kMaxDim;
#else
  return Avx2AttentionSupported(head_dim);
#endif
}

void PagedAttentionSegment(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, int32_t seg,
                           float scale, float* scores, float* partial) {
#if defined(__AVX512F__)
  if (kv.dtype == DType::kBF16) {
    DecodeSegment<uint16_t>(q, n_q_heads, kv, n_keys, seg, scale, scores, partial);
  } else if (kv.dtype == DType::kQ8_0) {
    DecodeSegment<BlockQ8_0>(q, n_q_heads, kv, n_keys, seg, scale, scores, partial);
  } else {
    DecodeSegment<float>(q, n_q_heads, kv, n_keys, seg, scale, scores, partial);
  }
#else
  PagedAttentionSegmentAvx2(q, n_q_heads, kv, n_keys, seg, scale, scores, partial);
#endif
}

void MergeAttentionSegments(const float* partials, int n_q_heads, int head_dim, int32_t n_keys, float* scores,
                            float* out) {
#if defined(__AVX512F__)
  const int d = head_dim;
  const int32_t n_seg = AttentionSegments(n_keys);
  const size_t stride = AttentionPartialFloats(n_q_heads, d);
  alignas(64) float o[kMaxDim];
  for (int g = 0; g < n_q_heads; ++g) {
    const float* p0 = partials;
    std::copy(p0 + g * d, p0 + (g + 1) * d, o);
    __m512 m = _mm512_set1_ps(p0[n_q_heads * d + g]);
    __m512 l = _mm512_set1_ps(p0[n_q_heads * d + n_q_heads + g]);
    for (int32_t i = 1; i < n_seg; ++i) {
      const float* pi = partials + i * stride;
      __m512 a, b;
      const __m512 mn = MergeScales(m, _mm512_set1_ps(pi[n_q_heads * d + g]), &a, &b);
      l = MergeSum(l, a, _mm512_set1_ps(pi[n_q_heads * d + n_q_heads + g]), b);
      for (int c = 0; c < d; c += 16) {
        _mm512_store_ps(o + c, MergeSum(_mm512_load_ps(o + c), a, _mm512_loadu_ps(pi + g * d + c), b));
      }
      m = mn;
    }
    const float lf = _mm_cvtss_f32(_mm512_castps512_ps128(l));
    for (int c = 0; c < d; ++c) out[g * d + c] = o[c] / lf;
    if (scores != nullptr) {
      float* p = scores + static_cast<size_t>(g) * n_keys;
      for (int32_t j = 0; j < n_keys; j += kKT) {
        const __mmask16 in = static_cast<__mmask16>(n_keys - j >= kKT ? 0xffff : (1u << (n_keys - j)) - 1);
        const __m512 e = AttentionExp(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, p + j), m));
        _mm512_mask_storeu_ps(p + j, in, _mm512_div_ps(e, l));
      }
    }
  }
#else
  MergeAttentionSegmentsAvx2(partials, n_q_heads, head_dim, n_keys, scores, out);
#endif
}

void PagedAttention(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, float scale, float* scores,
                    float* out) {
  const int d = kv.head_dim;
  if (SegmentedAttentionSupported(d)) {
    // The segments one after the other on this thread; CpuBackend runs
    // them as parallel tasks instead, with the same bits.
    thread_local std::vector<float> partials;
    const size_t stride = AttentionPartialFloats(n_q_heads, d);
    partials.resize(stride * AttentionSegments(n_keys));
    for (int32_t seg = 0; seg < AttentionSegments(n_keys); ++seg) {
      PagedAttentionSegment(q, n_q_heads, kv, n_keys, seg, scale, scores, partials.data() + seg * stride);
    }
    MergeAttentionSegments(partials.data(), n_q_heads, d, n_keys, scores, out);
    return;
  }
  // Other head dims: the prefill kernel itself on one token.
  PrefillQueries qs;
  qs.q = q;
  qs.q_token_stride = static_cast<int64_t>(n_q_heads) * d;
  qs.out = out;
  qs.out_token_stride = qs.q_token_stride;
  qs.n_q_heads = n_q_heads;
  qs.first_slot = n_keys - 1;
  qs.n_tokens = 1;
  PrefillAttention(qs, kv, scale, scores);
}

}  // namespace beacon
