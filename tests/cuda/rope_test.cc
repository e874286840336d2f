#include "kernels/cuda/rope.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cpu/rope_scaling.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace rope_test {
namespace {

using cuda_test::DeviceBuffer;
using cuda_test::ExpectBf16Near;
using cuda_test::RandomBf16;

// Tolerance (inputs ~ N(0, 1)): one bf16 rounding per output (2^-9 relative)
// and the fp32 angle position * inv_freq, whose rounding at positions near
// 32K is ~1e-3 rad; rtol 1e-2 plus atol 2e-2 for outputs that cancel to
// near zero. The wrong pairing (interleaved vs half), a wrong theta or
// position gives O(1) errors.
constexpr double kRtol = 1e-2;
constexpr double kAtol = 2e-2;

struct Config {
  int nq;
  int nkv;
  int head_dim;
  float theta;
};

// The naive loop of the header's contract, in double, over a fused QKV row
// layout [tokens, (nq + 2 * nkv) * head_dim]: rotates the Q and K heads,
// scaled by attention_factor, and leaves V as is.
std::vector<double> NaiveRope(const std::vector<uint16_t>& qkv, const std::vector<int32_t>& pos, const Config& c,
                              RopeStyle style, const std::vector<float>* inv_freq, double attention_factor) {
  const int64_t stride = static_cast<int64_t>(c.nq + 2 * c.nkv) * c.head_dim;
  const int half = c.head_dim / 2;
  std::vector<double> out(qkv.size());
  for (size_t i = 0; i < qkv.size(); ++i) out[i] = Bf16ToFp32(qkv[i]);
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int h = 0; h < c.nq + c.nkv; ++h) {  // Q heads, then K heads
      double* x = out.data() + t * stride + static_cast<int64_t>(h) * c.head_dim;
      for (int i = 0; i < half; ++i) {
        const double f =
            inv_freq != nullptr ? (*inv_freq)[i] : std::pow(static_cast<double>(c.theta), -2.0 * i / c.head_dim);
        const double angle = pos[t] * f;
        const int ia = style == RopeStyle::kInterleaved ? 2 * i : i;
        const int ib = style == RopeStyle::kInterleaved ? 2 * i + 1 : i + half;
        const double a = x[ia], b = x[ib];
        x[ia] = attention_factor * (a * std::cos(angle) - b * std::sin(angle));
        x[ib] = attention_factor * (a * std::sin(angle) + b * std::cos(angle));
      }
    }
  }
  return out;
}

// A ragged batch: three sequences (prefill from 0, a single decode token, a
// long-context chunk) concatenated, each token with its own position.
std::vector<int32_t> RaggedPositions() {
  std::vector<int32_t> pos;
  for (int p = 0; p < 5; ++p) pos.push_back(p);
  pos.push_back(1234);
  for (int p = 32000; p < 32017; ++p) pos.push_back(p);
  return pos;
}

void RunCase(const Config& c, RopeStyle style, const std::vector<float>* inv_freq, uint64_t seed,
             float attention_factor = 1.0f) {
  const std::vector<int32_t> pos = RaggedPositions();
  const int64_t tokens = static_cast<int64_t>(pos.size());
  const int64_t stride = static_cast<int64_t>(c.nq + 2 * c.nkv) * c.head_dim;
  const auto qkv = RandomBf16(tokens * stride, seed);

  // In place, so no NaN poison: the untouched V columns are the canary.
  DeviceBuffer<uint16_t> dqkv(qkv.size());
  DeviceBuffer<int32_t> dpos(pos.size());
  DeviceBuffer<float> dfreq(inv_freq != nullptr ? inv_freq->size() : 1);
  BEACON_CUDA_ASSERT_OK(dqkv.Upload(qkv));
  BEACON_CUDA_ASSERT_OK(dpos.Upload(pos));
  RopeParams params;
  params.style = style;
  params.theta = c.theta;
  params.attention_factor = attention_factor;
  if (inv_freq != nullptr) {
    BEACON_CUDA_ASSERT_OK(dfreq.Upload(*inv_freq));
    params.inv_freq = dfreq.get();
  }
  auto* q = reinterpret_cast<__nv_bfloat16*>(dqkv.get());
  BEACON_CUDA_ASSERT_OK(LaunchRope(q, stride, c.nq, q + static_cast<int64_t>(c.nq) * c.head_dim, stride, c.nkv,
                                   dpos.get(), tokens, c.head_dim, params, nullptr));
  BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> got;
  BEACON_CUDA_ASSERT_OK(dqkv.Download(&got));

  const std::string what = std::string(style == RopeStyle::kHalf ? "half" : "interleaved") +
                           " nq=" + std::to_string(c.nq) + " nkv=" + std::to_string(c.nkv) +
                           " d=" + std::to_string(c.head_dim) + (inv_freq != nullptr ? " custom inv_freq" : "") +
                           " attention factor " + std::to_string(attention_factor);
  ExpectBf16Near(got, NaiveRope(qkv, pos, c, style, inv_freq, attention_factor), kRtol, kAtol, what);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t row = t * stride;
    // V is never touched.
    for (int64_t i = static_cast<int64_t>(c.nq + c.nkv) * c.head_dim; i < stride; ++i) {
      ASSERT_EQ(got[row + i], qkv[row + i]) << what << ": V modified at token " << t;
    }
    // Position 0 is the identity rotation: bit-exact (unscaled magnitude).
    if (pos[t] == 0 && attention_factor == 1.0f) {
      for (int64_t i = 0; i < stride; ++i) {
        ASSERT_EQ(got[row + i], qkv[row + i]) << what << ": position 0 changed element " << i;
      }
    }
  }
}

const Config kConfigs[] = {
    {9, 3, 64, 10000.0f},      // SmolLM2-135M
    {32, 8, 128, 500000.0f},   // Llama 3 8B
    {16, 8, 128, 1000000.0f},  // Qwen3-4B style
    {1, 1, 2, 10000.0f},       // smallest legal head
};

TEST(CudaRopeTest, HalfStyleMatchesNaiveLoop) {
  BEACON_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 21;
  for (const Config& c : kConfigs) RunCase(c, RopeStyle::kHalf, nullptr, seed++);
}

TEST(CudaRopeTest, InterleavedStyleMatchesNaiveLoop) {
  BEACON_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 41;
  for (const Config& c : kConfigs) RunCase(c, RopeStyle::kInterleaved, nullptr, seed++);
}

// Host-computed frequencies (as for Llama 3 scaling) override theta: here the
// default frequencies with the low ones divided by 8.
TEST(CudaRopeTest, CustomInverseFrequencies) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const Config c{8, 2, 64, 10000.0f};
  std::vector<float> inv_freq(c.head_dim / 2);
  for (int i = 0; i < c.head_dim / 2; ++i) {
    const double f = std::pow(500000.0, -2.0 * i / c.head_dim);
    inv_freq[i] = static_cast<float>(i >= c.head_dim / 4 ? f / 8.0 : f);
  }
  RunCase(c, RopeStyle::kHalf, &inv_freq, 61);
  RunCase(c, RopeStyle::kInterleaved, &inv_freq, 62);
}

// The model's tables (kernels/cpu/rope_scaling.h) of each scaling type, as
// the CUDA backend uploads them, with YaRN's attention factor on cos and sin.
TEST(CudaRopeTest, ScaledTablesAndAttentionFactor) {
  BEACON_REQUIRE_CUDA_DEVICE();
  const Config c{8, 2, 128, 1000000.0f};
  const RopeScaling scalings[] = {
      {.type = RopeScalingType::kLinear, .factor = 4.0f},
      {.type = RopeScalingType::kLlama3,
       .factor = 8.0f,
       .low_freq_factor = 1.0f,
       .high_freq_factor = 4.0f,
       .original_context = 8192},
      {.type = RopeScalingType::kYarn, .factor = 4.0f, .original_context = 32768},
  };
  uint64_t seed = 71;
  for (const RopeScaling& s : scalings) {
    const RopeTable t = MakeRopeTable(c.theta, c.head_dim, s);
    RunCase(c, RopeStyle::kHalf, &t.inv_freq, seed++, t.attention_factor);
    RunCase(c, RopeStyle::kInterleaved, &t.inv_freq, seed++, t.attention_factor);
  }
}

TEST(CudaRopeTest, RejectsBadArgumentsWithoutLaunching) {
  auto* p = reinterpret_cast<__nv_bfloat16*>(uintptr_t{256});  // never dereferenced
  auto* pos = reinterpret_cast<const int32_t*>(uintptr_t{512});
  const RopeParams ok;
  RopeParams no_theta;
  no_theta.theta = 0.0f;
  EXPECT_EQ(LaunchRope(nullptr, 64, 1, p, 64, 1, pos, 1, 64, ok, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRope(p, 64, 1, nullptr, 64, 1, pos, 1, 64, ok, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRope(p, 64, 1, p, 64, 1, nullptr, 1, 64, ok, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRope(p, 64, 1, p, 64, 1, pos, 1, 63, ok, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRope(p, 63, 1, p, 64, 1, pos, 1, 64, ok, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRope(p, 64, 1, p, 64, 1, pos, -1, 64, ok, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRope(p, 64, 1, p, 64, 1, pos, 1, 64, no_theta, nullptr), cudaErrorInvalidValue);
  RopeParams no_magnitude;
  no_magnitude.attention_factor = 0.0f;
  EXPECT_EQ(LaunchRope(p, 64, 1, p, 64, 1, pos, 1, 64, no_magnitude, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchRope(p, 64, 1, p, 64, 1, pos, 0, 64, ok, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace rope_test
}  // namespace beacon
