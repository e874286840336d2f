#include "engine/sampler.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

int32_t Argmax(const std::vector<float>& v) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(v.size()); ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

std::vector<double> Softmax(const std::vector<float>& logits, double temperature) {
  double m = logits[0];
  for (float x : logits) m = std::max<double>(m, x);
  std::vector<double> p(logits.size());
  double z = 0;
  for (size_t i = 0; i < logits.size(); ++i) z += p[i] = std::exp((logits[i] - m) / temperature);
  for (double& x : p) x /= z;
  return p;
}

std::vector<float> RandomLogits(size_t n, uint64_t seed, float scale = 3.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

SamplingParams Seeded(float temperature, uint64_t seed = 1234) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

// Counts how often each token is drawn in `draws` calls.
std::vector<int> Histogram(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    const int32_t t = s.Sample(logits, {}, {});
    EXPECT_GE(t, 0);
    EXPECT_LT(t, static_cast<int32_t>(logits.size()));
    if (t >= 0 && t < static_cast<int32_t>(logits.size())) ++counts[t];
  }
  return counts;
}

TEST(SamplingParamsTest, DefaultsAreValid) { EXPECT_TRUE(SamplingParams{}.Validate().ok()); }

TEST(SamplingParamsTest, ErrorsNameTheField) {
  struct Case {
    const char* field;
    void (*set)(SamplingParams&);
  };
  const Case cases[] = {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.5f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = 101.0f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = NAN; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -1; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.5f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.1f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.1f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 11.0f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.5f; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -3.0f; }},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    const absl::Status s = p.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(s.message(), HasSubstr(c.field));
  }
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_THAT(p.Validate().message(), HasSubstr("1.5"));  // the value is named too

  // Boundaries are inclusive where the ranges say so.
  SamplingParams edge;
  edge.temperature = 100.0f;
  edge.top_p = 1.0f;
  edge.min_p = 1.0f;
  edge.repetition_penalty = 10.0f;
  edge.presence_penalty = -2.0f;
  edge.frequency_penalty = 2.0f;
  EXPECT_TRUE(edge.Validate().ok());
}

TEST(SamplerTest, GreedyIsArgmaxWithTiesToLowestId) {
  Sampler s(SamplingParams{});  // temperature 0
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> logits = RandomLogits(1000, seed);
    EXPECT_EQ(s.Sample(logits, {}, {}), Argmax(logits));
  }
  std::vector<float> tied = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f};
  EXPECT_EQ(s.Sample(tied, {}, {}), 1);
  std::vector<float> nan_first = {NAN, 1.0f, 3.0f};
  EXPECT_EQ(s.Sample(nan_first, {}, {}), 2);
}

TEST(SamplerTest, SameSeedSameSequenceDifferentSeedDifferent) {
  const std::vector<float> logits = RandomLogits(500, 7, 1.0f);
  Sampler a(Seeded(1.0f, 42)), b(Seeded(1.0f, 42)), c(Seeded(1.0f, 43));
  std::vector<int32_t> da, db, dc;
  for (int i = 0; i < 1000; ++i) {
    da.push_back(a.Sample(logits, {}, {}));
    db.push_back(b.Sample(logits, {}, {}));
    dc.push_back(c.Sample(logits, {}, {}));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
}

// Pearson's chi-square over 200k draws at temperature 1. With 31 degrees of
// freedom the 1e-6 upper quantile is about 84; the draws are deterministic
// given the seed, so this cannot flake, and a wrong distribution (e.g. the
// logits used unnormalised, or the wrong temperature) gives values in the
// thousands.
TEST(SamplerTest, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = RandomLogits(32, 99, 1.0f);
  for (float temperature : {1.0f, 0.5f}) {
    Sampler s(Seeded(temperature, 2024));
    constexpr int kDraws = 200000;
    const std::vector<int> counts = Histogram(s, logits, kDraws);
    const std::vector<double> p = Softmax(logits, temperature);
    double chi2 = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      const double expected = p[i] * kDraws;
      chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    }
    EXPECT_LT(chi2, 84.0) << "temperature " << temperature;
  }
}

TEST(SamplerTest, TopKOneIsGreedy) {
  SamplingParams p = Seeded(1.5f);
  p.top_k = 1;
  Sampler s(p);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const std::vector<float> logits = RandomLogits(2000, seed, 0.1f);
    EXPECT_EQ(s.Sample(logits, {}, {}), Argmax(logits));
  }
  std::vector<float> tied = {1.0f, 3.0f, 3.0f, 0.0f};
  EXPECT_EQ(s.Sample(tied, {}, {}), 1);
}

TEST(SamplerTest, TopKDrawsOnlyFromTheKBest) {
  SamplingParams p = Seeded(1.0f);
  p.top_k = 3;
  Sampler s(p);
  const std::vector<float> logits = {0.0f, 1.0f, 5.0f, 2.0f, 4.0f, 3.0f, 0.5f, 4.5f};
  const std::vector<int> counts = Histogram(s, logits, 20000);
  for (int t : {0, 1, 3, 5, 6}) EXPECT_EQ(counts[t], 0) << "token " << t;
  for (int t : {2, 4, 7}) EXPECT_GT(counts[t], 0) << "token " << t;
}

TEST(SamplerTest, TinyTopPIsArgmax) {
  SamplingParams p = Seeded(1.0f);
  p.top_p = 1e-6f;
  Sampler s(p);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    // A flat distribution over a large vocabulary exercises the growing
    // partially sorted prefix.
    const std::vector<float> logits = RandomLogits(20000, seed, 0.01f);
    EXPECT_EQ(s.Sample(logits, {}, {}), Argmax(logits));
  }
}

// Weights 2, 8, 1, 4, e^-5 over 15.007: probabilities 0.533, 0.267, 0.133,
// 0.067, 0.0004 (in a scrambled order). top_p 0.7 keeps exactly the best two
// (0.80 >= 0.7); top_p 0.85 needs a third (0.93).
TEST(SamplerTest, TopPKeepsTheSmallestNucleus) {
  const float l = std::log(2.0f);
  const std::vector<float> logits = {1 * l, 3 * l, 0 * l, 2 * l, -5.0f};
  struct Case {
    float top_p;
    std::vector<int> allowed;
  };
  for (const Case& c : {Case{0.7f, {1, 3}}, Case{0.85f, {0, 1, 3}}}) {
    SamplingParams p = Seeded(1.0f);
    p.top_p = c.top_p;
    Sampler s(p);
    const std::vector<int> counts = Histogram(s, logits, 20000);
    for (int t = 0; t < static_cast<int>(logits.size()); ++t) {
      const bool allowed = std::find(c.allowed.begin(), c.allowed.end(), t) != c.allowed.end();
      if (allowed) {
        EXPECT_GT(counts[t], 0) << "top_p " << c.top_p << " token " << t;
      } else {
        EXPECT_EQ(counts[t], 0) << "top_p " << c.top_p << " token " << t;
      }
    }
  }
}

// Relative probabilities exp(x - x_max): tokens at -0.5 (0.61) and -1.0 (0.37)
// pass min_p 0.3; tokens at -1.5 (0.22) and -3 (0.05) do not.
TEST(SamplerTest, MinPFiltersExactlyTheTokensBelowTheThreshold) {
  const std::vector<float> logits = {-1.5f, 0.0f, -0.5f, -3.0f, -1.0f, -1.5f};
  SamplingParams p = Seeded(1.0f);
  p.min_p = 0.3f;
  Sampler s(p);
  const std::vector<int> counts = Histogram(s, logits, 50000);
  for (int t : {0, 3, 5}) EXPECT_EQ(counts[t], 0) << "token " << t;
  for (int t : {1, 2, 4}) EXPECT_GT(counts[t], 1000) << "token " << t;
  // The survivors keep their softmax proportions (renormalised).
  EXPECT_NEAR(static_cast<double>(counts[2]) / counts[1], std::exp(-0.5), 0.03);

  // Combined with top-p, the stricter filter wins.
  p.top_p = 0.99f;
  Sampler both(p);
  const std::vector<int> c2 = Histogram(both, logits, 20000);
  for (int t : {0, 3, 5}) EXPECT_EQ(c2[t], 0) << "token " << t;
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p;  // greedy
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  // Token 0 (3.0, seen in the prompt) becomes 1.5 < token 1 (2.0).
  const std::vector<float> pos = {3.0f, 2.0f, 0.0f};
  const std::vector<int32_t> prompt = {0, 0, 0};
  EXPECT_EQ(s.Sample(pos, prompt, {}), 1);
  // Just above the threshold it still wins: 4.1 / 2 = 2.05 > 2.0.
  const std::vector<float> pos2 = {4.1f, 2.0f, 0.0f};
  EXPECT_EQ(s.Sample(pos2, prompt, {}), 0);
  // Negative logits are multiplied: -1 * 2 = -2 < -1.5 (unseen).
  const std::vector<float> neg = {-1.0f, -1.5f};
  const std::vector<int32_t> gen = {0};
  EXPECT_EQ(s.Sample(neg, {}, gen), 1);
  // Once per token, not per occurrence: -0.6 * 2 = -1.2 > -1.5.
  const std::vector<float> neg2 = {-0.6f, -1.5f};
  const std::vector<int32_t> many = {0, 0, 0, 0};
  EXPECT_EQ(s.Sample(neg2, many, many), 0);
  // Out-of-range history ids are ignored.
  const std::vector<int32_t> bogus = {-1, 7, 1000000};
  EXPECT_EQ(s.Sample(pos, bogus, bogus), 0);
}

TEST(SamplerTest, PresencePenaltyIsOncePerGeneratedToken) {
  SamplingParams p;
  p.presence_penalty = 1.0f;
  Sampler s(p);
  const std::vector<float> logits = {5.0f, 4.5f};
  // Token 0 in the prompt only: no presence penalty (generated only).
  const std::vector<int32_t> prompt = {0, 0};
  EXPECT_EQ(s.Sample(logits, prompt, {}), 0);
  // Generated three times: 5 - 1 = 4 < 4.5, regardless of the count.
  const std::vector<int32_t> gen = {0, 0, 0};
  EXPECT_EQ(s.Sample(logits, {}, gen), 1);
  const std::vector<float> close = {5.0f, 3.9f};
  EXPECT_EQ(s.Sample(close, {}, gen), 0);  // 4 > 3.9: once, not three times
}

TEST(SamplerTest, FrequencyPenaltyScalesWithCount) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  Sampler s(p);
  const std::vector<float> logits = {5.0f, 4.2f};
  const std::vector<int32_t> once = {0};
  const std::vector<int32_t> twice = {0, 0};
  const std::vector<int32_t> both = {0, 1, 0};
  EXPECT_EQ(s.Sample(logits, {}, once), 0);   // 4.5 > 4.2
  EXPECT_EQ(s.Sample(logits, {}, twice), 1);  // 4.0 < 4.2
  EXPECT_EQ(s.Sample(logits, {}, both), 0);   // 4.0 > 4.2 - 0.5
}

TEST(SamplerTest, PenaltiesCombineInOrder) {
  // repetition first (on prompt+generated), then frequency and presence:
  // token 0: 6 / 2 = 3, then - 2*0.25 - 0.5 = 2.0; token 1 unseen: 2.1.
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.5f;
  Sampler s(p);
  const std::vector<int32_t> gen = {0, 0};
  EXPECT_EQ(s.Sample(std::vector<float>{6.0f, 2.1f}, {}, gen), 1);
  EXPECT_EQ(s.Sample(std::vector<float>{6.0f, 1.9f}, {}, gen), 0);
}

TEST(SamplerTest, LogitsAreNotModifiedAndLargeVocabWorks) {
  const std::vector<float> logits = RandomLogits(152064, 5);
  const std::vector<float> copy = logits;
  SamplingParams p = Seeded(0.8f);
  p.top_p = 0.95f;
  p.top_k = 50;
  p.repetition_penalty = 1.1f;
  Sampler s(p);
  const std::vector<int32_t> prompt = {1, 2, 3};
  for (int i = 0; i < 20; ++i) {
    const int32_t t = s.Sample(logits, prompt, {});
    ASSERT_GE(t, 0);
    ASSERT_LT(t, static_cast<int32_t>(logits.size()));
  }
  EXPECT_EQ(logits, copy);
}

TEST(SamplerTest, TinyTemperatureDoesNotOverflow) {
  // (x - max) / T underflows to zero weight instead of overflowing to inf.
  SamplingParams p = Seeded(1e-30f);
  Sampler s(p);
  const std::vector<float> logits = {1.0f, 2.0f, 1.999f};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.Sample(logits, {}, {}), 1);
}

}  // namespace
}  // namespace beacon
