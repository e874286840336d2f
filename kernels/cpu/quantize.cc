#include "kernels/cpu/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/kquant_blocks.h"

namespace beacon {
namespace {

// Rounds to the nearest integer, ties away from zero, then clamps to [lo, hi].
inline int RoundClamp(float v, int lo, int hi) {
  const int q = static_cast<int>(std::lround(v));
  return std::clamp(q, lo, hi);
}

// The largest fp16 value <= f: Q4_1 needs its offset m at or below the block
// minimum so that every (x - m) / d is >= 0 and no element falls off the
// bottom of the 4-bit range.
uint16_t Fp16AtOrBelow(float f) {
  uint16_t h = Fp32ToFp16(f);
  if (Fp16ToFp32(h) <= f) return h;
  if ((h & 0x7fff) == 0) return 0x8001;                // +-0 > f: the smallest negative subnormal
  return (h & 0x8000) ? static_cast<uint16_t>(h + 1)   // negative: grow the magnitude
                      : static_cast<uint16_t>(h - 1);  // positive: shrink it
}

void QuantizeQ8_0(const float* x, BlockQ8_0* out, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += kQuantBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    out[b].d = Fp32ToFp16(amax / 127.0f);
    const float d = Fp16ToFp32(out[b].d);
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) {
      out[b].qs[j] = static_cast<int8_t>(RoundClamp(x[j] * id, -127, 127));
    }
  }
}

void QuantizeQ4_0(const float* x, BlockQ4_0* out, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += kQuantBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    out[b].d = Fp32ToFp16(amax / 7.0f);
    const float d = Fp16ToFp32(out[b].d);
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; ++j) {
      const int lo = RoundClamp(x[j] * id, -8, 7) + 8;
      const int hi = RoundClamp(x[j + 16] * id, -8, 7) + 8;
      out[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void QuantizeQ4_1(const float* x, BlockQ4_1* out, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b, x += kQuantBlock) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < kQuantBlock; ++j) {
      lo = std::min(lo, x[j]);
      hi = std::max(hi, x[j]);
    }
    out[b].m = Fp16AtOrBelow(lo);
    const float m = Fp16ToFp32(out[b].m);
    out[b].d = Fp32ToFp16((hi - m) / 15.0f);
    const float d = Fp16ToFp32(out[b].d);
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; ++j) {
      const int q0 = RoundClamp((x[j] - m) * id, 0, 15);
      const int q1 = RoundClamp((x[j + 16] - m) * id, 0, 15);
      out[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

}  // namespace

void QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = Fp32ToFp16(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = Fp32ToBf16(src[i]);
      return;
    }
    case DType::kQ8_0: QuantizeQ8_0(src, static_cast<BlockQ8_0*>(dst), n / kQuantBlock); return;
    case DType::kQ4_0: QuantizeQ4_0(src, static_cast<BlockQ4_0*>(dst), n / kQuantBlock); return;
    case DType::kQ4_1: QuantizeQ4_1(src, static_cast<BlockQ4_1*>(dst), n / kQuantBlock); return;
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: QuantizeGroupRow(t, src, dst, n); return;
  }
}

}  // namespace beacon
