// The K-quant and 5-bit layouts: hand-built blocks with values written out
// from ggml's layout, and the integer form (DecodeGroup) against the scalar
// dequantiser. Bit-exactness against the `gguf` package's dequantiser on
// real files is tests/reference/test_kquant_dequant.py.
#include "kernels/cpu/kquant_blocks.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/quantize.h"

namespace beacon {
namespace {

TEST(KQuantBlocks, Q4KScalesMinsAndNibbleOrder) {
  BlockQ4_K b{};
  b.d = Fp32ToFp16(0.5f);
  b.dmin = Fp32ToFp16(0.25f);
  // Sub-block j: scale j + 1, min 2 j; j >= 4 splits into a low nibble in
  // scales[j + 4] and two high bits in the top of scales[j - 4] / scales[j].
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(j + 1);
    b.scales[j + 4] = static_cast<uint8_t>(2 * j);
  }
  for (int j = 4; j < 8; ++j) {
    const int sc = 40 + j, m = 50 + j;  // need the high bits
    b.scales[j + 4] = static_cast<uint8_t>((sc & 0xF) | (m & 0xF) << 4);
    b.scales[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
    b.scales[j] |= static_cast<uint8_t>((m >> 4) << 6);
  }
  // Element i of sub-block 2c + k is nibble k of qs[32c + i]: store i % 16.
  for (int c = 0; c < 4; ++c) {
    for (int i = 0; i < 32; ++i) b.qs[32 * c + i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  }
  std::vector<float> x(kQK);
  DequantizeRow(DType::kQ4_K, &b, x.data(), kQK);
  for (int e = 0; e < kQK; ++e) {
    const int s = e / 32, i = e % 32;
    const int sc = s < 4 ? s + 1 : 40 + s, m = s < 4 ? 2 * s : 50 + s;
    const int q = s % 2 == 0 ? i % 16 : 15 - i % 16;
    ASSERT_EQ(x[e], 0.5f * sc * q - 0.25f * m) << "element " << e;
  }
}

TEST(KQuantBlocks, Q6KSignedScalesAndSixBits) {
  BlockQ6_K b{};
  b.d = Fp32ToFp16(0.125f);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s % 2 == 0 ? -(s + 1) : s + 1);
  // q = 63 everywhere but element 0 (q = 0) and element 200 (q = 32 + 5).
  std::memset(b.ql, 0xFF, sizeof b.ql);
  std::memset(b.qh, 0xFF, sizeof b.qh);
  b.ql[0] &= 0xF0;  // element 0: low nibble 0
  b.qh[0] &= 0xFC;  // element 0: high bits 0
  // element 200 = 128 + 64 + 8: high nibble of ql[64 + 8]; high2 at
  // (qh[32 + 8] >> 4) & 3 (r = 72: j = 2).
  b.ql[72] = static_cast<uint8_t>((b.ql[72] & 0x0F) | (5 << 4));
  b.qh[40] = static_cast<uint8_t>((b.qh[40] & ~(3 << 4)) | (2 << 4));
  std::vector<float> x(kQK);
  DequantizeRow(DType::kQ6_K, &b, x.data(), kQK);
  for (int e = 0; e < kQK; ++e) {
    const int q = e == 0 ? 0 : e == 200 ? 37 : 63;
    ASSERT_EQ(x[e], 0.125f * b.scales[e / 16] * (q - 32)) << "element " << e;
  }
}

TEST(KQuantBlocks, Q5_0FifthBit) {
  BlockQ5_0 b{};
  b.d = Fp32ToFp16(2.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const uint32_t qh = 0xA5A50F0Fu;
  std::memcpy(b.qh, &qh, 4);
  std::vector<float> x(32);
  DequantizeRow(DType::kQ5_0, &b, x.data(), 32);
  for (int e = 0; e < 32; ++e) {
    const int low = e < 16 ? e : 15 - (e - 16);
    const int q = low | static_cast<int>((qh >> e) & 1) << 4;
    ASSERT_EQ(x[e], 2.0f * (q - 16)) << "element " << e;
  }
}

// x = d * sc * (u - zero) - dmin * mn for every supported group type and
// random block bytes: the integer form is what the kernels multiply with.
TEST(KQuantBlocks, IntegerFormReconstructsTheDequantiser) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (DType t : {DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const QuantGroupFormat f = GroupFormatOf(t);
    const int64_t n = 4 * kQK;
    std::vector<uint8_t> raw(DTypeRowBytes(t, n));
    for (auto& v : raw) v = static_cast<uint8_t>(byte(rng));
    // Keep fp16 fields finite: clear the exponent's top bit of every byte
    // pair (d, dmin wherever they sit), which keeps |value| < 2.
    for (size_t i = 1; i < raw.size(); i += 2) raw[i] &= 0xBF;
    std::vector<float> x(n);
    DequantizeRow(t, raw.data(), x.data(), n);
    QuantGroup q;
    for (int64_t g = 0; g < n / f.group; ++g) {
      DecodeGroup(t, raw.data(), g, &q);
      for (int e = 0; e < f.group; ++e) {
        ASSERT_LT(q.u[e], 1 << f.bits) << DTypeName(t);
        const double want =
            static_cast<double>(q.d) * q.sc[e / 16] * (q.u[e] - f.zero) - static_cast<double>(q.dmin) * q.mn[e / 16];
        const float got = x[g * f.group + e];
        ASSERT_NEAR(got, want, 1e-6 * std::fabs(want) + 1e-30) << DTypeName(t) << " element " << e;
      }
    }
  }
}

// DecodeGroup unpacks u 32 at a time where the build has AVX2
// (kquant_unpack.h); on random bytes (every bit pattern of every field,
// several groups into the row) it writes what the element-by-element decode
// writes, field for field.
TEST(KQuantBlocks, UnpackedDecodeEqualsElementwise) {
  std::mt19937 rng(13);
  std::uniform_int_distribution<int> byte(0, 255);
  for (DType t : {DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const QuantGroupFormat f = GroupFormatOf(t);
    const int64_t n = 6 * kQK;
    std::vector<uint8_t> raw(DTypeRowBytes(t, n));
    for (auto& v : raw) v = static_cast<uint8_t>(byte(rng));
    for (int64_t g = 0; g < n / f.group; ++g) {
      QuantGroup fast, slow;
      std::memset(&fast, 0xAB, sizeof fast);
      std::memset(&slow, 0xCD, sizeof slow);
      DecodeGroup(t, raw.data(), g, &fast);
      DecodeGroupElementwise(t, raw.data(), g, &slow);
      for (int e = 0; e < f.group; ++e)
        ASSERT_EQ(fast.u[e], slow.u[e]) << DTypeName(t) << " group " << g << " u[" << e << "]";
      for (int s = 0; s < f.group / 16; ++s) {
        ASSERT_EQ(fast.sc[s], slow.sc[s]) << DTypeName(t) << " sc[" << s << "]";
        ASSERT_EQ(fast.mn[s], slow.mn[s]) << DTypeName(t) << " mn[" << s << "]";
      }
      ASSERT_EQ(std::memcmp(&fast.d, &slow.d, sizeof fast.d), 0) << DTypeName(t);
      ASSERT_EQ(std::memcmp(&fast.dmin, &slow.dmin, sizeof fast.dmin), 0) << DTypeName(t);
    }
  }
}

// EncodeGroup is DecodeGroup's inverse on every valid integer form (and
// DecodeGroup is checked against the gguf package on real files).
TEST(KQuantBlocks, EncodeInvertsDecode) {
  std::mt19937 rng(11);
  for (DType t : {DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const QuantGroupFormat f = GroupFormatOf(t);
    for (int trial = 0; trial < 20; ++trial) {
      QuantGroup q{};
      std::uniform_int_distribution<int> u(0, (1 << f.bits) - 1);
      for (int e = 0; e < f.group; ++e) q.u[e] = static_cast<uint8_t>(u(rng));
      // Scale and min ranges as each layout stores them.
      const int sc_lo = t == DType::kQ6_K ? -128 : t == DType::kQ3_K ? -32 : 0;
      const int sc_hi = t == DType::kQ6_K ? 127 : t == DType::kQ3_K ? 31 : t == DType::kQ2_K ? 15 : 63;
      std::uniform_int_distribution<int> sc(sc_lo, sc_hi), mn(0, t == DType::kQ2_K ? 15 : 63);
      for (int s = 0; s < f.group / 16; s += f.sc16 ? 1 : 2) {
        q.sc[s] = static_cast<int8_t>(f.scales ? sc(rng) : 1);
        q.mn[s] = static_cast<int8_t>(f.mins == 1 ? mn(rng) : f.mins == 2 ? 1 : 0);
        if (!f.sc16 && s + 1 < f.group / 16) q.sc[s + 1] = q.sc[s];
        if (!f.mn16 && s + 1 < f.group / 16) q.mn[s + 1] = q.mn[s];
      }
      q.d = Fp16ToFp32(Fp32ToFp16(0.01f * (trial + 1)));
      q.dmin = f.mins != 0 ? Fp16ToFp32(Fp32ToFp16(0.003f * (trial + 2))) : 0.0f;
      std::vector<uint8_t> raw(DTypeBlockBytes(t), 0);
      EncodeGroup(t, q, raw.data(), 0);
      QuantGroup back;
      DecodeGroup(t, raw.data(), 0, &back);
      for (int e = 0; e < f.group; ++e) ASSERT_EQ(back.u[e], q.u[e]) << DTypeName(t) << " u[" << e << "]";
      for (int s = 0; s < f.group / 16; ++s) {
        ASSERT_EQ(back.sc[s], q.sc[s]) << DTypeName(t) << " sc[" << s << "]";
        ASSERT_EQ(back.mn[s], q.mn[s]) << DTypeName(t) << " mn[" << s << "]";
      }
      ASSERT_EQ(back.d, q.d) << DTypeName(t);
      ASSERT_EQ(back.dmin, q.dmin) << DTypeName(t);
    }
  }
}

// QuantizeRow (dummy models) reads back within one level step of its input,
// plus one dmin for the offset types, and is not the identity.
TEST(KQuantBlocks, QuantizeRowWithinOneStep) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (DType t : {DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const QuantGroupFormat f = GroupFormatOf(t);
    const int64_t n = 8 * kQK;
    std::vector<float> x(n), y(n);
    for (float& v : x) v = nd(rng) + 0.01f;
    std::vector<uint8_t> raw(DTypeRowBytes(t, n));
    QuantizeRow(t, x.data(), raw.data(), n);
    DequantizeRow(t, raw.data(), y.data(), n);
    QuantGroup q;
    int64_t exact = 0;
    double err2 = 0, ref2 = 0;
    for (int64_t g = 0; g < n / f.group; ++g) {
      DecodeGroup(t, raw.data(), g, &q);
      for (int e = 0; e < f.group; ++e) {
        const int64_t i = g * f.group + e;
        const float step = std::fabs(q.d * q.sc[e / 16]);
        ASSERT_GT(step, 0.0f) << DTypeName(t);
        ASSERT_LE(std::fabs(y[i] - x[i]), step + std::fabs(q.dmin) + 1e-6f) << DTypeName(t) << " element " << i;
        exact += y[i] == x[i];
        err2 += (y[i] - x[i]) * (y[i] - x[i]);
        ref2 += x[i] * x[i];
      }
    }
    EXPECT_LT(exact, n / 2) << DTypeName(t);
    // Relative RMS error by bits: 2-bit ~40%, 6-bit ~2%.
    EXPECT_LT(std::sqrt(err2 / ref2), f.bits <= 3 ? 0.5 : 0.15) << DTypeName(t);
  }
}

}  // namespace
}  // namespace beacon
