#include "kernels/cuda/swiglu.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace swiglu_test {
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::ExpectBf16Near;
using cuda_test::RandomBf16;

// Tolerance: one bf16 rounding of the output (<= 2^-9 relative) plus the
// device expf's few-ulp error; 1e-2 relative, 1e-3 absolute for outputs near
// zero. silu(g) * u computed as g * u (no sigmoid) fails by far more.
constexpr double kRtol = 1e-2;
constexpr double kAtol = 1e-3;

double Silu(double g) { return g / (1.0 + std::exp(-g)); }

struct Shape {
  int64_t tokens;
  int dim;
};
const Shape kShapes[] = {{1, 1}, {2, 255}, {13, 1536}, {64, 8960}};

// Fused gate_up layout [tokens, 2 * dim], gate first, written to a padded
// output (out_stride > dim) so that stride bugs and writes past the row show.
TEST(CudaSwiGluTest, FusedLayoutMatchesNaiveLoop) {
  BEACON_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 7;
  for (const Shape& s : kShapes) {
    const int64_t in_stride = 2 * static_cast<int64_t>(s.dim);
    const int64_t out_stride = s.dim + 3;
    const auto gate_up = RandomBf16(s.tokens * in_stride, seed++, 3.0f);
    DeviceBuffer<uint16_t> din(gate_up.size()), dout(s.tokens * out_stride);
    BEACON_CUDA_ASSERT_OK(din.Upload(gate_up));
    BEACON_CUDA_ASSERT_OK(dout.PoisonWithNaN());
    const auto* base = reinterpret_cast<const __nv_bfloat16*>(din.get());
    BEACON_CUDA_ASSERT_OK(LaunchSwiGlu(base, base + s.dim, in_stride, reinterpret_cast<__nv_bfloat16*>(dout.get()),
                                       out_stride, s.tokens, s.dim, nullptr));
    BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
    std::vector<uint16_t> out_padded;
    BEACON_CUDA_ASSERT_OK(dout.Download(&out_padded));

    std::vector<uint16_t> out;
    std::vector<double> want;
    for (int64_t t = 0; t < s.tokens; ++t) {
      for (int i = 0; i < s.dim; ++i) {
        const double g = Bf16ToFp32(gate_up[t * in_stride + i]);
        const double u = Bf16ToFp32(gate_up[t * in_stride + s.dim + i]);
        want.push_back(Silu(g) * u);
        out.push_back(out_padded[t * out_stride + i]);
      }
      // The padding columns were not written: still the NaN poison.
      for (int64_t i = s.dim; i < out_stride; ++i) {
        EXPECT_TRUE(std::isnan(Bf16ToFp32(out_padded[t * out_stride + i])))
            << "padding written at token " << t << " column " << i;
      }
    }
    ExpectBf16Near(out, want, kRtol, kAtol, "swiglu " + std::to_string(s.tokens) + "x" + std::to_string(s.dim));
  }
}

// Separate buffers, output in place over gate; extreme inputs exercise the
// expf overflow (silu(-100) -> -0) and saturation (silu(100) -> 100).
TEST(CudaSwiGluTest, SeparateBuffersInPlaceAndExtremes) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const int64_t tokens = 5;
  const int dim = 300;
  auto gate = RandomBf16(tokens * dim, 11, 4.0f);
  const auto up = RandomBf16(tokens * dim, 12, 1.0f);
  gate[0] = Fp32ToBf16(-100.0f);
  gate[1] = Fp32ToBf16(100.0f);
  gate[2] = Fp32ToBf16(0.0f);
  DeviceBuffer<uint16_t> dgate(gate.size()), dup(up.size());
  BEACON_CUDA_ASSERT_OK(dgate.Upload(gate));
  BEACON_CUDA_ASSERT_OK(dup.Upload(up));
  auto* g = reinterpret_cast<__nv_bfloat16*>(dgate.get());
  BEACON_CUDA_ASSERT_OK(
      LaunchSwiGlu(g, reinterpret_cast<const __nv_bfloat16*>(dup.get()), dim, g, dim, tokens, dim, nullptr));
  BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> out;
  BEACON_CUDA_ASSERT_OK(dgate.Download(&out));
  std::vector<double> want(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    want[i] = Silu(Bf16ToFp32(gate[i])) * Bf16ToFp32(up[i]);
  }
  ExpectBf16Near(out, want, kRtol, kAtol, "swiglu in place");
}

TEST(CudaSwiGluTest, RejectsBadArgumentsWithoutLaunching) {
  auto* p = reinterpret_cast<__nv_bfloat16*>(uintptr_t{256});  // never dereferenced
  EXPECT_EQ(LaunchSwiGlu(nullptr, p, 8, p, 8, 1, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSwiGlu(p, p, 7, p, 8, 1, 8, nullptr), cudaErrorInvalidValue);  // stride < dim
  EXPECT_EQ(LaunchSwiGlu(p, p, 8, p, 7, 1, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSwiGlu(p, p, 8, p, 8, -1, 8, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSwiGlu(p, p, 8, p, 8, 1, 0, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchSwiGlu(p, p, 8, p, 8, 0, 8, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace swiglu_test
}  // namespace beacon
