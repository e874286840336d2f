#include "kernels/cpu/matmul_tiled.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/simd.h"

namespace beacon {
namespace {

constexpr int kTokTile = 4;

// The FMA tile's vector: 16 floats with AVX-512 (32 registers: the 4x4
// accumulators plus operands fit), else 8.
#if defined(__AVX512F__)
using V = __m512;
constexpr int kLanes = 16;
inline V Load(const float* p) { return _mm512_loadu_ps(p); }
inline V Zero() { return _mm512_setzero_ps(); }
inline V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline float Reduce(V v) { return _mm512_reduce_add_ps(v); }

// The 16 sums of a 4x4 tile's accumulators acc[i][j] (numbered k = 4i + j
// below) in one vector: lane 4j + i holds the sum of acc[i][j], so quarter j holds
// rows 0..3 of token j. Bit-identical to Reduce on each accumulator: that
// reduction adds lanes (l, l + 8), then (l, l + 4), (l, l + 2) and (l, l + 1),
// and each step below adds the same pairs, two accumulators per vector, with
// shuffles instead of one extract chain per accumulator (IEEE addition is
// commutative, so only the pairing matters). On the scoring shape of an
// eviction (hundreds of queries against a 16-slot block, d = 128) the 16
// separate reductions cost as many instructions as the FMAs they finish.
inline V ReduceTile(const V (&acc)[4][4]) {
  V w[8], x[4], y[2];
  for (int m = 0; m < 8; ++m) {  // lanes (l, l + 8): 8-lane halves of accumulators 2m, 2m + 1
    const V a = acc[m / 2][2 * (m % 2)], b = acc[m / 2][2 * (m % 2) + 1];
    w[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int n = 0; n < 4; ++n) {  // (l, l + 4): quarter q of x[n] belongs to accumulator 4n + q
    const V a = w[2 * n], b = w[2 * n + 1];
    x[n] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  for (int p = 0; p < 2; ++p) {  // (l, l + 2), within each quarter
    const V a = x[2 * p], b = x[2 * p + 1];
    y[p] = _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // (l, l + 1): element e of quarter q is accumulator 4e + q.
  return _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
}
#else
using V = __m256;
constexpr int kLanes = 8;
inline V Load(const float* p) { return _mm256_loadu_ps(p); }
inline V Zero() { return _mm256_setzero_ps(); }
inline V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline float Reduce(V v) { return HorizontalSum(v); }
#endif

// 16 nibbles (low halves or high halves of 16 bytes) as floats: two vectors.
inline void NibblesToFloat(__m128i nib, __m256* out_lo8, __m256* out_hi8) {
  *out_lo8 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(nib));
  *out_hi8 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(nib, 8)));
}

template <DType T>
void DequantBlocks(const uint8_t* src, float* dst, int64_t n) {
  const __m128i mask = _mm_set1_epi8(0x0f);
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    float* o = dst + b * kQuantBlock;
    if constexpr (T == DType::kQ8_0) {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(src) + b;
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(blk->d));
      for (int k = 0; k < 4; ++k) {
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk->qs + 8 * k));
        _mm256_storeu_ps(o + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
      }
    } else {
      const uint8_t* qs;
      __m256 d, m;
      if constexpr (T == DType::kQ4_1) {
        const auto* blk = reinterpret_cast<const BlockQ4_1*>(src) + b;
        qs = blk->qs;
        d = _mm256_set1_ps(_cvtsh_ss(blk->d));
        m = _mm256_set1_ps(_cvtsh_ss(blk->m));
      } else {
        const auto* blk = reinterpret_cast<const BlockQ4_0*>(src) + b;
        qs = blk->qs;
        const float df = _cvtsh_ss(blk->d);
        d = _mm256_set1_ps(df);
        m = _mm256_set1_ps(-8.0f * df);
      }
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
      __m256 v[4];
      NibblesToFloat(_mm_and_si128(bytes, mask), &v[0], &v[1]);
      NibblesToFloat(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask), &v[2], &v[3]);
      // d * n + m, as the scalar reference computes it (up to FMA contraction:
      // the two may differ in the last bit).
      for (int k = 0; k < 4; ++k) _mm256_storeu_ps(o + 8 * k, _mm256_add_ps(_mm256_mul_ps(d, v[k]), m));
    }
  }
}

}  // namespace

void DequantizeRowFast(DType t, const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::kQ4_1: return DequantBlocks<DType::kQ4_1>(s, dst, n);
    case DType::kQ4_0: return DequantBlocks<DType::kQ4_0>(s, dst, n);
    case DType::kQ8_0: return DequantBlocks<DType::kQ8_0>(s, dst, n);
    case DType::kF16: {
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * i))));
      }
      DequantizeRow(t, s + 2 * i, dst + i, n - i);
      return;
    }
    case DType::kBF16: {
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * i));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
      }
      DequantizeRow(t, s + 2 * i, dst + i, n - i);
      return;
    }
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    default: DequantizeRow(t, src, dst, n); return;  // 5-bit and K-quants: the scalar code
  }
}

void MatMulRowsTiled(const MatrixView& w, const float* x, int64_t n_tokens, int64_t row_begin, int64_t row_end,
                     float* y, int64_t y_stride) {
  const int64_t cols = w.cols;
  const int64_t vec_cols = cols / kLanes * kLanes;
  const size_t row_bytes = DTypeRowBytes(w.dtype, cols);
  // Rows converted together: as many 4-row tiles as fit 16 KiB of f32 (at
  // most 4), so every token tile is read once per group instead of once per
  // 4 rows. Narrow matrices gain: an eviction's scoring runs 192 queries (96
  // KiB, more than L1) against each 16-slot block of d = 128 keys, and read
  // them from L2 four times per block before. Wide ones keep 4-row groups.
  // The order of the sums within a (row, token) is unchanged: bit-identical.
  const int group_tiles =
      static_cast<int>(std::clamp<int64_t>(16384 / (kTiledRowTile * cols * int64_t{sizeof(float)}), 1, 4));
  const int group_rows = group_tiles * kTiledRowTile;
  thread_local std::vector<float> tile;
  tile.resize(static_cast<size_t>(group_rows) * cols);

  for (int64_t g0 = row_begin; g0 < row_end; g0 += group_rows) {
    const int gr = static_cast<int>(std::min<int64_t>(group_rows, row_end - g0));
    // wr[i]: row g0 + i as f32; a short last 4-row tile repeats its last row.
    const float* wr[4 * kTiledRowTile];
    for (int i = 0; i < group_rows; ++i) {
      const int64_t r = g0 + std::min(i, gr - 1);
      const uint8_t* src = static_cast<const uint8_t*>(w.data) + row_bytes * r;
      if (w.dtype == DType::kF32) {
        wr[i] = reinterpret_cast<const float*>(src);
      } else {
        if (i < gr) DequantizeRowFast(w.dtype, src, tile.data() + i * cols, cols);
        wr[i] = tile.data() + std::min(i, gr - 1) * cols;
      }
    }
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokTile) {
      const int nt = static_cast<int>(std::min<int64_t>(kTokTile, n_tokens - t0));
      const float* xr[kTokTile];
      for (int j = 0; j < kTokTile; ++j) xr[j] = x + (t0 + std::min(j, nt - 1)) * cols;
      for (int r0 = 0; r0 < gr; r0 += kTiledRowTile) {
        const int nr = std::min(kTiledRowTile, gr - r0);
        const float* const* wt = wr + r0;
        V acc[kTiledRowTile][kTokTile];
        for (auto& row : acc) {
          for (V& a : row) a = Zero();
        }
        for (int64_t c = 0; c < vec_cols; c += kLanes) {
          V xv[kTokTile];
          for (int j = 0; j < kTokTile; ++j) xv[j] = Load(xr[j] + c);
          for (int i = 0; i < kTiledRowTile; ++i) {
            const V wv = Load(wt[i] + c);
            for (int j = 0; j < kTokTile; ++j) acc[i][j] = Fma(wv, xv[j], acc[i][j]);
          }
        }
#if defined(__AVX512F__)
        static_assert(kTiledRowTile == 4 && kTokTile == 4, "ReduceTile sums a 4x4 tile");
        alignas(64) float sums[16];  // [token][row]
        _mm512_store_ps(sums, ReduceTile(acc));
        auto sum = [&](int i, int j) { return sums[4 * j + i]; };
#else
        auto sum = [&](int i, int j) { return Reduce(acc[i][j]); };
#endif
        for (int i = 0; i < nr; ++i) {
          for (int j = 0; j < nt; ++j) {
            float s = sum(i, j);
            for (int64_t c = vec_cols; c < cols; ++c) s += wt[i][c] * xr[j][c];
            y[(t0 + j) * y_stride + (g0 + r0 + i - row_begin)] = s;
          }
        }
      }
    }
  }
}

}  // namespace beacon
