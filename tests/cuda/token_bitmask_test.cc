#include "kernels/cuda/token_bitmask.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace beacon {
namespace {

using cuda_test::DeviceBuffer;

// The contract's loop: -inf where the row's bit is clear, the logit as it was elsewhere.
std::vector<float> NaiveApply(const std::vector<float>& logits, const std::vector<uint32_t>& masks, int rows,
                              int vocab) {
  const int words = TokenMaskWords(vocab);
  std::vector<float> out = logits;
  for (int r = 0; r < rows; ++r) {
    for (int t = 0; t < vocab; ++t) {
      if (((masks[r * words + t / 32] >> (t % 32)) & 1u) == 0)
        out[r * vocab + t] = -std::numeric_limits<float>::infinity();
    }
  }
  return out;
}

TEST(TokenBitmaskTest, MatchesTheNaiveLoop) {
  BEACON_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(5);
  // A vocabulary that ends mid-word, and a few rows: sparse, dense, all ones
  // (an unconstrained row of a mixed batch: untouched) and all zeros.
  for (int vocab : {37, 1000, 4099}) {
    const int rows = 4, words = TokenMaskWords(vocab);
    std::vector<float> logits(rows * vocab);
    std::normal_distribution<float> normal;
    for (float& x : logits) x = normal(rng);
    std::vector<uint32_t> masks(rows * words);
    for (int w = 0; w < words; ++w) {
      masks[0 * words + w] = rng() & rng() & rng();  // sparse
      masks[1 * words + w] = rng() | rng();          // dense
      masks[2 * words + w] = 0xffffffffu;
      masks[3 * words + w] = 0u;
    }
    DeviceBuffer<float> d_logits(logits.size());
    DeviceBuffer<uint32_t> d_masks(masks.size());
    BEACON_CUDA_ASSERT_OK(d_logits.Upload(logits));
    BEACON_CUDA_ASSERT_OK(d_masks.Upload(masks));
    BEACON_CUDA_ASSERT_OK(LaunchApplyTokenBitmask(d_logits.get(), rows, vocab, d_masks.get(), nullptr));
    BEACON_CUDA_ASSERT_OK(cudaDeviceSynchronize());
    std::vector<float> got;
    BEACON_CUDA_ASSERT_OK(d_logits.Download(&got));
    const std::vector<float> want = NaiveApply(logits, masks, rows, vocab);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::isinf(got[i]), std::isinf(want[i])) << "vocab " << vocab << " at " << i;
      if (!std::isinf(want[i])) {
        ASSERT_EQ(got[i], want[i]) << "vocab " << vocab << " at " << i;
      }
    }
  }
}

TEST(TokenBitmaskTest, RefusesBadArguments) {
  BEACON_REQUIRE_CUDA_DEVICE();
  DeviceBuffer<float> d_logits(64);
  DeviceBuffer<uint32_t> d_masks(2);
  EXPECT_EQ(LaunchApplyTokenBitmask(nullptr, 1, 64, d_masks.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchApplyTokenBitmask(d_logits.get(), 1, 64, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchApplyTokenBitmask(d_logits.get(), -1, 64, d_masks.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchApplyTokenBitmask(d_logits.get(), 1, 0, d_masks.get(), nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(LaunchApplyTokenBitmask(d_logits.get(), 0, 64, d_masks.get(), nullptr), cudaSuccess);
}

}  // namespace
}  // namespace beacon
