#include "kernels/cpu/kquant_blocks.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/kquant_unpack.h"

namespace beacon {
namespace {

template <typename B>
const B& BlockAt(const void* row, int64_t g) {
  return static_cast<const B*>(row)[g];
}

// Q4_K/Q5_K: the 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
inline void ScaleMinK4(const uint8_t* q, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q3_K: the 6-bit (biased by 32) scale of sub-block s of 16.
inline int ScaleQ3K(const uint8_t* scales, int s) {
  const int low = s < 8 ? scales[s] & 0xF : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low | high << 4;
}

// Unsigned quant value of element e of each type's group.
inline int U2K(const BlockQ2_K& b, int e) { return (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }
inline int U3K(const BlockQ3_K& b, int e) {
  const int low = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
  const int hbit = (b.hmask[e % 32] >> (e / 32)) & 1;
  return low + 4 * hbit;  // q + 4, q = low - (hbit ? 0 : 4)
}
inline int U4K(const uint8_t* qs, int e) { return (qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0xF; }
inline int U5K(const BlockQ5_K& b, int e) { return U4K(b.qs, e) | ((b.qh[e % 32] >> (e / 32)) & 1) << 4; }
inline int U6K(const BlockQ6_K& b, int e) {
  const int h = e / 128, r = e % 128;
  const int low = (b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
  const int high = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
  return low | high << 4;
}
template <typename B>
inline int U5(const B& b, int e) {
  const int low = e < 16 ? b.qs[e] & 0xF : b.qs[e - 16] >> 4;
  return low | ((b.qh[e / 8] >> (e % 8)) & 1) << 4;
}

// d and dmin: the hardware conversion where the build has F16C (every AVX2
// machine; the same value as Fp16ToFp32 for every non-NaN input, and a
// scalar conversion's function call was 4% of a decode step on the per-row
// kernel).
inline float HalfToFloat(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return Fp16ToFp32(h);
#endif
}

// The group's scales, mins and d, dmin; u too unless `unpacked` (UnpackGroupU wrote it).
void DecodeGroupFields(DType t, const void* row, int64_t g, bool unpacked, QuantGroup* out) {
  switch (t) {
    case DType::kQ2_K: {
      const auto& b = BlockAt<BlockQ2_K>(row, g);
      for (int e = 0; e < kQK && !unpacked; ++e) out->u[e] = static_cast<uint8_t>(U2K(b, e));
      for (int s = 0; s < 16; ++s) {
        out->sc[s] = static_cast<int8_t>(b.scales[s] & 0xF);
        out->mn[s] = static_cast<int8_t>(b.scales[s] >> 4);
      }
      out->d = HalfToFloat(b.d);
      out->dmin = HalfToFloat(b.dmin);
      return;
    }
    case DType::kQ3_K: {
      const auto& b = BlockAt<BlockQ3_K>(row, g);
      for (int e = 0; e < kQK && !unpacked; ++e) out->u[e] = static_cast<uint8_t>(U3K(b, e));
      for (int s = 0; s < 16; ++s) {
        out->sc[s] = static_cast<int8_t>(ScaleQ3K(b.scales, s) - 32);
        out->mn[s] = 0;
      }
      out->d = HalfToFloat(b.d);
      out->dmin = 0.0f;
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = t == DType::kQ5_K;
      const uint8_t* scales = five ? BlockAt<BlockQ5_K>(row, g).scales : BlockAt<BlockQ4_K>(row, g).scales;
      for (int e = 0; e < kQK && !unpacked; ++e) {
        out->u[e] =
            static_cast<uint8_t>(five ? U5K(BlockAt<BlockQ5_K>(row, g), e) : U4K(BlockAt<BlockQ4_K>(row, g).qs, e));
      }
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        ScaleMinK4(scales, j, &sc, &m);
        out->sc[2 * j] = out->sc[2 * j + 1] = static_cast<int8_t>(sc);
        out->mn[2 * j] = out->mn[2 * j + 1] = static_cast<int8_t>(m);
      }
      const uint16_t d = five ? BlockAt<BlockQ5_K>(row, g).d : BlockAt<BlockQ4_K>(row, g).d;
      const uint16_t dmin = five ? BlockAt<BlockQ5_K>(row, g).dmin : BlockAt<BlockQ4_K>(row, g).dmin;
      out->d = HalfToFloat(d);
      out->dmin = HalfToFloat(dmin);
      return;
    }
    case DType::kQ6_K: {
      const auto& b = BlockAt<BlockQ6_K>(row, g);
      for (int e = 0; e < kQK && !unpacked; ++e) out->u[e] = static_cast<uint8_t>(U6K(b, e));
      for (int s = 0; s < 16; ++s) {
        out->sc[s] = b.scales[s];
        out->mn[s] = 0;
      }
      out->d = HalfToFloat(b.d);
      out->dmin = 0.0f;
      return;
    }
    case DType::kQ5_0: {
      const auto& b = BlockAt<BlockQ5_0>(row, g);
      for (int e = 0; e < 32 && !unpacked; ++e) out->u[e] = static_cast<uint8_t>(U5(b, e));
      out->sc[0] = out->sc[1] = 1;
      out->mn[0] = out->mn[1] = 0;
      out->d = HalfToFloat(b.d);
      out->dmin = 0.0f;
      return;
    }
    case DType::kQ5_1: {
      const auto& b = BlockAt<BlockQ5_1>(row, g);
      for (int e = 0; e < 32 && !unpacked; ++e) out->u[e] = static_cast<uint8_t>(U5(b, e));
      out->sc[0] = out->sc[1] = 1;
      out->mn[0] = out->mn[1] = 1;
      out->d = HalfToFloat(b.d);
      out->dmin = -HalfToFloat(b.m);
      return;
    }
    default: return;
  }
}

}  // namespace

void DecodeGroup(DType t, const void* row, int64_t g, QuantGroup* out) {
  DecodeGroupFields(t, row, g, UnpackGroupU(t, row, g, out->u), out);
}

void DecodeGroupElementwise(DType t, const void* row, int64_t g, QuantGroup* out) {
  DecodeGroupFields(t, row, g, /*unpacked=*/false, out);
}

void EncodeGroup(DType t, const QuantGroup& q, void* row, int64_t g) {
  auto set2 = [](uint8_t* qs, int e, int v) {
    qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(v << (2 * ((e % 128) / 32)));
  };
  auto set4 = [](uint8_t* qs, int e, int v) {
    qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>(v << (4 * ((e % 64) / 32)));
  };
  switch (t) {
    case DType::kQ2_K: {
      auto& b = static_cast<BlockQ2_K*>(row)[g];
      for (int e = 0; e < kQK; ++e) set2(b.qs, e, q.u[e]);
      for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>(q.sc[s] | q.mn[s] << 4);
      b.d = Fp32ToFp16(q.d);
      b.dmin = Fp32ToFp16(q.dmin);
      return;
    }
    case DType::kQ3_K: {
      auto& b = static_cast<BlockQ3_K*>(row)[g];
      for (int e = 0; e < kQK; ++e) {
        set2(b.qs, e, q.u[e] & 3);
        b.hmask[e % 32] |= static_cast<uint8_t>((q.u[e] >> 2) << (e / 32));
      }
      for (int s = 0; s < 16; ++s) {
        const int sc6 = q.sc[s] + 32;
        b.scales[s % 8] |= static_cast<uint8_t>((sc6 & 0xF) << (s < 8 ? 0 : 4));
        b.scales[8 + s % 4] |= static_cast<uint8_t>((sc6 >> 4) << (2 * (s / 4)));
      }
      b.d = Fp32ToFp16(q.d);
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = t == DType::kQ5_K;
      uint8_t* scales = five ? static_cast<BlockQ5_K*>(row)[g].scales : static_cast<BlockQ4_K*>(row)[g].scales;
      uint8_t* qs = five ? static_cast<BlockQ5_K*>(row)[g].qs : static_cast<BlockQ4_K*>(row)[g].qs;
      for (int e = 0; e < kQK; ++e) {
        set4(qs, e, q.u[e] & 0xF);
        if (five) static_cast<BlockQ5_K*>(row)[g].qh[e % 32] |= static_cast<uint8_t>((q.u[e] >> 4) << (e / 32));
      }
      for (int j = 0; j < 8; ++j) {
        const int sc = q.sc[2 * j], m = q.mn[2 * j];
        if (j < 4) {
          scales[j] |= static_cast<uint8_t>(sc);
          scales[j + 4] |= static_cast<uint8_t>(m);
        } else {
          scales[j + 4] |= static_cast<uint8_t>((sc & 0xF) | (m & 0xF) << 4);
          scales[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
          scales[j] |= static_cast<uint8_t>((m >> 4) << 6);
        }
      }
      const uint16_t d = Fp32ToFp16(q.d), dmin = Fp32ToFp16(q.dmin);
      if (five) {
        static_cast<BlockQ5_K*>(row)[g].d = d;
        static_cast<BlockQ5_K*>(row)[g].dmin = dmin;
      } else {
        static_cast<BlockQ4_K*>(row)[g].d = d;
        static_cast<BlockQ4_K*>(row)[g].dmin = dmin;
      }
      return;
    }
    case DType::kQ6_K: {
      auto& b = static_cast<BlockQ6_K*>(row)[g];
      for (int e = 0; e < kQK; ++e) {
        const int h = e / 128, r = e % 128;
        b.ql[64 * h + r % 64] |= static_cast<uint8_t>((q.u[e] & 0xF) << (4 * (r / 64)));
        b.qh[32 * h + r % 32] |= static_cast<uint8_t>((q.u[e] >> 4) << (2 * (r / 32)));
      }
      for (int s = 0; s < 16; ++s) b.scales[s] = q.sc[s];
      b.d = Fp32ToFp16(q.d);
      return;
    }
    case DType::kQ5_0:
    case DType::kQ5_1: {
      uint8_t* qs = t == DType::kQ5_0 ? static_cast<BlockQ5_0*>(row)[g].qs : static_cast<BlockQ5_1*>(row)[g].qs;
      uint8_t* qh = t == DType::kQ5_0 ? static_cast<BlockQ5_0*>(row)[g].qh : static_cast<BlockQ5_1*>(row)[g].qh;
      for (int e = 0; e < 32; ++e) {
        qs[e % 16] |= static_cast<uint8_t>((q.u[e] & 0xF) << (e < 16 ? 0 : 4));
        qh[e / 8] |= static_cast<uint8_t>((q.u[e] >> 4) << (e % 8));
      }
      if (t == DType::kQ5_0) {
        static_cast<BlockQ5_0*>(row)[g].d = Fp32ToFp16(q.d);
      } else {
        static_cast<BlockQ5_1*>(row)[g].d = Fp32ToFp16(q.d);
        static_cast<BlockQ5_1*>(row)[g].m = Fp32ToFp16(-q.dmin);
      }
      return;
    }
    default: return;
  }
}

void DequantizeGroupRow(DType t, const void* src, float* dst, int64_t n) {
  // Each case multiplies in the order the gguf package does; where it forms
  // a product and subtracts (d * q - m), the product is exact in float (at
  // most 11 + 6 + 5 significant bits), so a contracted FMA rounds the same.
  switch (t) {
    case DType::kQ2_K:
      for (int64_t g = 0; g < n / kQK; ++g) {
        const auto& b = BlockAt<BlockQ2_K>(src, g);
        const float d = Fp16ToFp32(b.d), dmin = Fp16ToFp32(b.dmin);
        for (int e = 0; e < kQK; ++e) {
          const float dl = d * static_cast<float>(b.scales[e / 16] & 0xF);
          const float ml = dmin * static_cast<float>(b.scales[e / 16] >> 4);
          dst[g * kQK + e] = dl * static_cast<float>(U2K(b, e)) - ml;
        }
      }
      return;
    case DType::kQ3_K:
      for (int64_t g = 0; g < n / kQK; ++g) {
        const auto& b = BlockAt<BlockQ3_K>(src, g);
        const float d = Fp16ToFp32(b.d);
        for (int e = 0; e < kQK; ++e) {
          const float dl = d * static_cast<float>(ScaleQ3K(b.scales, e / 16) - 32);
          dst[g * kQK + e] = dl * static_cast<float>(U3K(b, e) - 4);
        }
      }
      return;
    case DType::kQ4_K:
    case DType::kQ5_K:
      for (int64_t g = 0; g < n / kQK; ++g) {
        QuantGroup q;
        DecodeGroup(t, src, g, &q);
        for (int e = 0; e < kQK; ++e) {
          const float ds = q.d * static_cast<float>(q.sc[e / 16]);
          const float dm = q.dmin * static_cast<float>(q.mn[e / 16]);
          dst[g * kQK + e] = ds * static_cast<float>(q.u[e]) - dm;
        }
      }
      return;
    case DType::kQ6_K:
      for (int64_t g = 0; g < n / kQK; ++g) {
        const auto& b = BlockAt<BlockQ6_K>(src, g);
        const float d = Fp16ToFp32(b.d);
        for (int e = 0; e < kQK; ++e) {
          const float ds = d * static_cast<float>(b.scales[e / 16]);
          dst[g * kQK + e] = ds * static_cast<float>(U6K(b, e) - 32);
        }
      }
      return;
    case DType::kQ5_0:
      for (int64_t g = 0; g < n / 32; ++g) {
        const auto& b = BlockAt<BlockQ5_0>(src, g);
        const float d = Fp16ToFp32(b.d);
        for (int e = 0; e < 32; ++e) dst[g * 32 + e] = d * static_cast<float>(U5(b, e) - 16);
      }
      return;
    case DType::kQ5_1:
      for (int64_t g = 0; g < n / 32; ++g) {
        const auto& b = BlockAt<BlockQ5_1>(src, g);
        const float d = Fp16ToFp32(b.d), m = Fp16ToFp32(b.m);
        for (int e = 0; e < 32; ++e) dst[g * 32 + e] = d * static_cast<float>(U5(b, e)) + m;
      }
      return;
    default: return;
  }
}

}  // namespace beacon
