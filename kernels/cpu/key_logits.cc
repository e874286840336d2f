#include "kernels/cpu/key_logits.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace beacon {

namespace {
constexpr int kMaxD = 512;
// Queries per pass: their accumulators are independent FMA chains, enough
// to cover the FMA latency on two pipes.
constexpr int kQueryTile = 8;
}  // namespace

bool KeyBlockLogitsSupported(DType t, int d) {
#if defined(__AVX512F__)
  return (t == DType::kF32 || t == DType::kBF16) && d > 0 && d % 16 == 0 && d <= kMaxD;
#else
  (void)t, (void)d;
  return false;
#endif
}

#if defined(__AVX512F__)

namespace {

// kt[c][s] = key(s)[c] as f32, zero past `rows`.
void Transpose(DType t, const void* keys, int rows, int d, float* kt) {
  std::memset(kt, 0, sizeof(float) * d * kKeyLogitsMaxRows);
  for (int s = 0; s < rows; ++s) {
    if (t == DType::kF32) {
      const float* k = static_cast<const float*>(keys) + static_cast<size_t>(s) * d;
      for (int c = 0; c < d; ++c) kt[c * kKeyLogitsMaxRows + s] = k[c];
    } else {
      const uint16_t* k = static_cast<const uint16_t*>(keys) + static_cast<size_t>(s) * d;
      for (int c = 0; c < d; ++c) kt[c * kKeyLogitsMaxRows + s] = Bf16ToFp32(k[c]);
    }
  }
}

template <int NQ>
void Tile(const float* kt, int d, const float* q, float* out, int64_t ld, __mmask16 mask) {
  __m512 acc[NQ];
  for (int j = 0; j < NQ; ++j) acc[j] = _mm512_setzero_ps();
  for (int c = 0; c < d; ++c) {
    const __m512 k = _mm512_load_ps(kt + c * kKeyLogitsMaxRows);
    for (int j = 0; j < NQ; ++j) acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(q[j * d + c]), k, acc[j]);
  }
  for (int j = 0; j < NQ; ++j) _mm512_mask_storeu_ps(out + j * ld, mask, acc[j]);
}

}  // namespace

void KeyBlockLogits(DType t, const void* keys, int rows, int d, const float* queries, int64_t n_queries, float* logits,
                    int64_t ld) {
  alignas(64) float kt[kMaxD * kKeyLogitsMaxRows];
  Transpose(t, keys, rows, d, kt);
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  int64_t q = 0;
  for (; q + kQueryTile <= n_queries; q += kQueryTile) {
    Tile<kQueryTile>(kt, d, queries + q * d, logits + q * ld, ld, mask);
  }
  for (; q < n_queries; ++q) Tile<1>(kt, d, queries + q * d, logits + q * ld, ld, mask);
}

#else

void KeyBlockLogits(DType, const void*, int, int, const float*, int64_t, float*, int64_t) {}

#endif

bool KeyBlockLogitsBf16Supported(int d) {
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
  return d > 0 && d % 32 == 0 && d <= kMaxD;
#else
  (void)d;
  return false;
#endif
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__)

namespace {

// kt[p][s] = key s's elements 2p and 2p + 1 as one 32-bit pair (the low
// half the even element, as they lie in memory), zero past `rows`.
void TransposePairs(const uint16_t* keys, int rows, int d, uint32_t* kt) {
  std::memset(kt, 0, sizeof(uint32_t) * (d / 2) * kKeyLogitsMaxRows);
  for (int s = 0; s < rows; ++s) {
    const uint16_t* k = keys + static_cast<size_t>(s) * d;
    for (int p = 0; p < d / 2; ++p) std::memcpy(kt + p * kKeyLogitsMaxRows + s, k + 2 * p, sizeof(uint32_t));
  }
}

// acc += for each lane, the key pair times the query pair at q (broadcast).
inline __m512 DotPair(__m512 acc, __m512i k, const uint16_t* q) {
  uint32_t pair;
  std::memcpy(&pair, q, sizeof(pair));
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(k), (__m512bh)_mm512_set1_epi32(static_cast<int>(pair)));
}

template <int NQ>
void TileBf16(const uint32_t* kt, int d, const uint16_t* q, float* out, int64_t ld, __mmask16 mask) {
  __m512 acc[NQ];
  for (int j = 0; j < NQ; ++j) acc[j] = _mm512_setzero_ps();
  for (int p = 0; p < d / 2; ++p) {
    const __m512i k = _mm512_load_si512(kt + p * kKeyLogitsMaxRows);
    for (int j = 0; j < NQ; ++j) acc[j] = DotPair(acc[j], k, q + j * d + 2 * p);
  }
  for (int j = 0; j < NQ; ++j) _mm512_mask_storeu_ps(out + j * ld, mask, acc[j]);
}

}  // namespace

void KeyBlockLogitsBf16(const uint16_t* keys, int rows, int d, const uint16_t* queries, int64_t n_queries,
                        float* logits, int64_t ld) {
  alignas(64) uint32_t kt[kMaxD / 2 * kKeyLogitsMaxRows];
  TransposePairs(keys, rows, d, kt);
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  int64_t q = 0;
  for (; q + kQueryTile <= n_queries; q += kQueryTile) {
    TileBf16<kQueryTile>(kt, d, queries + q * d, logits + q * ld, ld, mask);
  }
  for (; q < n_queries; ++q) TileBf16<1>(kt, d, queries + q * d, logits + q * ld, ld, mask);
}

#else

void KeyBlockLogitsBf16(const uint16_t*, int, int, const uint16_t*, int64_t, float*, int64_t) {}

#endif

}  // namespace beacon
