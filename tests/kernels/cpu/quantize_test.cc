#include "kernels/cpu/quantize.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"

namespace beacon {
namespace {

std::vector<float> RandomRow(int64_t n, float scale, float offset, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng) + offset;
  return x;
}

std::vector<float> RoundTrip(DType t, const std::vector<float>& x, std::vector<uint8_t>* blocks) {
  const int64_t n = static_cast<int64_t>(x.size());
  blocks->assign(DTypeRowBytes(t, n), 0);
  QuantizeRow(t, x.data(), blocks->data(), n);
  std::vector<float> y(n);
  DequantizeRow(t, blocks->data(), y.data(), n);
  return y;
}

// Reads the stored (fp16) scale of block `b` for the three quantised layouts.
float BlockScale(DType t, const std::vector<uint8_t>& blocks, int64_t b) {
  const size_t off = b * DTypeBlockBytes(t);
  uint16_t d;
  std::memcpy(&d, blocks.data() + off, 2);  // d is the first field of every block
  return Fp16ToFp32(d);
}

// Every element must read back within half a quantisation step of the input.
void ExpectWithinHalfStep(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> blocks;
  const std::vector<float> y = RoundTrip(t, x, &blocks);
  int64_t exact = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    const float d = BlockScale(t, blocks, i / kQuantBlock);
    ASSERT_GT(d, 0.0f) << DTypeName(t) << " block " << i / kQuantBlock;
    // 1e-5 relative slack for the float arithmetic of d * q (+ m).
    ASSERT_LE(std::fabs(y[i] - x[i]), d * 0.5f + 1e-5f * std::fabs(x[i]) + 1e-7f)
        << DTypeName(t) << " element " << i << " x=" << x[i] << " y=" << y[i] << " d=" << d;
    exact += (y[i] == x[i]);
  }
  // Sanity: the reconstruction is not trivially the input (it must quantise).
  EXPECT_LT(exact, static_cast<int64_t>(x.size()) / 2) << DTypeName(t);
}

TEST(QuantizeTest, Q8_0WithinHalfStep) {
  ExpectWithinHalfStep(DType::kQ8_0, RandomRow(32 * 64, 0.05f, 0.0f, 1));
  ExpectWithinHalfStep(DType::kQ8_0, RandomRow(32 * 16, 300.0f, 0.0f, 2));
}

TEST(QuantizeTest, Q4_0WithinHalfStep) {
  ExpectWithinHalfStep(DType::kQ4_0, RandomRow(32 * 64, 0.05f, 0.0f, 3));
  ExpectWithinHalfStep(DType::kQ4_0, RandomRow(32 * 16, 2.0f, 0.0f, 4));
}

TEST(QuantizeTest, Q4_1WithinHalfStep) {
  ExpectWithinHalfStep(DType::kQ4_1, RandomRow(32 * 64, 0.05f, 0.0f, 5));
  // All-positive and all-negative blocks exercise the offset m.
  ExpectWithinHalfStep(DType::kQ4_1, RandomRow(32 * 16, 0.1f, 3.0f, 6));
  ExpectWithinHalfStep(DType::kQ4_1, RandomRow(32 * 16, 0.1f, -3.0f, 7));
}

TEST(QuantizeTest, ExtremesReadBackAtTheEdgesOfTheRange) {
  std::vector<float> x(32, 0.0f);
  x[3] = 1.0f;
  x[20] = -1.0f;
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    std::vector<uint8_t> blocks;
    const std::vector<float> y = RoundTrip(t, x, &blocks);
    const float d = BlockScale(t, blocks, 0);
    EXPECT_NEAR(y[3], 1.0f, d / 2) << DTypeName(t);
    EXPECT_NEAR(y[20], -1.0f, d / 2) << DTypeName(t);
    EXPECT_EQ(y[0], 0.0f) << DTypeName(t);  // symmetric schemes keep zero exact
  }
  std::vector<uint8_t> blocks;
  const std::vector<float> y = RoundTrip(DType::kQ4_1, x, &blocks);
  EXPECT_LE(y[20], -1.0f + 1e-6f);  // m is at or below the minimum
  EXPECT_NEAR(y[3], 1.0f, BlockScale(DType::kQ4_1, blocks, 0) / 2);
}

TEST(QuantizeTest, ZeroBlockIsExact) {
  const std::vector<float> x(64, 0.0f);
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    std::vector<uint8_t> blocks;
    const std::vector<float> y = RoundTrip(t, x, &blocks);
    for (float v : y) ASSERT_EQ(v, 0.0f) << DTypeName(t);
  }
}

TEST(QuantizeTest, Q4_1HandlesAMinimumNotRepresentableInFp16) {
  // The nearest fp16 to 0.10002 is above it (0.1000366); with a block range
  // far below one fp16 step there, an m rounded to nearest would put every
  // element off by more than d/2. m must round down.
  std::vector<float> x(32, 0.10002f);
  x[31] = 0.10002f + 1e-4f;
  std::vector<uint8_t> blocks;
  const std::vector<float> y = RoundTrip(DType::kQ4_1, x, &blocks);
  const float d = BlockScale(DType::kQ4_1, blocks, 0);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], x[i], d / 2 + 1e-7f) << i;
}

TEST(QuantizeTest, FloatTypesConvert) {
  const std::vector<float> x = {1.0f, -2.5f, 0.1f, 65504.0f, 1e-3f, -0.0f, 3.14159f, 7.0f};
  std::vector<uint8_t> blocks;
  EXPECT_EQ(RoundTrip(DType::kF32, x, &blocks), x);
  const std::vector<float> h = RoundTrip(DType::kF16, x, &blocks);
  const std::vector<float> b = RoundTrip(DType::kBF16, x, &blocks);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], Fp16ToFp32(Fp32ToFp16(x[i]))) << i;
    EXPECT_EQ(b[i], Bf16ToFp32(Fp32ToBf16(x[i]))) << i;
    EXPECT_NEAR(h[i], x[i], std::fabs(x[i]) * 1e-3f) << i;
    EXPECT_NEAR(b[i], x[i], std::fabs(x[i]) * 8e-3f) << i;
  }
}

// The KV cache's vectorised write path equals the scalar conversion bit for
// bit: random values, ties, subnormals, infinities, NaNs (quieted), values
// that round up to infinity, and a length with a scalar tail.
TEST(QuantizeTest, Bf16RowEqualsTheScalarConversion) {
  std::mt19937 rng(4);
  std::vector<uint32_t> bits;
  for (int i = 0; i < 997; ++i) bits.push_back(static_cast<uint32_t>(rng()));  // every class, NaNs included
  for (uint32_t b : {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                     0x7f800001u, 0xffbfffffu, 0x7f7fffffu, 0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x7f7f8000u}) {
    bits.push_back(b);
  }
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  std::vector<uint16_t> got(x.size());
  Fp32ToBf16Row(x.data(), static_cast<int64_t>(x.size()), got.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], Fp32ToBf16(x[i])) << std::hex << "input 0x" << bits[i];
}

}  // namespace
}  // namespace beacon
