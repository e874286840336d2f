#include "kernels/cuda/gemv.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cuda/swiglu.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace gemv_test {
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::ExpectBf16Near;
using cuda_test::RandomBf16;

// Tolerance: the same bf16 inputs on both sides, an exact (double)
// reference; fp32 sums of <= 1,032 products of O(1) values are off by
// ~1e-4, and the bf16 output's rounding is 2^-9 relative. A wrong row,
// token, chunk or stride moves outputs by O(1).
constexpr double kRtol = 1e-2;
constexpr double kAtol = 2e-3;

struct Shape {
  int64_t out, in, n;
};
// Rows that fill a block and rows that do not (out % 8); in of 1, 17 and
// 129 chunks (fewer than, and not a multiple of, the warp's 32 lanes);
// every token count 1..8.
const Shape kShapes[] = {{1, 8, 1},  {13, 136, 2}, {40, 256, 3}, {33, 1032, 4},
                         {7, 64, 5}, {64, 136, 6}, {9, 1032, 7}, {300, 264, 8}};

std::vector<double> Naive(const std::vector<uint16_t>& w, const std::vector<uint16_t>& x, const Shape& s) {
  std::vector<double> y(s.n * s.out);
  for (int64_t t = 0; t < s.n; ++t) {
    for (int64_t o = 0; o < s.out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < s.in; ++i) acc += Bf16ToFp32(w[o * s.in + i]) * Bf16ToFp32(x[t * s.in + i]);
      y[t * s.out + o] = acc;
    }
  }
  return y;
}

TEST(CudaGemvTest, MatchesNaiveLoopForEveryTokenCount) {
  BEACON_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 3;
  for (const Shape& s : kShapes) {
    const auto w = RandomBf16(s.out * s.in, seed++, 0.2f);
    const auto x = RandomBf16(s.n * s.in, seed++, 1.0f);
    DeviceBuffer<uint16_t> dw(w.size()), dx(x.size()), dy(s.n * s.out);
    DeviceBuffer<float> dy32(s.n * s.out);
    BEACON_CUDA_ASSERT_OK(dw.Upload(w));
    BEACON_CUDA_ASSERT_OK(dx.Upload(x));
    BEACON_CUDA_ASSERT_OK(dy.PoisonWithNaN());
    BEACON_CUDA_ASSERT_OK(dy32.PoisonWithNaN());
    const auto* wp = reinterpret_cast<const __nv_bfloat16*>(dw.get());
    const auto* xp = reinterpret_cast<const __nv_bfloat16*>(dx.get());
    BEACON_CUDA_ASSERT_OK(LaunchGemv(wp, s.out, s.in, xp, s.n, dy.get(), /*y_f32=*/false, nullptr));
    BEACON_CUDA_ASSERT_OK(LaunchGemv(wp, s.out, s.in, xp, s.n, dy32.get(), /*y_f32=*/true, nullptr));
    BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
    const std::vector<double> want = Naive(w, x, s);
    const std::string what =
        "out " + std::to_string(s.out) + " in " + std::to_string(s.in) + " n " + std::to_string(s.n);
    std::vector<uint16_t> got;
    BEACON_CUDA_ASSERT_OK(dy.Download(&got));
    ExpectBf16Near(got, want, kRtol, kAtol, what);
    std::vector<float> got32;
    BEACON_CUDA_ASSERT_OK(dy32.Download(&got32));
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got32[i], want[i], 1e-4 + 1e-5 * std::abs(want[i])) << what << " f32 [" << i << "]";
    }
  }
}

// The fused gate/up + SwiGLU kernel: bit for bit the GEMV's bf16 output fed
// to LaunchSwiGlu (the path it replaces), and near silu(g) u computed exactly
// from the same bf16 inputs. Shapes: gate rows filling a block and not, in of
// 1-129 chunks, token counts 1-8.
TEST(CudaGemvTest, SwiGluIsTheTwoStepResultBitForBit) {
  BEACON_REQUIRE_CUDA_DEVICE();
  struct SwiShape {
    int64_t ffn, in, n;
  };
  uint64_t seed = 40;
  for (const SwiShape& s :
       {SwiShape{1, 8, 1}, SwiShape{13, 136, 2}, SwiShape{40, 264, 5}, SwiShape{33, 1032, 8}, SwiShape{300, 64, 3}}) {
    const auto w = RandomBf16(2 * s.ffn * s.in, seed++, 0.2f);
    const auto x = RandomBf16(s.n * s.in, seed++, 1.0f);
    DeviceBuffer<uint16_t> dw(w.size()), dx(x.size()), gate_up(s.n * 2 * s.ffn), two_step(s.n * s.ffn),
        fused(s.n * s.ffn);
    BEACON_CUDA_ASSERT_OK(dw.Upload(w));
    BEACON_CUDA_ASSERT_OK(dx.Upload(x));
    BEACON_CUDA_ASSERT_OK(fused.PoisonWithNaN());
    const auto* wp = reinterpret_cast<const __nv_bfloat16*>(dw.get());
    const auto* xp = reinterpret_cast<const __nv_bfloat16*>(dx.get());
    auto* gu = reinterpret_cast<__nv_bfloat16*>(gate_up.get());
    BEACON_CUDA_ASSERT_OK(LaunchGemv(wp, 2 * s.ffn, s.in, xp, s.n, gu, /*y_f32=*/false, nullptr));
    BEACON_CUDA_ASSERT_OK(LaunchSwiGlu(gu, gu + s.ffn, 2 * s.ffn, reinterpret_cast<__nv_bfloat16*>(two_step.get()),
                                       s.ffn, s.n, static_cast<int>(s.ffn), nullptr));
    BEACON_CUDA_ASSERT_OK(
        LaunchGemvSwiGlu(wp, s.ffn, s.in, xp, s.n, reinterpret_cast<__nv_bfloat16*>(fused.get()), nullptr));
    BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
    const std::string what =
        "ffn " + std::to_string(s.ffn) + " in " + std::to_string(s.in) + " n " + std::to_string(s.n);
    std::vector<uint16_t> want_bits, got;
    BEACON_CUDA_ASSERT_OK(two_step.Download(&want_bits));
    BEACON_CUDA_ASSERT_OK(fused.Download(&got));
    EXPECT_EQ(got, want_bits) << what;
    const std::vector<double> products = Naive(w, x, Shape{2 * s.ffn, s.in, s.n});
    std::vector<double> want(s.n * s.ffn);
    for (int64_t t = 0; t < s.n; ++t) {
      for (int64_t r = 0; r < s.ffn; ++r) {
        const double g = products[t * 2 * s.ffn + r], u = products[t * 2 * s.ffn + s.ffn + r];
        want[t * s.ffn + r] = g / (1 + std::exp(-g)) * u;
      }
    }
    ExpectBf16Near(got, want, 2 * kRtol, 2 * kAtol, what);  // two bf16 roundings before the product
  }
}

TEST(CudaGemvTest, RefusesWhatItDoesNotTake) {
  BEACON_REQUIRE_CUDA_DEVICE();
  DeviceBuffer<uint16_t> w(64 * 16), x(16 * 16), y(64 * 16);
  const auto* wp = reinterpret_cast<const __nv_bfloat16*>(w.get());
  const auto* xp = reinterpret_cast<const __nv_bfloat16*>(x.get());
  EXPECT_TRUE(GemvSupports(wp, 64, 16, xp, 8, y.get()));
  EXPECT_FALSE(GemvSupports(wp, 64, 16, xp, kGemvMaxTokens + 1, y.get())) << "more tokens than the kernel holds";
  EXPECT_FALSE(GemvSupports(wp, 64, 16, xp, 0, y.get()));
  EXPECT_FALSE(GemvSupports(wp, 64, 12, xp, 1, y.get())) << "in not whole 16-byte chunks";
  EXPECT_FALSE(GemvSupports(wp + 1, 64, 16, xp, 1, y.get())) << "w misaligned";
  EXPECT_FALSE(GemvSupports(wp, 64, 16, xp + 4, 1, y.get())) << "x misaligned";
  EXPECT_FALSE(GemvSupports(wp, 0, 16, xp, 1, y.get()));
  EXPECT_FALSE(GemvSupports(nullptr, 64, 16, xp, 1, y.get()));
  EXPECT_EQ(LaunchGemv(wp, 64, 12, xp, 1, y.get(), false, nullptr), cudaErrorInvalidValue);
  auto* yb = reinterpret_cast<__nv_bfloat16*>(y.get());
  EXPECT_EQ(LaunchGemvSwiGlu(wp, 32, 12, xp, 1, yb, nullptr), cudaErrorInvalidValue) << "in not whole chunks";
  EXPECT_EQ(LaunchGemvSwiGlu(wp, 32, 16, xp, kGemvMaxTokens + 1, yb, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchGemvSwiGlu(wp, int64_t{1} << 31, 16, xp, 1, yb, nullptr), cudaErrorInvalidValue) << "2 ffn rows";
}

}  // namespace
}  // namespace gemv_test
}  // namespace beacon
