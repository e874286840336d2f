#include "kernels/cpu/kquant_unpack.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/kquant_blocks.h"

namespace beacon {

#if defined(__AVX2__)
namespace {

// Element e = 32 c + i of a 256-element group is byte i of a 32-byte run in
// every K-quant layout; a field is that byte shifted right and masked (the
// 16-bit shift brings in bits of the neighbouring byte only above the mask).
inline __m256i Field(const uint8_t* run, int shift, int mask) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(run));
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(static_cast<char>(mask)));
}

inline void Store(uint8_t* u, int c, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + 32 * c), v); }

// Byte j of the result is 0xFF where bit j of the 32 bits at p is set.
inline __m256i BitsToBytes(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  // Byte j takes byte j / 8 of the word (each 128-bit lane holds all four).
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
}

template <typename B>
const B& BlockAt(const void* row, int64_t g) {
  return static_cast<const B*>(row)[g];
}

// Q5_0 and Q5_1: 16 bytes of nibbles (element j < 16 the low nibble of byte
// j, element j + 16 its high nibble) and the fifth bits as one 32-bit word.
template <typename B>
void Unpack5(const B& b, uint8_t* u) {
  const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m256i low = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), nibble), _mm_and_si128(qs, nibble));
  Store(u, 0, _mm256_or_si256(low, _mm256_and_si256(BitsToBytes(b.qh), _mm256_set1_epi8(16))));
}

}  // namespace

bool UnpackGroupU(DType t, const void* row, int64_t g, uint8_t* u) {
  switch (t) {
    case DType::kQ2_K: {
      const auto& b = BlockAt<BlockQ2_K>(row, g);
      for (int c = 0; c < 8; ++c) Store(u, c, Field(b.qs + 32 * (c / 4), 2 * (c % 4), 3));
      return true;
    }
    case DType::kQ3_K: {  // u = low + 4 * hbit (q + 4)
      const auto& b = BlockAt<BlockQ3_K>(row, g);
      for (int c = 0; c < 8; ++c) {
        const __m256i high = _mm256_slli_epi16(Field(b.hmask, c, 1), 2);
        Store(u, c, _mm256_or_si256(Field(b.qs + 32 * (c / 4), 2 * (c % 4), 3), high));
      }
      return true;
    }
    case DType::kQ4_K: {
      const auto& b = BlockAt<BlockQ4_K>(row, g);
      for (int c = 0; c < 8; ++c) Store(u, c, Field(b.qs + 32 * (c / 2), 4 * (c % 2), 0xF));
      return true;
    }
    case DType::kQ5_K: {
      const auto& b = BlockAt<BlockQ5_K>(row, g);
      for (int c = 0; c < 8; ++c) {
        const __m256i high = _mm256_slli_epi16(Field(b.qh, c, 1), 4);
        Store(u, c, _mm256_or_si256(Field(b.qs + 32 * (c / 2), 4 * (c % 2), 0xF), high));
      }
      return true;
    }
    case DType::kQ6_K: {  // run c: half h = c / 4 of 128 elements, r = 32 (c % 4) + i within it
      const auto& b = BlockAt<BlockQ6_K>(row, g);
      for (int c = 0; c < 8; ++c) {
        const int h = c / 4;
        const __m256i low = Field(b.ql + 64 * h + 32 * (c % 2), 4 * ((c % 4) / 2), 0xF);
        const __m256i high = _mm256_slli_epi16(Field(b.qh + 32 * h, 2 * (c % 4), 3), 4);
        Store(u, c, _mm256_or_si256(low, high));
      }
      return true;
    }
    case DType::kQ5_0: Unpack5(BlockAt<BlockQ5_0>(row, g), u); return true;
    case DType::kQ5_1: Unpack5(BlockAt<BlockQ5_1>(row, g), u); return true;
    default: return false;
  }
}

#else  // no AVX2: the caller's element-by-element decode

bool UnpackGroupU(DType, const void*, int64_t, uint8_t*) { return false; }

#endif

}  // namespace beacon
