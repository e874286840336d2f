// The per-row kernel of the group-format types (K-quants, Q5_0, Q5_1): the
// GGUF layout as it is in the file, for machines without AVX-512 VNNI (the
// packed 16-row kernel, matmul_group.cc, needs it). matmul_group.h has the
// arithmetic; both kernels evaluate it in the same order, so on a machine
// that has both they agree bit for bit (tests/kernels/cpu/matmul_test.cc).
//
// Shape of the work, per row: decode its groups once (kquant_unpack.h), then
// take the tokens four at a time, one token per 128-bit lane. The integer
// dot products of a token are AVX2 multiply-adds; the float part (scales,
// mins, accumulation) runs on the four tokens' lanes at once, each lane the
// same operations in the same order as one token alone, so a token's result
// does not depend on its batch. A lone token (batch 1, or the last of a
// batch of 4k + 1) takes the same operations in scalar registers. Until 2026-12-06 the float part ran token by
// token and the decode ran element by element for every tile: the 1.5B
// model decoded 0.8 tokens a second on an AVX2-only machine
// (docs/performance.md, "Without AVX-512").
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/kquant_blocks.h"
#include "kernels/cpu/matmul_group.h"

namespace beacon {
namespace {

constexpr int kLanes = 4;  // tokens per tile: one per 128-bit lane
// Software prefetch distance in bytes (the packed kernel's reason: the
// hardware prefetchers restart at each 4 KiB page); rows are contiguous, so
// asking for the bytes this far past each row asks for every line once.
constexpr size_t kPrefetchAhead = 2048;

// The products of one 32-element block: lane k sums elements 4k..4k+3, so
// lanes 0-3 hold the low half and lanes 4-7 the high half.
inline __m256i BlockProducts(const uint8_t* u, const int8_t* x) {
  const __m256i uv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u));
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  // u <= 63 and |x| <= 127: a pair sum is at most 16002, no saturation.
  return _mm256_madd_epi16(_mm256_maddubs_epi16(uv, xv), _mm256_set1_epi16(1));
}

// lo[j], hi[j]: the half sums of N consecutive blocks (N = 1 or a multiple
// of 4). Integer sums are exact in any order; reducing four blocks in one
// tree of horizontal adds takes a quarter of the instructions of one block
// at a time.
template <int N>
inline void HalfDots(const uint8_t* u, const int8_t* x, int32_t* lo, int32_t* hi) {
  if constexpr (N == 1) {
    const __m256i p = BlockProducts(u, x);
    const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(p, p), p);  // lane 0 of each half: its sum
    *lo = _mm256_cvtsi256_si32(s);
    *hi = _mm_cvtsi128_si32(_mm256_extracti128_si256(s, 1));
  } else {
    static_assert(N % 4 == 0);
    for (int b = 0; b < N; b += 4) {
      const __m256i p0 = BlockProducts(u + 32 * b, x + 32 * b), p1 = BlockProducts(u + 32 * b + 32, x + 32 * b + 32);
      const __m256i p2 = BlockProducts(u + 32 * b + 64, x + 32 * b + 64);
      const __m256i p3 = BlockProducts(u + 32 * b + 96, x + 32 * b + 96);
      // Per 128-bit half: the sums of blocks b..b+3 (the low half: elements 0-15).
      const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + b), _mm256_castsi256_si128(s));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(hi + b), _mm256_extracti128_si256(s, 1));
    }
  }
}

// The activations' per-block fields, four tokens to a vector: [tile][block][lane].
// Lanes past the batch repeat its last token (computed, never stored).
struct TokenLanes {
  std::vector<float> xd, sum;
  std::vector<int32_t> is0, is1;

  void Build(const QuantizedRows& xq, int64_t n_tokens) {
    const int64_t nb = xq.cols / kQuantBlock, tiles = (n_tokens + kLanes - 1) / kLanes;
    const size_t n = static_cast<size_t>(tiles * nb * kLanes);
    xd.resize(n), sum.resize(n), is0.resize(n), is1.resize(n);
    for (int64_t tile = 0; tile < tiles; ++tile) {
      for (int lane = 0; lane < kLanes; ++lane) {
        const int64_t t = std::min(tile * kLanes + lane, n_tokens - 1);
        for (int64_t cb = 0; cb < nb; ++cb) {
          const size_t o = static_cast<size_t>((tile * nb + cb) * kLanes + lane);
          const int64_t xi = t * nb + cb;
          xd[o] = xq.d[xi], sum[o] = xq.sum[xi];
          is0[o] = xq.isum16[2 * xi], is1[o] = xq.isum16[2 * xi + 1];
        }
      }
    }
  }
};

inline __m128 Splat(float v) { return _mm_set1_ps(v); }

// The four tokens of `tile` against one row whose groups are decoded in q.
// Lane by lane the operations of matmul_group.h in its order (std::fma is
// _mm_fmadd_ps, fma(-a, b, c) is _mm_fnmadd_ps, int -> float rounds alike).
template <DType T>
__m128 RowTile(const QuantGroup* q, const QuantizedRows& xq, const TokenLanes& lanes, int64_t tile, int64_t n_tokens) {
  constexpr QuantGroupFormat f = GroupFormatOf(T);
  constexpr int blocks = f.group / kQuantBlock;
  constexpr bool single = blocks == 1;  // Q5_0/Q5_1: no per-group accumulators
  const int64_t cols = xq.cols, nb = cols / kQuantBlock;
  // Tokens of the batch in this tile; the integer sums of the lanes past it are not computed.
  const int valid = static_cast<int>(std::min<int64_t>(kLanes, n_tokens - tile * kLanes));
  const int8_t* x[kLanes];
  for (int lane = 0; lane < kLanes; ++lane) {
    x[lane] = xq.q.data() + std::min(tile * kLanes + lane, n_tokens - 1) * cols;
  }
  const size_t base = static_cast<size_t>(tile * nb * kLanes);
  // u - zero, summed: the zero point's share of the integer sums (none for most types).
  auto less_zero = [&](__m128i sums, __m128i isum) {
    if constexpr (f.zero != 0) return _mm_sub_epi32(sums, _mm_mullo_epi32(_mm_set1_epi32(f.zero), isum));
    return sums;
  };
  __m128 out = _mm_setzero_ps();
  for (int64_t g = 0; g < cols / f.group; ++g, ++q) {
    // Integer half sums, token by token, then transposed to a block's lanes.
    alignas(16) int32_t lo[kLanes][blocks], hi[kLanes][blocks];
    for (int lane = 0; lane < valid; ++lane) HalfDots<blocks>(q->u, x[lane] + g * f.group, lo[lane], hi[lane]);
    for (int lane = valid; lane < kLanes; ++lane) {  // past the batch: lane 0's sums
      std::copy_n(lo[0], blocks, lo[lane]);
      std::copy_n(hi[0], blocks, hi[lane]);
    }
    __m128 acc = _mm_setzero_ps(), macc = _mm_setzero_ps();
    for (int b = 0; b < blocks; ++b) {
      const size_t o = base + static_cast<size_t>((g * blocks + b) * kLanes);
      const __m128 xd = _mm_loadu_ps(lanes.xd.data() + o);
      const __m128i is0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lanes.is0.data() + o));
      const __m128i is1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lanes.is1.data() + o));
      const __m128i vlo = _mm_setr_epi32(lo[0][b], lo[1][b], lo[2][b], lo[3][b]);
      const __m128i vhi = _mm_setr_epi32(hi[0][b], hi[1][b], hi[2][b], hi[3][b]);
      if constexpr (f.sc16) {
        const __m128 plo = _mm_cvtepi32_ps(less_zero(vlo, is0));
        const __m128 phi = _mm_cvtepi32_ps(less_zero(vhi, is1));
        acc = _mm_fmadd_ps(plo, _mm_mul_ps(Splat(q->sc[2 * b]), xd), acc);
        acc = _mm_fmadd_ps(phi, _mm_mul_ps(Splat(q->sc[2 * b + 1]), xd), acc);
      } else {
        const __m128 p = _mm_cvtepi32_ps(less_zero(_mm_add_epi32(vlo, vhi), _mm_add_epi32(is0, is1)));
        if constexpr (single) {
          out = _mm_fmadd_ps(p, _mm_mul_ps(Splat(q->d), xd), out);
        } else {
          acc = _mm_fmadd_ps(p, _mm_mul_ps(Splat(q->sc[2 * b]), xd), acc);
        }
      }
      if constexpr (f.mins == 2) {  // Q5_1: mn = 1
        out = _mm_fnmadd_ps(Splat(q->dmin), _mm_loadu_ps(lanes.sum.data() + o), out);
      } else if constexpr (f.mins == 1 && !f.mn16) {
        macc = _mm_fmadd_ps(Splat(q->mn[2 * b]), _mm_loadu_ps(lanes.sum.data() + o), macc);
      } else if constexpr (f.mins == 1) {
        macc = _mm_fmadd_ps(Splat(q->mn[2 * b]), _mm_mul_ps(_mm_cvtepi32_ps(is0), xd), macc);
        macc = _mm_fmadd_ps(Splat(q->mn[2 * b + 1]), _mm_mul_ps(_mm_cvtepi32_ps(is1), xd), macc);
      }
    }
    if constexpr (!single) {
      out = _mm_fmadd_ps(acc, Splat(q->d), out);
      if constexpr (f.mins == 1) out = _mm_fnmadd_ps(macc, Splat(q->dmin), out);
    }
  }
  return out;
}

// One token against one row: RowTile's operations on a single lane, in
// scalar registers. A tile of one token (decode at batch 1) spent more on
// gathering its sums into lanes than the lanes saved (1.5B model: 7.6 against
// 5.8 tokens a second); the batch-invariance test checks that both give the
// same bits (tests/kernels/cpu/matmul_test.cc).
template <DType T>
float RowToken(const QuantGroup* q, const QuantizedRows& xq, int64_t t) {
  constexpr QuantGroupFormat f = GroupFormatOf(T);
  constexpr int blocks = f.group / kQuantBlock;
  constexpr bool single = blocks == 1;
  const int64_t cols = xq.cols, nb = cols / kQuantBlock;
  float out = 0.0f;
  for (int64_t g = 0; g < cols / f.group; ++g, ++q) {
    int32_t lo[blocks], hi[blocks];
    HalfDots<blocks>(q->u, xq.q.data() + t * cols + g * f.group, lo, hi);
    float acc = 0.0f, macc = 0.0f;
    for (int b = 0; b < blocks; ++b) {
      const int64_t xi = t * nb + g * blocks + b;
      const int32_t* is = xq.isum16.data() + 2 * xi;
      const float xd = xq.d[xi];
      if constexpr (f.sc16) {
        acc = std::fma(static_cast<float>(lo[b] - f.zero * is[0]), q->sc[2 * b] * xd, acc);
        acc = std::fma(static_cast<float>(hi[b] - f.zero * is[1]), q->sc[2 * b + 1] * xd, acc);
      } else {
        const float p = static_cast<float>(lo[b] + hi[b] - f.zero * (is[0] + is[1]));
        if constexpr (single) {
          out = std::fma(p, q->d * xd, out);
        } else {
          acc = std::fma(p, q->sc[2 * b] * xd, acc);
        }
      }
      if constexpr (f.mins == 2) {  // Q5_1: mn = 1
        out = std::fma(-q->dmin, xq.sum[xi], out);
      } else if constexpr (f.mins == 1 && !f.mn16) {
        macc = std::fma(static_cast<float>(q->mn[2 * b]), xq.sum[xi], macc);
      } else if constexpr (f.mins == 1) {
        macc = std::fma(static_cast<float>(q->mn[2 * b]), static_cast<float>(is[0]) * xd, macc);
        macc = std::fma(static_cast<float>(q->mn[2 * b + 1]), static_cast<float>(is[1]) * xd, macc);
      }
    }
    if constexpr (!single) {
      out = std::fma(acc, q->d, out);
      if constexpr (f.mins == 1) out = std::fma(-macc, q->dmin, out);
    }
  }
  return out;
}

template <DType T>
void GroupRows(const MatrixView& w, const QuantizedRows& xq, int64_t n_tokens, int64_t row_begin, int64_t row_end,
               float* y, int64_t y_stride) {
  constexpr int64_t group = GroupFormatOf(T).group;
  const size_t row_bytes = DTypeRowBytes(T, w.cols);
  thread_local std::vector<QuantGroup> decoded;
  thread_local TokenLanes lanes;
  decoded.resize(static_cast<size_t>(w.cols / group));
  if (n_tokens > 1) lanes.Build(xq, n_tokens);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + row_bytes * r;
    for (size_t off = 0; off < row_bytes; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(row + kPrefetchAhead + off), _MM_HINT_T0);
    }
    for (int64_t g = 0; g < w.cols / group; ++g) DecodeGroup(T, row, g, &decoded[g]);
    for (int64_t tile = 0; tile * kLanes < n_tokens; ++tile) {
      if (n_tokens - tile * kLanes == 1) {
        y[(n_tokens - 1) * y_stride + (r - row_begin)] = RowToken<T>(decoded.data(), xq, n_tokens - 1);
        continue;
      }
      alignas(16) float v[kLanes];
      _mm_store_ps(v, RowTile<T>(decoded.data(), xq, lanes, tile, n_tokens));
      const int n = static_cast<int>(std::min<int64_t>(kLanes, n_tokens - tile * kLanes));
      for (int lane = 0; lane < n; ++lane) y[(tile * kLanes + lane) * y_stride + (r - row_begin)] = v[lane];
    }
  }
}

}  // namespace

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
