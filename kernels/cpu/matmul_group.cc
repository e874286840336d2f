#include "kernels/cpu/matmul_group.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/packed_group.h"
#include "kernels/cpu/token_tiles.h"

namespace beacon {
namespace {

// Tokens multiplied with one unpacked weight block before moving on (the
// per-row kernel), and the packed kernel's wide tile: unpacking a block
// (nibbles, bit planes, scales) is shared by the tokens of a tile. Both take
// what is left after their full tiles (1-3 tokens, 1-7) as one tile of that
// size: as smaller tiles and then single tokens, each unpacking every block
// again, batch 3 took 1.6x and batch 2 1.2x the time of batch 4 (1.5B model's
// Q4_K FFN matrix, packed, one thread; docs/performance.md "Any batch, not
// only multiples of four").
constexpr int kTokTile = 4;
constexpr int kWideTile = 8;
// Types whose super-block is one block (Q5_0, Q5_1) keep no per-group
// accumulators, so 16 tokens' results fit in registers beside the weights.
constexpr int kSingleTile = 16;
// Software prefetch distance, in bytes of the packed stream: each block asks
// for the cache lines this far ahead. A decode step streams every weight from
// DRAM once, and the hardware prefetchers alone restart at each 4 KiB page;
// 2 KiB ahead took the 1.5B model's Q6_K output matrix (191 MB) from 16.6 to
// 19.3 GB/s at batch 1 on 2 threads (beacon-kernels-bench qwen15b_*; issue 34).
// Past the end of the matrix it is a hint to nowhere: prefetches never fault.
constexpr size_t kPrefetchAhead = 2048;

// ---- Per-row kernel (AVX2): the GGUF layout, one group decoded at a time. ----

// The products of one 32-element block: lane k sums elements 4k..4k+3, so
// lanes 0-3 hold the low half and lanes 4-7 the high half.
inline __m256i BlockProducts(const uint8_t* u, const int8_t* x) {
  const __m256i uv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u));
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  // u <= 63 and |x| <= 127: a pair sum is at most 16002, no saturation.
  return _mm256_madd_epi16(_mm256_maddubs_epi16(uv, xv), _mm256_set1_epi16(1));
}

// lo[j], hi[j]: the half sums of `n` consecutive blocks (n = 1 or a multiple
// of 4). Integer sums are exact, so reducing four blocks in one tree of
// horizontal adds gives what one block at a time gives: with the reduction
// done block by block, it took about as many instructions as the products.
template <int N>
inline void HalfDots(const uint8_t* u, const int8_t* x, int32_t* lo, int32_t* hi) {
  if constexpr (N == 1) {
    const __m256i p = BlockProducts(u, x);
    auto hsum = [](__m128i v) {
      v = _mm_hadd_epi32(v, v);
      v = _mm_hadd_epi32(v, v);
      return _mm_cvtsi128_si32(v);
    };
    *lo = hsum(_mm256_castsi256_si128(p));       // elements 0-15
    *hi = hsum(_mm256_extracti128_si256(p, 1));  // elements 16-31
  } else {
    static_assert(N % 4 == 0);
    for (int b = 0; b < N; b += 4) {
      const __m256i p0 = BlockProducts(u + 32 * b, x + 32 * b), p1 = BlockProducts(u + 32 * b + 32, x + 32 * b + 32);
      const __m256i p2 = BlockProducts(u + 32 * b + 64, x + 32 * b + 64);
      const __m256i p3 = BlockProducts(u + 32 * b + 96, x + 32 * b + 96);
      // Per 128-bit lane: the lane sums of blocks b..b+3 (lane 0 the low halves).
      const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + b), _mm256_castsi256_si128(s));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(hi + b), _mm256_extracti128_si256(s, 1));
    }
  }
}

// NT tokens (t0..) against one row whose groups are decoded in q. The format
// is a compile-time constant, so the branches below are resolved and the
// accumulators stay in registers. A token's operations do not depend on NT.
template <DType T, int NT>
void GroupRowDot(const QuantGroup* q, const QuantizedRows& xq, int64_t t0, float* out) {
  constexpr QuantGroupFormat f = GroupFormatOf(T);
  constexpr int blocks = f.group / kQuantBlock;
  constexpr bool single = blocks == 1;  // Q5_0/Q5_1: no per-group accumulators
  const int64_t cols = xq.cols, nb = cols / kQuantBlock;
  for (int i = 0; i < NT; ++i) out[i] = 0.0f;
  for (int64_t g = 0; g < cols / f.group; ++g, ++q) {
    float acc[NT] = {}, macc[NT] = {};
    // Each token's operations in block order, as before the tokens became the
    // outer loop (a token's accumulators are its own).
    for (int i = 0; i < NT; ++i) {
      int32_t los[blocks], his[blocks];
      HalfDots<blocks>(q->u, xq.q.data() + (t0 + i) * cols + g * f.group, los, his);
      for (int b = 0; b < blocks; ++b) {
        const int64_t cb = g * blocks + b;
        const int64_t xi = (t0 + i) * nb + cb;
        const int32_t lo = los[b], hi = his[b];
        const int32_t* is = xq.isum16.data() + 2 * xi;
        const float xd = xq.d[xi];
        if constexpr (f.sc16) {
          acc[i] = std::fma(static_cast<float>(lo - f.zero * is[0]), q->sc[2 * b] * xd, acc[i]);
          acc[i] = std::fma(static_cast<float>(hi - f.zero * is[1]), q->sc[2 * b + 1] * xd, acc[i]);
        } else {
          const float p = static_cast<float>(lo + hi - f.zero * (is[0] + is[1]));
          if constexpr (single) {
            out[i] = std::fma(p, q->d * xd, out[i]);
          } else {
            acc[i] = std::fma(p, q->sc[2 * b] * xd, acc[i]);
          }
        }
        if constexpr (f.mins == 2) {  // Q5_1: mn = 1
          out[i] = std::fma(-q->dmin, xq.sum[xi], out[i]);
        } else if constexpr (f.mins == 1 && !f.mn16) {
          macc[i] = std::fma(static_cast<float>(q->mn[2 * b]), xq.sum[xi], macc[i]);
        } else if constexpr (f.mins == 1) {
          macc[i] = std::fma(static_cast<float>(q->mn[2 * b]), static_cast<float>(is[0]) * xd, macc[i]);
          macc[i] = std::fma(static_cast<float>(q->mn[2 * b + 1]), static_cast<float>(is[1]) * xd, macc[i]);
        }
      }
    }
    if constexpr (!single) {
      for (int i = 0; i < NT; ++i) {
        out[i] = std::fma(acc[i], q->d, out[i]);
        if constexpr (f.mins == 1) out[i] = std::fma(-macc[i], q->dmin, out[i]);
      }
    }
  }
}

// Rows of type T: each row's groups are decoded once, into a per-thread
// buffer, and every token tile reads them (they were decoded again for each
// tile of four tokens before, 2026-12-06).
template <DType T>
void GroupRows(const MatrixView& w, const QuantizedRows& xq, int64_t n_tokens, int64_t row_begin, int64_t row_end,
               float* y, int64_t y_stride) {
  constexpr int64_t group = GroupFormatOf(T).group;
  const size_t row_bytes = DTypeRowBytes(T, w.cols);
  thread_local std::vector<QuantGroup> decoded;
  decoded.resize(static_cast<size_t>(w.cols / group));
  float out[kTokTile];
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + row_bytes * r;
    // The rows are contiguous: asking for the bytes kPrefetchAhead past this
    // row's asks for every line once, ahead of its decode.
    for (size_t off = 0; off < row_bytes; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(row + kPrefetchAhead + off), _MM_HINT_T0);
    }
    for (int64_t g = 0; g < w.cols / group; ++g) DecodeGroup(T, row, g, &decoded[g]);
    token_tiles::ForEach<kTokTile>(0, n_tokens, [&]<int NT>(int64_t t) {
      GroupRowDot<T, NT>(decoded.data(), xq, t, out);
      for (int i = 0; i < NT; ++i) y[(t + i) * y_stride + (r - row_begin)] = out[i];
    });
  }
}

// ---- Packed 16-row kernel (AVX-512 VNNI): packed_group.h's layout. ----

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)

// acc += the 16 rows' u8 weights w . the 4 s8 activations at x, broadcast to
// every lane. The broadcast is the instruction's own memory operand
// ({1to16}): GCC 12 does not fold _mm512_set1_epi32 into vpdpbusd and
// issues a vpbroadcastd before each one, and at batch 16-64, where the
// kernel is bound by instructions rather than bytes, those were as many
// instructions as the dot products (issue 34: perf annotate of the 1.5B
// model's Q4_K matrices at batch 64).
inline __m512i DpbusdBcast(__m512i acc, __m512i w, const int8_t* x) {
  // GCC and Clang both take this (AT&T operand order: source, then the
  // accumulator last).
  using Word = int32_t __attribute__((may_alias));  // the operand names x's own bytes
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const Word*>(x)));
  return acc;
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
// Accumulates NT tokens (t0..t0+NT-1) against every super-block of one
// group; out[i] holds the 16 row results of token t0 + i. Per token and
// block the integers P and M of matmul_group.h, then (super-blocks of one
// block, Q5_0/Q5_1) out += P * (d xd) - M * (dmin xd), or (K-quants)
// acc += P xd, macc += M xd per block and out += d acc - dmin macc per
// super-block: GroupRowDot does the same float operations.
template <DType T, int NT>
void GroupTile(const uint8_t* grp, int64_t n_sb, const QuantizedRows& xq, int64_t t0, __m512 out[NT]) {
  constexpr QuantGroupFormat F = GroupFormatOf(T);
  constexpr PackedGroupLayout L = MakePackedGroupLayout(F);
  constexpr bool kSingle = L.blocks == 1;
  const int64_t cols = xq.cols, nb = cols / kQuantBlock;
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  for (int i = 0; i < NT; ++i) out[i] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const uint8_t* base = grp + sb * L.sb_bytes;
    const __m512 d = _mm512_loadu_ps(reinterpret_cast<const float*>(base + L.d_off()));
    __m512 dmin = _mm512_setzero_ps();
    if constexpr (L.dmin) dmin = _mm512_loadu_ps(reinterpret_cast<const float*>(base + L.dmin_off()));
    __m512 acc[NT], macc[NT];
    for (int i = 0; i < NT; ++i) acc[i] = macc[i] = _mm512_setzero_ps();
    for (int b = 0; b < L.blocks; ++b) {
      const uint8_t* blk = base + b * L.block_bytes;
      const int64_t cb = sb * L.blocks + b;
      for (size_t off = 0; off < L.block_bytes; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchAhead + off), _MM_HINT_T0);
      }
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
      // Sub-block scales and mins as floats (small integers: exact).
      __m512 s0f = _mm512_setzero_ps(), s1f = s0f, m0f = s0f, m1f = s0f;
      if constexpr (L.n_sc >= 1) s0f = ToFloat(LoadScales(blk + L.sc_off()));
      if constexpr (L.n_sc == 2) s1f = ToFloat(LoadScales(blk + L.sc_off() + 16));
      if constexpr (L.n_mn >= 1) m0f = ToFloat(LoadScales(blk + L.mn_off()));
      if constexpr (L.n_mn == 2) m1f = ToFloat(LoadScales(blk + L.mn_off() + 16));
      for (int i = 0; i < NT; ++i) {
        const int64_t t = t0 + i, xi = t * nb + cb;
        const int8_t* x = xq.q.data() + t * cols + cb * kQuantBlock;
        const int32_t* is = xq.isum16.data() + 2 * xi;
        // w[k] holds elements E(k)..E(k)+3: k < 4 the low half of the block.
        const __m512 xd = _mm512_set1_ps(xq.d[xi]);
        if constexpr (L.n_sc == 2) {  // a scale per half: keep the halves apart
          // One chain per half: the NT tokens of the tile are independent
          // chains already, and fewer live registers avoid spills at NT = 8.
          __m512i lo = DpbusdBcast(_mm512_setzero_si512(), w[0], x);
          __m512i hi = DpbusdBcast(_mm512_setzero_si512(), w[4], x + 16);
          for (int k = 1; k < 4; ++k) {
            lo = DpbusdBcast(lo, w[k], x + 4 * k);
            hi = DpbusdBcast(hi, w[k + 4], x + 16 + 4 * k);
          }
          if constexpr (F.zero != 0) {
            lo = _mm512_sub_epi32(lo, _mm512_set1_epi32(F.zero * is[0]));
            hi = _mm512_sub_epi32(hi, _mm512_set1_epi32(F.zero * is[1]));
          }
          acc[i] = _mm512_fmadd_ps(ToFloat(lo), _mm512_mul_ps(s0f, xd), acc[i]);
          acc[i] = _mm512_fmadd_ps(ToFloat(hi), _mm512_mul_ps(s1f, xd), acc[i]);
        } else {  // one scale per block: one chain over the whole block
          // (the tile's NT tokens are the independent chains the core overlaps)
          // The chain starts at -zero * isum: the zero point costs no extra op.
          __m512i p = _mm512_set1_epi32(-F.zero * (is[0] + is[1]));
          for (int k = 0; k < 4; ++k) p = DpbusdBcast(p, w[k], x + 4 * k);
          for (int k = 4; k < 8; ++k) p = DpbusdBcast(p, w[k], x + 16 + 4 * (k - 4));
          if constexpr (kSingle) {
            out[i] = _mm512_fmadd_ps(ToFloat(p), _mm512_mul_ps(d, xd), out[i]);
          } else {
            acc[i] = _mm512_fmadd_ps(ToFloat(p), _mm512_mul_ps(s0f, xd), acc[i]);
          }
        }
        if constexpr (L.dmin && L.n_mn == 0) {  // Q5_1: mn = 1
          out[i] = _mm512_fnmadd_ps(dmin, _mm512_set1_ps(xq.sum[xi]), out[i]);
        } else if constexpr (L.n_mn == 1) {
          // xq.sum = xd * (isum_lo + isum_hi), the activation sum of the block.
          macc[i] = _mm512_fmadd_ps(m0f, _mm512_set1_ps(xq.sum[xi]), macc[i]);
        } else if constexpr (L.n_mn == 2) {
          macc[i] = _mm512_fmadd_ps(m0f, _mm512_set1_ps(static_cast<float>(is[0]) * xq.d[xi]), macc[i]);
          macc[i] = _mm512_fmadd_ps(m1f, _mm512_set1_ps(static_cast<float>(is[1]) * xq.d[xi]), macc[i]);
        }
      }
    }
    if constexpr (!kSingle) {
      for (int i = 0; i < NT; ++i) out[i] = _mm512_fmadd_ps(acc[i], d, out[i]);
      if constexpr (L.n_mn != 0) {
        for (int i = 0; i < NT; ++i) out[i] = _mm512_fnmadd_ps(macc[i], dmin, out[i]);
      }
    }
  }
}

template <DType T>
void Groups(const PackedMatrix& w, const QuantizedRows& xq, int64_t n_tokens, int64_t g_begin, int64_t g_end, float* y,
            int64_t y_stride) {
  const int64_t n_sb = w.cols() / GroupFormatOf(T).group;
  __m512 out[kSingleTile];
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t r0 = g * kPackRows;
    const int valid = static_cast<int>(std::min<int64_t>(kPackRows, w.rows() - r0));
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    auto store = [&](int64_t t, __m512 v) { _mm512_mask_storeu_ps(y + t * y_stride + r0, mask, v); };
    int64_t t = 0;
    if constexpr (GroupFormatOf(T).group == kQuantBlock) {
      for (; t + kSingleTile <= n_tokens; t += kSingleTile) {
        GroupTile<T, kSingleTile>(w.group(g), n_sb, xq, t, out);
        for (int i = 0; i < kSingleTile; ++i) store(t + i, out[i]);
      }
    }
    token_tiles::ForEach<kWideTile>(t, n_tokens, [&]<int NT>(int64_t t0) {
      GroupTile<T, NT>(w.group(g), n_sb, xq, t0, out);
      for (int i = 0; i < NT; ++i) store(t0 + i, out[i]);
    });
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
  switch (w.dtype) {
    case DType::kQ2_K: return GroupRows<DType::kQ2_K>(w, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kQ3_K: return GroupRows<DType::kQ3_K>(w, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kQ4_K: return GroupRows<DType::kQ4_K>(w, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kQ5_K: return GroupRows<DType::kQ5_K>(w, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kQ6_K: return GroupRows<DType::kQ6_K>(w, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kQ5_0: return GroupRows<DType::kQ5_0>(w, xq, n_tokens, row_begin, row_end, y, y_stride);
    case DType::kQ5_1: return GroupRows<DType::kQ5_1>(w, xq, n_tokens, row_begin, row_end, y, y_stride);
    default: return;
  }
}

}  // namespace beacon
