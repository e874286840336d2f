// Float -> group-format types (Q5_0, Q5_1, Q2_K..Q6_K) for QuantizeRow:
// dummy models at real shapes in a K-quant type, kernel tests. A plain
// min/max scheme, not llama.cpp's error-minimising search: the point is the
// layout and a bounded error, not the last fraction of quality.
//
// Per sub-block (16 or 32 elements) the range is covered first (scales and
// minimum offsets rounded *up*, super-block d/dmin rounded up to fp16), then
// each element rounds to the nearest level; elements are within one level
// step (+ one dmin for the offset types) of their input.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/kquant_blocks.h"
#include "kernels/cpu/quantize.h"

namespace beacon {
namespace {

// The smallest fp16 value >= f (f >= 0).
float Fp16Up(float f) {
  uint16_t h = Fp32ToFp16(f);
  if (Fp16ToFp32(h) < f) ++h;  // positive: the next code is the next value up
  return Fp16ToFp32(h);
}

int RoundClamp(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::lround(v)), lo, hi); }

// One group of `f.group` values into the integer form.
void ChooseGroup(DType t, const QuantGroupFormat& f, const float* x, QuantGroup* q) {
  const int qmax = (1 << f.bits) - 1;
  const int sub = f.sc16 || f.mn16 || f.group == 32 ? 16 : 32;  // elements per stored scale
  const int n_sub = f.group / sub;
  std::memset(q, 0, sizeof *q);
  if (t == DType::kQ5_0 || t == DType::kQ5_1) {
    float lo = x[0], hi = x[0], amax = 0.0f;
    for (int e = 0; e < 32; ++e) {
      lo = std::min(lo, x[e]);
      hi = std::max(hi, x[e]);
      amax = std::max(amax, std::fabs(x[e]));
    }
    q->sc[0] = q->sc[1] = 1;
    if (t == DType::kQ5_0) {
      q->d = Fp16Up(amax / 15.0f);  // levels -15..15 (+16): symmetric, inside 0..31
      for (int e = 0; e < 32; ++e)
        q->u[e] = static_cast<uint8_t>(q->d > 0 ? RoundClamp(x[e] / q->d, -16, 15) + 16 : 16);
    } else {
      const float m = -Fp16Up(-std::min(lo, 0.0f));  // at or below the minimum
      q->d = Fp16Up((hi - m) / 31.0f);
      q->dmin = -m;
      q->mn[0] = q->mn[1] = 1;
      for (int e = 0; e < 32; ++e) q->u[e] = static_cast<uint8_t>(q->d > 0 ? RoundClamp((x[e] - m) / q->d, 0, 31) : 0);
    }
    return;
  }
  const bool signed_q = f.zero != 0;  // Q3_K, Q6_K: symmetric levels, no min
  const int sc_max = t == DType::kQ6_K ? 127 : t == DType::kQ2_K ? 15 : t == DType::kQ3_K ? 31 : 63;
  float scale[16] = {}, mneg[16] = {};
  float max_scale = 0.0f, max_mneg = 0.0f;
  for (int s = 0; s < n_sub; ++s) {
    const float* xs = x + s * sub;
    float lo = 0.0f, hi = 0.0f, amax = 0.0f;
    for (int e = 0; e < sub; ++e) {
      lo = std::min(lo, xs[e]);
      hi = std::max(hi, xs[e]);
      amax = std::max(amax, std::fabs(xs[e]));
    }
    scale[s] = signed_q ? amax / static_cast<float>(f.zero - 1) : (hi - lo) / static_cast<float>(qmax);
    mneg[s] = signed_q ? 0.0f : -lo;
    max_scale = std::max(max_scale, scale[s]);
    max_mneg = std::max(max_mneg, mneg[s]);
  }
  q->d = Fp16Up(max_scale / static_cast<float>(sc_max));
  q->dmin = f.mins != 0 ? Fp16Up(max_mneg / static_cast<float>(sc_max)) : 0.0f;
  for (int s = 0; s < n_sub; ++s) {
    const int sc = q->d > 0 ? std::min(sc_max, static_cast<int>(std::ceil(scale[s] / q->d))) : 0;
    const int mn = q->dmin > 0 ? std::min(sc_max, static_cast<int>(std::ceil(mneg[s] / q->dmin))) : 0;
    const float step = q->d * static_cast<float>(sc), offset = q->dmin * static_cast<float>(mn);
    for (int e = 0; e < sub; ++e) {
      const float v = x[s * sub + e];
      int u = f.zero;
      if (step > 0)
        u = signed_q ? RoundClamp(v / step, -f.zero, f.zero - 1) + f.zero : RoundClamp((v + offset) / step, 0, qmax);
      q->u[s * sub + e] = static_cast<uint8_t>(u);
    }
    for (int h = 0; h < sub / 16; ++h) {
      q->sc[s * (sub / 16) + h] = static_cast<int8_t>(sc);
      q->mn[s * (sub / 16) + h] = static_cast<int8_t>(mn);
    }
  }
}

}  // namespace

void QuantizeGroupRow(DType t, const float* src, void* dst, int64_t n) {
  const QuantGroupFormat f = GroupFormatOf(t);
  std::memset(dst, 0, DTypeRowBytes(t, n));
  QuantGroup q;
  for (int64_t g = 0; g < n / f.group; ++g) {
    ChooseGroup(t, f, src + g * f.group, &q);
    EncodeGroup(t, q, dst, g);
  }
}

}  // namespace beacon
