#include "kernels/cpu/matmul_group.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/packed_group.h"
#include "kernels/cpu/token_tiles.h"

namespace beacon {
namespace {

// The packed kernel's wide tile: unpacking a block (nibbles, bit planes,
// scales) is shared by the tokens of a tile. What is left after the full
// tiles (1-7 tokens) is one tile of that size: as smaller tiles and then
// single tokens, each unpacking every block again, batch 3 took 1.6x and
// batch 2 1.2x the time of batch 4 (1.5B model's Q4_K FFN matrix, packed,
// one thread; docs/performance.md "Any batch, not only multiples of four").
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
// super-block: the per-row kernel (matmul_group_rows.cc) does the same float operations.
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

}  // namespace beacon
