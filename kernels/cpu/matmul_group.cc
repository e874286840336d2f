#include "kernels/cpu/matmul_group.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/packed_group.h"

namespace beacon {
namespace {

// Tokens multiplied with one unpacked weight block before moving on.
constexpr int kTokTile = 4;

// ---- Per-row kernel (AVX2): the GGUF layout, one group decoded at a time. ----

inline void HalfDots(const uint8_t* u, const int8_t* x, int32_t* lo, int32_t* hi) {
  const __m256i uv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u));
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  // u <= 63 and |x| <= 127: a pair sum is at most 16002, no saturation.
  const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(uv, xv), _mm256_set1_epi16(1));
  auto hsum = [](__m128i v) {
    v = _mm_hadd_epi32(v, v);
    v = _mm_hadd_epi32(v, v);
    return _mm_cvtsi128_si32(v);
  };
  *lo = hsum(_mm256_castsi256_si128(p));       // elements 0-15
  *hi = hsum(_mm256_extracti128_si256(p, 1));  // elements 16-31
}

template <int NT>
void GroupRowDot(DType t, const QuantGroupFormat& f, const uint8_t* row, const QuantizedRows& xq, int64_t t0,
                 float* out) {
  const int64_t cols = xq.cols, nb = cols / kQuantBlock;
  const int blocks = f.group / kQuantBlock;
  for (int i = 0; i < NT; ++i) out[i] = 0.0f;
  QuantGroup q;
  for (int64_t g = 0; g < cols / f.group; ++g) {
    DecodeGroup(t, row, g, &q);
    float acc[NT] = {}, macc[NT] = {};
    for (int b = 0; b < blocks; ++b) {
      const int64_t cb = g * blocks + b;
      for (int i = 0; i < NT; ++i) {
        const int64_t xi = (t0 + i) * nb + cb;
        int32_t lo, hi;
        HalfDots(q.u + 32 * b, xq.q.data() + (t0 + i) * cols + cb * kQuantBlock, &lo, &hi);
        const int32_t* is = xq.isum16.data() + 2 * xi;
        const int32_t p = q.sc[2 * b] * (lo - f.zero * is[0]) + q.sc[2 * b + 1] * (hi - f.zero * is[1]);
        acc[i] = std::fma(static_cast<float>(p), xq.d[xi], acc[i]);
        if (f.mins != 0) {
          const int32_t m = q.mn[2 * b] * is[0] + q.mn[2 * b + 1] * is[1];
          macc[i] = std::fma(static_cast<float>(m), xq.d[xi], macc[i]);
        }
      }
    }
    for (int i = 0; i < NT; ++i) {
      out[i] = std::fma(acc[i], q.d, out[i]);
      if (f.mins != 0) out[i] = std::fma(-macc[i], q.dmin, out[i]);
    }
  }
}

// ---- Packed 16-row kernel (AVX-512 VNNI): packed_group.h's layout. ----

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)

inline __m512i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

inline __m512i LoadScales(const uint8_t* p) {
  // The zero-masked form: GCC 12 warns (maybe-uninitialized) inside the
  // unmasked intrinsic's header code.
  return _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Zero-masked for the same reason as LoadScales.
inline __m512 ToFloat(__m512i v) { return _mm512_maskz_cvtepi32_ps(0xFFFF, v); }

inline __mmask64 LoadMask(const uint8_t* p) {
  uint64_t m;
  std::memcpy(&m, p, 8);
  return _cvtu64_mask64(m);
}

// Accumulates NT tokens (t0..t0+NT-1) against every super-block of one
// group; out[i] holds the 16 row results of token t0 + i.
template <DType T, int NT>
void GroupTile(const uint8_t* grp, int64_t n_sb, const QuantizedRows& xq, int64_t t0, __m512 out[NT]) {
  constexpr QuantGroupFormat F = GroupFormatOf(T);
  constexpr PackedGroupLayout L = MakePackedGroupLayout(F);
  const int64_t cols = xq.cols, nb = cols / kQuantBlock;
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  for (int i = 0; i < NT; ++i) out[i] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const uint8_t* base = grp + sb * L.sb_bytes;
    __m512 acc[NT], macc[NT];
    for (int i = 0; i < NT; ++i) acc[i] = macc[i] = _mm512_setzero_ps();
    for (int b = 0; b < L.blocks; ++b) {
      const uint8_t* blk = base + b * L.block_bytes;
      const int64_t cb = sb * L.blocks + b;
      __m512i w[8];
      for (int j = 0; j < 4; ++j) {
        const __m512i p = _mm512_loadu_si512(blk + 64 * j);
        w[j] = _mm512_and_si512(p, nibble);
        w[j + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), nibble);
      }
      for (int p = 0; p < L.hbits; ++p) {
        const __m512i bit = _mm512_set1_epi8(static_cast<char>(16 << p));
        for (int k = 0; k < 8; ++k) {
          w[k] = _mm512_mask_add_epi8(w[k], LoadMask(blk + L.mask_off() + 64 * p + 8 * k), w[k], bit);
        }
      }
      __m512i s0 = _mm512_setzero_si512(), s1 = s0, m0 = s0, m1 = s0;
      if constexpr (L.n_sc >= 1) s0 = LoadScales(blk + L.sc_off());
      if constexpr (L.n_sc == 2) s1 = LoadScales(blk + L.sc_off() + 16);
      if constexpr (L.n_mn >= 1) m0 = LoadScales(blk + L.mn_off());
      if constexpr (L.n_mn == 2) m1 = LoadScales(blk + L.mn_off() + 16);
      for (int i = 0; i < NT; ++i) {
        const int64_t t = t0 + i, xi = t * nb + cb;
        const int8_t* x = xq.q.data() + t * cols + cb * kQuantBlock;
        // w[k] holds elements E(k)..E(k)+3: k < 4 the low half of the block.
        __m512i lo0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], Bcast4(x));
        __m512i lo1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], Bcast4(x + 4));
        __m512i hi0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[4], Bcast4(x + 16));
        __m512i hi1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[5], Bcast4(x + 20));
        lo0 = _mm512_dpbusd_epi32(lo0, w[2], Bcast4(x + 8));
        lo1 = _mm512_dpbusd_epi32(lo1, w[3], Bcast4(x + 12));
        hi0 = _mm512_dpbusd_epi32(hi0, w[6], Bcast4(x + 24));
        hi1 = _mm512_dpbusd_epi32(hi1, w[7], Bcast4(x + 28));
        __m512i lo = _mm512_add_epi32(lo0, lo1), hi = _mm512_add_epi32(hi0, hi1);
        const int32_t* is = xq.isum16.data() + 2 * xi;
        if constexpr (F.zero != 0) {
          lo = _mm512_sub_epi32(lo, _mm512_set1_epi32(F.zero * is[0]));
          hi = _mm512_sub_epi32(hi, _mm512_set1_epi32(F.zero * is[1]));
        }
        __m512i p = _mm512_setzero_si512();
        if constexpr (L.n_sc == 0) {
          p = _mm512_add_epi32(lo, hi);
        } else if constexpr (L.n_sc == 1) {
          p = _mm512_mullo_epi32(_mm512_add_epi32(lo, hi), s0);
        } else {
          p = _mm512_add_epi32(_mm512_mullo_epi32(lo, s0), _mm512_mullo_epi32(hi, s1));
        }
        const __m512 xd = _mm512_set1_ps(xq.d[xi]);
        acc[i] = _mm512_fmadd_ps(ToFloat(p), xd, acc[i]);
        if constexpr (L.dmin) {
          __m512i m = _mm512_setzero_si512();
          if constexpr (L.n_mn == 0) {
            m = _mm512_set1_epi32(is[0] + is[1]);
          } else if constexpr (L.n_mn == 1) {
            m = _mm512_mullo_epi32(m0, _mm512_set1_epi32(is[0] + is[1]));
          } else {
            m = _mm512_add_epi32(_mm512_mullo_epi32(m0, _mm512_set1_epi32(is[0])),
                                 _mm512_mullo_epi32(m1, _mm512_set1_epi32(is[1])));
          }
          macc[i] = _mm512_fmadd_ps(ToFloat(m), xd, macc[i]);
        }
      }
    }
    const __m512 d = _mm512_loadu_ps(reinterpret_cast<const float*>(base + L.d_off()));
    for (int i = 0; i < NT; ++i) out[i] = _mm512_fmadd_ps(acc[i], d, out[i]);
    if constexpr (L.dmin) {
      const __m512 dmin = _mm512_loadu_ps(reinterpret_cast<const float*>(base + L.dmin_off()));
      for (int i = 0; i < NT; ++i) out[i] = _mm512_fnmadd_ps(macc[i], dmin, out[i]);
    }
  }
}

template <DType T>
void Groups(const PackedMatrix& w, const QuantizedRows& xq, int64_t n_tokens, int64_t g_begin, int64_t g_end, float* y,
            int64_t y_stride) {
  const int64_t n_sb = w.cols() / GroupFormatOf(T).group;
  __m512 out[kTokTile];
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t r0 = g * kPackRows;
    const int valid = static_cast<int>(std::min<int64_t>(kPackRows, w.rows() - r0));
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    auto store = [&](int64_t t, __m512 v) { _mm512_mask_storeu_ps(y + t * y_stride + r0, mask, v); };
    int64_t t = 0;
    for (; t + kTokTile <= n_tokens; t += kTokTile) {
      GroupTile<T, kTokTile>(w.group(g), n_sb, xq, t, out);
      for (int i = 0; i < kTokTile; ++i) store(t + i, out[i]);
    }
    for (; t < n_tokens; ++t) {
      GroupTile<T, 1>(w.group(g), n_sb, xq, t, out);
      store(t, out[0]);
    }
  }
}

#endif  // AVX-512 VNNI

}  // namespace

void MatMulPackedGroupFormat(const PackedMatrix& w, const QuantizedRows& xq, int64_t n_tokens, int64_t g_begin,
                             int64_t g_end, float* y, int64_t y_stride) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  switch (w.dtype()) {
    case DType::kQ2_K: return Groups<DType::kQ2_K>(w, xq, n_tokens, g_begin, g_end, y, y_stride);
    case DType::kQ3_K: return Groups<DType::kQ3_K>(w, xq, n_tokens, g_begin, g_end, y, y_stride);
    case DType::kQ4_K: return Groups<DType::kQ4_K>(w, xq, n_tokens, g_begin, g_end, y, y_stride);
    case DType::kQ5_K: return Groups<DType::kQ5_K>(w, xq, n_tokens, g_begin, g_end, y, y_stride);
    case DType::kQ6_K: return Groups<DType::kQ6_K>(w, xq, n_tokens, g_begin, g_end, y, y_stride);
    case DType::kQ5_0: return Groups<DType::kQ5_0>(w, xq, n_tokens, g_begin, g_end, y, y_stride);
    case DType::kQ5_1: return Groups<DType::kQ5_1>(w, xq, n_tokens, g_begin, g_end, y, y_stride);
    default: return;
  }
#else
  (void)w, (void)xq, (void)n_tokens, (void)g_begin, (void)g_end, (void)y, (void)y_stride;
#endif
}

void MatMulGroupRows(const MatrixView& w, const QuantizedRows& xq, int64_t n_tokens, int64_t row_begin, int64_t row_end,
                     float* y, int64_t y_stride) {
  const QuantGroupFormat f = GroupFormatOf(w.dtype);
  const size_t row_bytes = DTypeRowBytes(w.dtype, w.cols);
  float out[kTokTile];
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + row_bytes * r;
    int64_t t = 0;
    for (; t + kTokTile <= n_tokens; t += kTokTile) {
      GroupRowDot<kTokTile>(w.dtype, f, row, xq, t, out);
      for (int i = 0; i < kTokTile; ++i) y[(t + i) * y_stride + (r - row_begin)] = out[i];
    }
    for (; t < n_tokens; ++t) {
      GroupRowDot<1>(w.dtype, f, row, xq, t, out);
      y[t * y_stride + (r - row_begin)] = out[0];
    }
  }
}

}  // namespace beacon
