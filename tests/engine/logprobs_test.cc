// LogprobsAt against a naive long-double log-softmax: values, ranks, the
// top list's order and ties, temperature scaling, NaN / -inf / huge logits.
#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace beacon {
namespace {

// log p_i = x_i - log sum_j exp(x_j), summed in long double without the
// max trick (the logits here are moderate), so it shares no code path.
std::vector<long double> NaiveLogSoftmax(const std::vector<float>& x, float inv_t) {
  long double z = 0;
  for (float v : x) z += std::exp(static_cast<long double>(v) * inv_t);
  std::vector<long double> out;
  for (float v : x) out.push_back(static_cast<long double>(v) * inv_t - std::log(z));
  return out;
}

std::vector<float> RandomLogits(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

TEST(LogprobsAtTest, MatchesNaiveLogSoftmaxRankAndTop) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    const std::vector<float> x = RandomLogits(5000, seed);
    const std::vector<long double> ref = NaiveLogSoftmax(x, 1.0f);
    for (int32_t id : {0, 17, 4999}) {
      const PositionLogprobs lp = LogprobsAt(x, 1.0f, id, 20);
      EXPECT_EQ(lp.id, id);
      EXPECT_NEAR(lp.logprob, static_cast<double>(ref[id]), 1e-5);
      const int32_t above = static_cast<int32_t>(std::count_if(x.begin(), x.end(), [&](float v) { return v > x[id]; }));
      EXPECT_EQ(lp.rank, above + 1);
      ASSERT_EQ(lp.top.size(), 20u);
      std::vector<int32_t> order(x.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
      for (size_t k = 0; k < 20; ++k) {
        EXPECT_EQ(lp.top[k].id, order[k]) << "position " << k;
        EXPECT_NEAR(lp.top[k].logprob, static_cast<double>(ref[order[k]]), 1e-5);
      }
    }
  }
}

TEST(LogprobsAtTest, TemperatureScalesTheLogits) {
  const std::vector<float> x = RandomLogits(300, 9);
  const std::vector<long double> ref = NaiveLogSoftmax(x, 1.0f / 0.7f);
  const PositionLogprobs lp = LogprobsAt(x, 1.0f / 0.7f, 5, 3);
  EXPECT_NEAR(lp.logprob, static_cast<double>(ref[5]), 1e-5);
  for (const TokenLogprob& t : lp.top) EXPECT_NEAR(t.logprob, static_cast<double>(ref[t.id]), 1e-5);
}

TEST(LogprobsAtTest, TiesGoToTheLowerIdAndShareTheRank) {
  const std::vector<float> x(10, 2.5f);
  const PositionLogprobs lp = LogprobsAt(x, 1.0f, 7, 4);
  EXPECT_NEAR(lp.logprob, -std::log(10.0), 1e-6);
  EXPECT_EQ(lp.rank, 1);
  ASSERT_EQ(lp.top.size(), 4u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(lp.top[k].id, k);
}

TEST(LogprobsAtTest, NanAndMinusInfinityAreExcludedHugeLogitsDoNotOverflow) {
  std::vector<float> x = {1e30f, 1e30f - 1e24f, std::nanf(""), -std::numeric_limits<float>::infinity(), 0.0f};
  const PositionLogprobs nan = LogprobsAt(x, 1.0f, 2, 5);
  EXPECT_TRUE(std::isinf(nan.logprob) && nan.logprob < 0) << nan.logprob;
  EXPECT_EQ(nan.rank, 4);  // below the two huge ones and 0
  const PositionLogprobs top = LogprobsAt(x, 1.0f, 0, 2);
  EXPECT_NEAR(top.logprob, 0.0, 1e-6);  // 1e24 ahead of the next: all the mass
  EXPECT_TRUE(std::isfinite(top.top[1].logprob));
  // Every logit -inf: no finite distribution; the tied maximum shares it.
  const std::vector<float> dead(4, -std::numeric_limits<float>::infinity());
  EXPECT_NEAR(LogprobsAt(dead, 1.0f, 1, 0).logprob, -std::log(4.0), 1e-6);
}

TEST(LogprobsAtTest, TopIsCappedByTheVocabularyAndTheLimit) {
  const std::vector<float> x = RandomLogits(5, 4);
  EXPECT_EQ(LogprobsAt(x, 1.0f, 0, 20).top.size(), 5u);
  EXPECT_EQ(LogprobsAt(x, 1.0f, 0, 0).top.size(), 0u);
  const std::vector<float> big = RandomLogits(100, 4);
  EXPECT_EQ(LogprobsAt(big, 1.0f, 0, 1000).top.size(), static_cast<size_t>(kMaxTopLogprobs));
}

TEST(LogprobsModeTest, ParsesTheFlagValuesAndNamesABadOne) {
  EXPECT_EQ(*ParseLogprobsMode("raw"), LogprobsMode::kRaw);
  EXPECT_EQ(*ParseLogprobsMode("processed"), LogprobsMode::kProcessed);
  const absl::StatusOr<LogprobsMode> bad = ParseLogprobsMode("logits");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'logits'"), std::string::npos);
  EXPECT_EQ(LogprobsModeName(LogprobsMode::kProcessed), "processed");
}

}  // namespace
}  // namespace beacon
