#include "kernels/cpu/dtype.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/kquant_blocks.h"

namespace beacon {

bool IsSupportedDType(uint32_t t) {
  switch (t) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 6:
    case 7:
    case 8:
    case 10:
    case 11:
    case 12:
    case 13:
    case 14:
    case 30: return true;
    default: return false;
  }
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kQ8_0: return "Q8_0";
    case DType::kQ4_0: return "Q4_0";
    case DType::kQ4_1: return "Q4_1";
    case DType::kQ5_0: return "Q5_0";
    case DType::kQ5_1: return "Q5_1";
    case DType::kQ2_K: return "Q2_K";
    case DType::kQ3_K: return "Q3_K";
    case DType::kQ4_K: return "Q4_K";
    case DType::kQ5_K: return "Q5_K";
    case DType::kQ6_K: return "Q6_K";
  }
  return "?";
}

int DTypeBlockElems(DType t) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1: return kQuantBlock;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: return kQK;
    default: return 1;
  }
}

size_t DTypeBlockBytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kQ8_0: return sizeof(BlockQ8_0);
    case DType::kQ4_0: return sizeof(BlockQ4_0);
    case DType::kQ4_1: return sizeof(BlockQ4_1);
    case DType::kQ5_0: return sizeof(BlockQ5_0);
    case DType::kQ5_1: return sizeof(BlockQ5_1);
    case DType::kQ2_K: return sizeof(BlockQ2_K);
    case DType::kQ3_K: return sizeof(BlockQ3_K);
    case DType::kQ4_K: return sizeof(BlockQ4_K);
    case DType::kQ5_K: return sizeof(BlockQ5_K);
    case DType::kQ6_K: return sizeof(BlockQ6_K);
  }
  return 0;
}

size_t DTypeRowBytes(DType t, int64_t n) { return static_cast<size_t>(n / DTypeBlockElems(t)) * DTypeBlockBytes(t); }

float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t Fp32ToFp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) return sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0);  // inf/nan
  if (abs >= 0x477ff000) return sign | 0x7c00;                                   // rounds to >= 65520: overflow
  if (abs < 0x38800000) {                                                        // subnormal half (or zero)
    float a;
    std::memcpy(&a, &abs, 4);
    // a * 2^24 rounded to nearest even gives the subnormal mantissa.
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t rounded = abs + 0xfff + ((abs >> 13) & 1);  // round to nearest even
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

uint16_t Fp32ToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

void Fp32ToBf16Row(const float* src, int64_t n, uint16_t* dst) {
  int64_t i = 0;
#if defined(__AVX512F__)
  // Fp32ToBf16's integer steps, 16 lanes at a time (bit-identical to it;
  // vcvtneps2bf16 would flush subnormals, which the scalar code rounds).
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_loadu_si512(src + i);
    const __m512i r = _mm512_add_epi32(x, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(x, 16), one)));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, abs_mask), inf);
    const __m512i out =
        _mm512_mask_or_epi32(_mm512_srli_epi32(r, 16), nan, _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(out));
  }
#endif
  for (; i < n; ++i) dst[i] = Fp32ToBf16(src[i]);
}

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(s[i]);
      return;
    }
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(s[i]);
      return;
    }
    case DType::kQ8_0: {
      const auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        for (int j = 0; j < 32; ++j) dst[i * 32 + j] = d * b[i].qs[j];
      }
      return;
    }
    case DType::kQ4_0: {
      const auto* b = static_cast<const BlockQ4_0*>(src);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        for (int j = 0; j < 16; ++j) {
          dst[i * 32 + j] = d * ((b[i].qs[j] & 0x0f) - 8);
          dst[i * 32 + j + 16] = d * ((b[i].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case DType::kQ4_1: {
      const auto* b = static_cast<const BlockQ4_1*>(src);
      for (int64_t i = 0; i < n / kQuantBlock; ++i) {
        const float d = Fp16ToFp32(b[i].d);
        const float m = Fp16ToFp32(b[i].m);
        for (int j = 0; j < 16; ++j) {
          dst[i * 32 + j] = d * (b[i].qs[j] & 0x0f) + m;
          dst[i * 32 + j + 16] = d * (b[i].qs[j] >> 4) + m;
        }
      }
      return;
    }
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: DequantizeGroupRow(t, src, dst, n); return;
  }
}

}  // namespace beacon
