// LaunchBeaconGroupMeans against the CPU loop of BeaconPolicy::ObserveQuery
// under beacon_group_queries (sum in head order from 0, then divide, in
// f32): equal bit for bit, on shapes with groups of 1 to 7; bad arguments
// refused without a launch. (End to end, with the state and the eviction:
// CudaBeaconTest.EvictionOnDeviceTracksCpuWithGroupQueries.)
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/beacon_state.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

using cuda_test::DeviceBuffer;

std::vector<float> CpuMeans(const std::vector<float>& q, int64_t tokens, int n_heads, int group, int d) {
  const int n_out = n_heads / group;
  std::vector<float> out(static_cast<size_t>(tokens) * n_out * d, 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    float* o = out.data() + t * n_out * d;
    for (int h = 0; h < n_heads; ++h) {
      for (int c = 0; c < d; ++c) o[(h / group) * d + c] += q[(t * n_heads + h) * d + c];
    }
    for (int i = 0; i < n_out * d; ++i) o[i] /= static_cast<float>(group);
  }
  return out;
}

TEST(CudaBeaconGroupMeansTest, EqualsTheCpuLoopBitForBit) {
  BEACON_REQUIRE_CUDA_DEVICE();
  struct Shape {
    int64_t tokens;
    int n_heads, group, d;
  };
  // Qwen2.5-1.5B (12 on 2), R1-Distill-Qwen-7B (28 on 4), Qwen3-4B (32 on 8), a group of one, a prefill chunk.
  for (const Shape s :
       {Shape{1, 12, 6, 128}, Shape{3, 28, 7, 128}, Shape{5, 32, 4, 128}, Shape{2, 4, 1, 64}, Shape{300, 12, 6, 128}}) {
    std::mt19937 rng(static_cast<uint32_t>(s.tokens * 31 + s.group));
    std::normal_distribution<float> dist(0.0f, 2.0f);
    std::vector<float> q(static_cast<size_t>(s.tokens) * s.n_heads * s.d);
    for (float& x : q) x = dist(rng);
    const std::vector<float> want = CpuMeans(q, s.tokens, s.n_heads, s.group, s.d);
    DeviceBuffer<float> dq(q.size()), dout(want.size());
    BEACON_CUDA_ASSERT_OK(dq.Upload(q));
    BEACON_CUDA_ASSERT_OK(dout.PoisonWithNaN());
    BEACON_CUDA_ASSERT_OK(LaunchBeaconGroupMeans(dq.get(), s.tokens, s.n_heads, s.group, s.d, dout.get(), nullptr));
    BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
    std::vector<float> got;
    BEACON_CUDA_ASSERT_OK(dout.Download(&got));
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << s.tokens << " tokens, " << s.n_heads << " heads in groups of " << s.group;
  }
}

TEST(CudaBeaconGroupMeansTest, BadArgumentsAreRefusedWithoutALaunch) {
  BEACON_REQUIRE_CUDA_DEVICE();
  DeviceBuffer<float> a(64), b(64);
  EXPECT_EQ(LaunchBeaconGroupMeans(a.get(), 1, 6, 4, 8, b.get(), nullptr),
            cudaErrorInvalidValue);  // 4 does not divide 6
  EXPECT_EQ(LaunchBeaconGroupMeans(a.get(), 1, 6, 0, 8, b.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconGroupMeans(nullptr, 1, 6, 3, 8, b.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconGroupMeans(a.get(), -1, 6, 3, 8, b.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchBeaconGroupMeans(a.get(), 0, 6, 3, 8, b.get(), nullptr), cudaSuccess);  // nothing to do
}

}  // namespace
}  // namespace beacon
