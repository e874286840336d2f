#include "kernels/cpu/matmul_packed.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/token_tiles.h"

namespace beacon {

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
namespace {

// Tokens multiplied with one unpacked weight block before moving on: tiles
// of 6 (the most that fit the registers: 8 weight vectors + 6 accumulators +
// temporaries), then the rest (1-5 tokens) as one tile of its size, so every
// block is unpacked once more, not once a token (matmul_group.cc says what
// that cost). A token's operations are the same in any tile (GroupTile's loop
// over tokens is independent per token), so results do not depend on the
// batch. Measured at 256 tokens (a prefill chunk) on the default model's
// shapes, one thread: 6 is ~5% faster than 4 alone; 8 spills and is slower.
constexpr int kTokTile = 6;

inline __m512i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Accumulates NT tokens (t0..t0+NT-1) against every block of one group;
// out[i] holds the 16 row results of token t0 + i.
template <bool kQ8, int NT>
void GroupTile(const uint8_t* grp, int64_t nb, size_t block_bytes, const QuantizedRows& xq, int64_t t0,
               __m512 out[NT]) {
  __m512 acc[NT];
  for (int i = 0; i < NT; ++i) acc[i] = _mm512_setzero_ps();
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  const int64_t cols = xq.cols;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = grp + b * block_bytes;
    __m512i w[8];
    __m512 d, m, c_init;
    if constexpr (kQ8) {
      for (int k = 0; k < 8; ++k) w[k] = _mm512_loadu_si512(blk + 64 * k);
      d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 512)));
      c_init = _mm512_castsi512_ps(_mm512_loadu_si512(blk + 544));
      m = _mm512_setzero_ps();
    } else {
      for (int j = 0; j < 4; ++j) {
        const __m512i p = _mm512_loadu_si512(blk + 64 * j);
        w[j] = _mm512_and_si512(p, nibble);
        w[j + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), nibble);
      }
      d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 256)));
      m = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 288)));
      c_init = _mm512_setzero_ps();
    }
    for (int i = 0; i < NT; ++i) {
      const int64_t t = t0 + i;
      const int8_t* x = xq.q.data() + t * cols + b * kQuantBlock;
      // Two independent chains halve the vpdpbusd latency on the path.
      __m512i a0 = _mm512_castps_si512(c_init), a1 = _mm512_setzero_si512();
      for (int k = 0; k < 8; k += 2) {
        if constexpr (kQ8) {
          // Activations + 128 as the unsigned operand; c_init removes 128 * sum(w).
          a0 = _mm512_dpbusd_epi32(a0, _mm512_xor_si512(Bcast4(x + 4 * k), bias), w[k]);
          a1 = _mm512_dpbusd_epi32(a1, _mm512_xor_si512(Bcast4(x + 4 * k + 4), bias), w[k + 1]);
        } else {
          // Packed order: w[j] holds elements 4j..4j+3, w[j+4] 16+4j..16+4j+3.
          const int e0 = k < 4 ? 4 * k : 16 + 4 * (k - 4);
          const int e1 = k + 1 < 4 ? 4 * (k + 1) : 16 + 4 * (k + 1 - 4);
          a0 = _mm512_dpbusd_epi32(a0, w[k], Bcast4(x + e0));
          a1 = _mm512_dpbusd_epi32(a1, w[k + 1], Bcast4(x + e1));
        }
      }
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1));
      const int64_t xi = t * (cols / kQuantBlock) + b;
      acc[i] = _mm512_fmadd_ps(dot, _mm512_mul_ps(d, _mm512_set1_ps(xq.d[xi])), acc[i]);
      if constexpr (!kQ8) acc[i] = _mm512_fmadd_ps(m, _mm512_set1_ps(xq.sum[xi]), acc[i]);
    }
  }
  for (int i = 0; i < NT; ++i) out[i] = acc[i];
}

template <bool kQ8>
void Groups(const PackedMatrix& w, const QuantizedRows& xq, int64_t n_tokens, int64_t g_begin, int64_t g_end, float* y,
            int64_t y_stride) {
  const int64_t nb = w.n_blocks();
  const size_t bb = w.block_bytes();
  __m512 out[kTokTile];
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t r0 = g * kPackRows;
    const int valid = static_cast<int>(std::min<int64_t>(kPackRows, w.rows() - r0));
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    auto store = [&](int64_t t, __m512 v) { _mm512_mask_storeu_ps(y + t * y_stride + r0, mask, v); };
    token_tiles::ForEach<kTokTile>(0, n_tokens, [&]<int NT>(int64_t t) {
      GroupTile<kQ8, NT>(w.group(g), nb, bb, xq, t, out);
      for (int i = 0; i < NT; ++i) store(t + i, out[i]);
    });
  }
}

}  // namespace

void MatMulPackedGroups(const PackedMatrix& w, const QuantizedRows& xq, int64_t n_tokens, int64_t g_begin,
                        int64_t g_end, float* y, int64_t y_stride) {
  if (w.dtype() == DType::kQ8_0) {
    Groups<true>(w, xq, n_tokens, g_begin, g_end, y, y_stride);
  } else {
    Groups<false>(w, xq, n_tokens, g_begin, g_end, y, y_stride);
  }
}

#else  // no AVX-512 VNNI: PackedMatrix::Supported() is false, nothing is packed.

void MatMulPackedGroups(const PackedMatrix&, const QuantizedRows&, int64_t, int64_t, int64_t, float*, int64_t) {}

#endif

}  // namespace beacon
