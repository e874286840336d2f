#include "kernels/cpu/prefill_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_exp.h"
#include "kernels/cpu/attention_merge.h"
#include "kernels/cpu/ops.h"

namespace beacon {
namespace {

// ---- Generic path (a head dim neither the AVX-512 tiles nor the AVX2
// kernel takes, or no AVX2): each token by itself, the two-pass softmax (scores, softmax, weighted sum of
// values) on ops.h's AVX2 dot and axpy. A tiled version in plain loops,
// which the compiler vectorises over rows, was measured slower than this on
// an x86-64-v3 build (33 vs 12 ns per head and key at 2,048 keys); the AVX2
// kernel of attention_avx2.cc, keys in lanes, is faster than both.
void GenericToken(const float* q, int n_q_heads, const PagedHeadView& kv, int32_t n_keys, float scale, float* scores,
                  float* out) {
  const int d = kv.head_dim;
  std::vector<float> row(kv.dtype == DType::kF32 ? 0 : d);  // a widened bf16 row
  for (int32_t s = 0; s < n_keys; ++s) {
    const float* k = kv.KeyF32(s, row.data());
    for (int g = 0; g < n_q_heads; ++g) scores[g * n_keys + s] = scale * Dot(q + g * d, k, d);
  }
  for (int g = 0; g < n_q_heads; ++g) SoftmaxInPlace(scores + g * n_keys, n_keys);
  std::fill(out, out + static_cast<size_t>(n_q_heads) * d, 0.0f);
  for (int32_t s = 0; s < n_keys; ++s) {
    const float* v = kv.ValueF32(s, row.data());
    for (int g = 0; g < n_q_heads; ++g) Axpy(scores[g * n_keys + s], v, out + g * d, d);
  }
}

#if defined(__AVX512F__)
// ---- AVX-512 path: up to 48 rows (RV vectors of 16), keys in tiles of 16.
constexpr int kKT = kPrefillKeyTile;

// The tiles keep a query tile transposed, rows in the innermost index
// ("rows in lanes"): qt[c][r] = scale * q_r[c] and ot[c][r] the unnormalised
// output. Scores of one key then form a vector over rows, so the running
// max, sum and rescaling of the online softmax are plain lane-wise
// operations, and each row's arithmetic is independent of its neighbours.
//
// Row r of the whole call is query head r % G of token r / G.
struct RowRef {
  const float* q;
  float* out;
  int32_t slot;
};

RowRef Row(const PrefillQueries& qs, int64_t r, int d) {
  const int64_t i = r / qs.n_q_heads;
  const int g = static_cast<int>(r % qs.n_q_heads);
  return {qs.q + i * qs.q_token_stride + g * d, qs.out + i * qs.out_token_stride + g * d,
          qs.first_slot + static_cast<int32_t>(i)};
}

constexpr int kMaxRV = kPrefillRowTile / 16;
constexpr int kMaxDim = 256;

struct Avx512Scratch {
  alignas(64) float qt[kMaxDim * kPrefillRowTile];
  alignas(64) float ot[kMaxDim * kPrefillRowTile];
  alignas(64) float p[kKT * kPrefillRowTile];  // scores, then probabilities, [key][row]
  // A bf16 cache's key and value tile widened to f32 (once per query tile,
  // shared by its up to 48 rows): the tile code then reads f32 alone.
  alignas(64) float kb[kKT * kMaxDim];
  alignas(64) float vb[kKT * kMaxDim];
  // The folded state of the finished key segments (attention_merge.h).
  alignas(64) float oacc[kMaxDim * kPrefillRowTile];
};

// S[j][row] for keys j0..j0+7 of the tile: a register block of 8 keys x 16 RV
// rows, summed over head_dim in order. Row stride of qt and s: 16 RV.
template <int RV>
inline void Scores8(const float* qt, const float* const* kp, int d, float* s) {
  __m512 acc[8][RV];
  for (int j = 0; j < 8; ++j) {
    for (int v = 0; v < RV; ++v) acc[j][v] = _mm512_setzero_ps();
  }
  for (int c = 0; c < d; ++c) {
    __m512 q[RV];
    for (int v = 0; v < RV; ++v) q[v] = _mm512_load_ps(qt + c * 16 * RV + 16 * v);
    for (int j = 0; j < 8; ++j) {
      const __m512 k = _mm512_set1_ps(kp[j][c]);
      for (int v = 0; v < RV; ++v) acc[j][v] = _mm512_fmadd_ps(k, q[v], acc[j][v]);
    }
  }
  for (int j = 0; j < 8; ++j) {
    for (int v = 0; v < RV; ++v) _mm512_store_ps(s + j * 16 * RV + 16 * v, acc[j][v]);
  }
}

// ot[c][row] += sum_j v_j[c] p[j][row] over the tile's nk keys in order, for
// 8 columns c0..c0+7 at a time (d % 8 == 0).
template <int RV>
inline void AccumulateValues(const float* p, const float* const* vp, int nk, int d, float* ot) {
  for (int c0 = 0; c0 < d; c0 += 8) {
    __m512 acc[8][RV];
    for (int i = 0; i < 8; ++i) {
      for (int v = 0; v < RV; ++v) acc[i][v] = _mm512_load_ps(ot + (c0 + i) * 16 * RV + 16 * v);
    }
    for (int j = 0; j < nk; ++j) {
      __m512 pj[RV];
      for (int v = 0; v < RV; ++v) pj[v] = _mm512_load_ps(p + j * 16 * RV + 16 * v);
      for (int i = 0; i < 8; ++i) {
        const __m512 x = _mm512_set1_ps(vp[j][c0 + i]);
        for (int v = 0; v < RV; ++v) acc[i][v] = _mm512_fmadd_ps(x, pj[v], acc[i][v]);
      }
    }
    for (int i = 0; i < 8; ++i) {
      for (int v = 0; v < RV; ++v) _mm512_store_ps(ot + (c0 + i) * 16 * RV + 16 * v, acc[i][v]);
    }
  }
}

// One tile of nr <= 16 RV rows. The operations applied to a row do not depend
// on RV nor on the other rows (rows are lanes), which is what makes a token's
// result the same in a full tile of 48 rows and in a chunk's smaller last
// tile; attention.cc's decode kernel applies the same operations.
// The sum of a key tile's 16 probabilities is a fixed tree: (j, j+8), then
// (j, j+4), (j, j+2), (j, j+1), masked keys counting as 0.
template <int RV>
void Avx512Tile(const PrefillQueries& qs, const PagedHeadView& kv, float scale, int64_t r0, int nr, float* probs,
                Avx512Scratch* w) {
  constexpr int kRT = 16 * RV;
  const int d = kv.head_dim;
  alignas(64) int32_t slot[kRT];
  RowRef rows[kRT];
  for (int r = 0; r < kRT; ++r) {
    // Padding rows repeat the last real row; their results are dropped.
    rows[r] = Row(qs, r0 + std::min(r, nr - 1), d);
    slot[r] = rows[r].slot;
    for (int c = 0; c < d; ++c) w->qt[c * kRT + r] = scale * rows[r].q[c];
  }
  std::fill(w->ot, w->ot + d * kRT, 0.0f);
  __m512i slotv[RV];
  __m512 m[RV], l[RV];
  for (int v = 0; v < RV; ++v) {
    slotv[v] = _mm512_load_si512(slot + 16 * v);
    m[v] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    l[v] = _mm512_setzero_ps();
  }
  const int32_t min_slot = slot[0], max_slot = slot[kRT - 1];
  const float* kp[kKT];
  const float* vp[kKT];
  // Segments: at every multiple of kAttentionSegment the running state is
  // folded into the accumulated one (the first is copied) and restarted, as
  // the decode kernel's segments are (attention.h).
  __m512 macc[RV], lacc[RV];
  bool folded = false;
  auto fold = [&] {
    for (int v = 0; v < RV; ++v) {
      if (!folded) {
        macc[v] = m[v];
        lacc[v] = l[v];
        for (int c = 0; c < d; ++c)
          _mm512_store_ps(w->oacc + c * kRT + 16 * v, _mm512_load_ps(w->ot + c * kRT + 16 * v));
        continue;
      }
      __m512 a, b;
      const __m512 mn = MergeScales(macc[v], m[v], &a, &b);
      lacc[v] = MergeSum(lacc[v], a, l[v], b);
      for (int c = 0; c < d; ++c) {
        float* oa = w->oacc + c * kRT + 16 * v;
        _mm512_store_ps(oa, MergeSum(_mm512_load_ps(oa), a, _mm512_load_ps(w->ot + c * kRT + 16 * v), b));
      }
      macc[v] = mn;
    }
    folded = true;
  };
  for (int32_t kt = 0; kt <= max_slot; kt += kKT) {
    if (kt > 0 && kt % kAttentionSegment == 0) {
      fold();
      for (int v = 0; v < RV; ++v) {
        m[v] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
        l[v] = _mm512_setzero_ps();
      }
      std::fill(w->ot, w->ot + d * kRT, 0.0f);
    }
    const int nk = std::min<int32_t>(kKT, max_slot + 1 - kt);
    // Keys past max_slot (a partial last tile) point at a valid slot; the
    // causal mask removes them.
    for (int j = 0; j < kKT; ++j) {
      if (j >= nk) {
        kp[j] = kp[nk - 1];
        vp[j] = vp[nk - 1];
        continue;
      }
      kp[j] = kv.KeyF32(kt + j, w->kb + j * kMaxDim);
      vp[j] = kv.ValueF32(kt + j, w->vb + j * kMaxDim);
    }
    Scores8<RV>(w->qt, kp, d, w->p);
    if (nk > 8) Scores8<RV>(w->qt, kp + 8, d, w->p + 8 * kRT);
    if (probs != nullptr) {  // raw scores now, normalised after the last tile
      for (int r = 0; r < nr; ++r) {
        for (int j = 0; j < nk; ++j) probs[(r0 + r) * (max_slot + 1) + kt + j] = w->p[j * kRT + r];
      }
    }
    // Only a tile reaching past the first row's slot needs the causal mask.
    const bool diagonal = kt + kKT - 1 > min_slot;
    for (int v = 0; v < RV; ++v) {
      __mmask16 keep[kKT];
      __m512 mt = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      for (int j = 0; j < nk; ++j) {
        const __m512 s = _mm512_load_ps(w->p + j * kRT + 16 * v);
        keep[j] = diagonal ? _mm512_cmp_epi32_mask(_mm512_set1_epi32(kt + j), slotv[v], _MM_CMPINT_LE) : 0xffff;
        mt = _mm512_mask_max_ps(mt, keep[j], mt, s);
      }
      const __m512 mn = _mm512_max_ps(m[v], mt);
      const __mmask16 moved = _mm512_cmp_ps_mask(mn, m[v], _CMP_NEQ_UQ);
      // Rows whose max did not move keep alpha = 1 (AttentionExp(0) == 1 exactly).
      const __m512 alpha = AttentionExp(_mm512_sub_ps(m[v], mn));
      __m512 pr[kKT];
      for (int j = 0; j < kKT; ++j) {
        if (j >= nk) {
          pr[j] = _mm512_setzero_ps();
          continue;
        }
        float* pj = w->p + j * kRT + 16 * v;
        pr[j] = _mm512_maskz_mov_ps(keep[j], AttentionExp(_mm512_sub_ps(_mm512_load_ps(pj), mn)));
        _mm512_store_ps(pj, pr[j]);
      }
      for (int half = kKT / 2; half >= 1; half /= 2) {
        for (int j = 0; j < half; ++j) pr[j] = _mm512_add_ps(pr[j], pr[j + half]);
      }
      l[v] = _mm512_fmadd_ps(l[v], alpha, pr[0]);
      m[v] = mn;
      if (moved != 0) {
        for (int c = 0; c < d; ++c) {
          float* o = w->ot + c * kRT + 16 * v;
          _mm512_store_ps(o, _mm512_mul_ps(_mm512_load_ps(o), alpha));
        }
      }
    }
    AccumulateValues<RV>(w->p, vp, nk, d, w->ot);
  }
  const float* ofin = w->ot;
  if (folded) {  // more than one segment: fold the last one in too
    fold();
    for (int v = 0; v < RV; ++v) {
      m[v] = macc[v];
      l[v] = lacc[v];
    }
    ofin = w->oacc;
  }
  alignas(64) float lsum[kRT], mfin[kRT];
  for (int v = 0; v < RV; ++v) {
    _mm512_store_ps(lsum + 16 * v, l[v]);
    _mm512_store_ps(mfin + 16 * v, m[v]);
  }
  for (int r = 0; r < nr; ++r) {
    for (int c = 0; c < d; ++c) rows[r].out[c] = ofin[c * kRT + r] / lsum[r];
    if (probs != nullptr) {
      float* p = probs + (r0 + r) * (max_slot + 1);
      const __m512 mr = _mm512_set1_ps(mfin[r]), lr = _mm512_set1_ps(lsum[r]);
      for (int32_t j = 0; j <= max_slot; j += 16) {
        const __mmask16 in = static_cast<__mmask16>(max_slot + 1 - j >= 16 ? 0xffff : (1u << (max_slot + 1 - j)) - 1);
        const __m512 e = AttentionExp(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, p + j), mr));
        _mm512_mask_storeu_ps(p + j, in, _mm512_div_ps(e, lr));
      }
    }
  }
}
#endif  // __AVX512F__

}  // namespace

void PrefillAttentionGeneric(const PrefillQueries& qs, const PagedHeadView& kv, float scale, float* probs) {
  if (qs.n_tokens == 0) return;
  std::vector<float> scratch(probs != nullptr ? 0 : static_cast<size_t>(qs.n_q_heads) * (qs.first_slot + qs.n_tokens));
  for (int32_t i = 0; i < qs.n_tokens; ++i) {
    GenericToken(qs.q + i * qs.q_token_stride, qs.n_q_heads, kv, qs.first_slot + i + 1, scale,
                 probs != nullptr ? probs : scratch.data(), qs.out + i * qs.out_token_stride);
  }
}

void PrefillAttentionAvx2(const PrefillQueries& qs, const PagedHeadView& kv, float scale, float* probs) {
  const int g = qs.n_q_heads, d = kv.head_dim;
  const size_t stride = AttentionPartialFloats(g, d);
  thread_local std::vector<float> partials;
  for (int32_t i = 0; i < qs.n_tokens; ++i) {
    const float* q = qs.q + i * qs.q_token_stride;
    const int32_t n_keys = qs.first_slot + i + 1;
    partials.resize(stride * AttentionSegments(n_keys));
    for (int32_t seg = 0; seg < AttentionSegments(n_keys); ++seg) {
      PagedAttentionSegmentAvx2(q, g, kv, n_keys, seg, scale, probs, partials.data() + seg * stride);
    }
    MergeAttentionSegmentsAvx2(partials.data(), g, d, n_keys, probs, qs.out + i * qs.out_token_stride);
  }
}

void PrefillAttention(const PrefillQueries& qs, const PagedHeadView& kv, float scale, float* probs) {
#if defined(__AVX512F__)
  if (kv.head_dim % 8 == 0 && kv.head_dim <= kMaxDim) {
    const int64_t n_rows = static_cast<int64_t>(qs.n_tokens) * qs.n_q_heads;
    if (n_rows == 0) return;
    // ~180 KB: on the stack of the calling thread, reused for every tile.
    Avx512Scratch scratch;
    for (int64_t r0 = 0; r0 < n_rows; r0 += kPrefillRowTile) {
      // The last tile (or a decode step's few rows) takes as few vectors as
      // its rows need: a row's result is the same in any of them.
      const int nr = static_cast<int>(std::min<int64_t>(kPrefillRowTile, n_rows - r0));
      switch ((nr + 15) / 16) {
        case 1: Avx512Tile<1>(qs, kv, scale, r0, nr, probs, &scratch); break;
        case 2: Avx512Tile<2>(qs, kv, scale, r0, nr, probs, &scratch); break;
        default: Avx512Tile<kMaxRV>(qs, kv, scale, r0, nr, probs, &scratch); break;
      }
    }
    return;
  }
#else
  if (Avx2AttentionSupported(kv.head_dim)) {
    PrefillAttentionAvx2(qs, kv, scale, probs);
    return;
  }
#endif
  PrefillAttentionGeneric(qs, kv, scale, probs);
}

}  // namespace beacon
