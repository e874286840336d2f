#include "kernels/cuda/rmsnorm.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace rmsnorm_test {
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::ExpectBf16Near;
using cuda_test::RandomBf16;

// Tolerance: the GPU rounds each output to bf16 once (relative error <= 2^-9)
// and sums in a different order than the reference; 1e-2 relative plus a
// small absolute term for outputs near zero bounds both with margin, while a
// wrong eps, a missing weight or a wrong mean would be off by far more.
constexpr double kRtol = 1e-2;
constexpr double kAtol = 1e-3;

struct Reference {
  std::vector<uint16_t> residual;  // updated residual (fused only)
  std::vector<double> out;
};

// The naive loops of the header's contract.
Reference NaiveRmsNorm(const std::vector<uint16_t>& x, const std::vector<uint16_t>* residual,
                       const std::vector<uint16_t>& weight, int64_t n, int hidden, float eps) {
  Reference ref;
  ref.out.resize(n * hidden);
  if (residual != nullptr) ref.residual.resize(n * hidden);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> r(hidden);
    for (int i = 0; i < hidden; ++i) {
      const size_t at = t * hidden + i;
      if (residual != nullptr) {
        // fp32 add of two bf16 values, rounded to bf16: exact on any device.
        const uint16_t sum = Fp32ToBf16(Bf16ToFp32(x[at]) + Bf16ToFp32((*residual)[at]));
        ref.residual[at] = sum;
        r[i] = Bf16ToFp32(sum);
      } else {
        r[i] = Bf16ToFp32(x[at]);
      }
    }
    double sum_sq = 0;
    for (double v : r) sum_sq += v * v;
    const double scale = 1.0 / std::sqrt(sum_sq / hidden + eps);
    for (int i = 0; i < hidden; ++i) {
      ref.out[t * hidden + i] = r[i] * scale * Bf16ToFp32(weight[i]);
    }
  }
  return ref;
}

struct Shape {
  int64_t tokens;
  int hidden;
};
// Hidden sizes below, at and above the block size, not multiples of the warp
// size, and real ones (SmolLM2 576, Qwen3-4B 2560, 4096).
const Shape kShapes[] = {{1, 64}, {3, 100}, {7, 576}, {5, 1000}, {16, 2560}, {33, 4096}};

TEST(CudaRmsNormTest, PlainMatchesNaiveLoop) {
  BEACON_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    const size_t n = s.tokens * s.hidden;
    const auto x = RandomBf16(n, seed++, 2.0f);
    const auto w = RandomBf16(s.hidden, seed++, 0.2f, 1.0f);
    DeviceBuffer<uint16_t> dx(n), dw(s.hidden), dout(n);
    BEACON_CUDA_ASSERT_OK(dx.Upload(x));
    BEACON_CUDA_ASSERT_OK(dw.Upload(w));
    BEACON_CUDA_ASSERT_OK(dout.PoisonWithNaN());
    BEACON_CUDA_ASSERT_OK(LaunchRmsNorm(
        reinterpret_cast<const __nv_bfloat16*>(dx.get()), reinterpret_cast<const __nv_bfloat16*>(dw.get()),
        reinterpret_cast<__nv_bfloat16*>(dout.get()), s.tokens, s.hidden, 1e-5f, nullptr));
    BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
    std::vector<uint16_t> out;
    BEACON_CUDA_ASSERT_OK(dout.Download(&out));
    const Reference ref = NaiveRmsNorm(x, nullptr, w, s.tokens, s.hidden, 1e-5f);
    ExpectBf16Near(out, ref.out, kRtol, kAtol, "rmsnorm " + std::to_string(s.tokens) + "x" + std::to_string(s.hidden));
  }
}

TEST(CudaRmsNormTest, FusedAddMatchesNaiveLoopAndUpdatesResidualExactly) {
  BEACON_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 100;
  for (const Shape& s : kShapes) {
    for (bool in_place : {false, true}) {
      const size_t n = s.tokens * s.hidden;
      const auto x = RandomBf16(n, seed++, 1.0f);
      const auto res = RandomBf16(n, seed++, 3.0f);
      const auto w = RandomBf16(s.hidden, seed++, 0.2f, 1.0f);
      DeviceBuffer<uint16_t> dx(n), dres(n), dw(s.hidden), dout(n);
      BEACON_CUDA_ASSERT_OK(dx.Upload(x));
      BEACON_CUDA_ASSERT_OK(dres.Upload(res));
      BEACON_CUDA_ASSERT_OK(dw.Upload(w));
      BEACON_CUDA_ASSERT_OK(dout.PoisonWithNaN());
      // In place writes the output over x.
      uint16_t* out_ptr = in_place ? dx.get() : dout.get();
      BEACON_CUDA_ASSERT_OK(LaunchFusedAddRmsNorm(
          reinterpret_cast<const __nv_bfloat16*>(dx.get()), reinterpret_cast<__nv_bfloat16*>(dres.get()),
          reinterpret_cast<const __nv_bfloat16*>(dw.get()), reinterpret_cast<__nv_bfloat16*>(out_ptr), s.tokens,
          s.hidden, 1e-6f, nullptr));
      BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
      std::vector<uint16_t> out, new_res;
      BEACON_CUDA_ASSERT_OK((in_place ? dx : dout).Download(&out));
      BEACON_CUDA_ASSERT_OK(dres.Download(&new_res));
      const Reference ref = NaiveRmsNorm(x, &res, w, s.tokens, s.hidden, 1e-6f);
      const std::string what = std::string(in_place ? "in-place " : "") + "fused " + std::to_string(s.tokens) + "x" +
                               std::to_string(s.hidden);
      EXPECT_EQ(new_res, ref.residual) << what << ": residual must be bf16(x + residual)";
      ExpectBf16Near(out, ref.out, kRtol, kAtol, what);
    }
  }
}

// Argument checks happen on the host before any CUDA call, so they run (and
// must pass) on machines without a GPU too.
TEST(CudaRmsNormTest, RejectsBadArgumentsWithoutLaunching) {
  auto* p = reinterpret_cast<__nv_bfloat16*>(uintptr_t{256});  // never dereferenced
  EXPECT_EQ(LaunchRmsNorm(nullptr, p, p, 1, 64, 1e-5f, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRmsNorm(p, p, p, -1, 64, 1e-5f, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRmsNorm(p, p, p, 1, 0, 1e-5f, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRmsNorm(p, p, p, 1, 64, -1.0f, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchFusedAddRmsNorm(p, nullptr, p, p, 1, 64, 1e-5f, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRmsNorm(p, p, p, 0, 64, 1e-5f, nullptr), cudaSuccess);  // nothing to do
}

}  // namespace
}  // namespace rmsnorm_test
}  // namespace beacon
