// logit_bias and banned tokens in the sampler: what they do to the draw, the
// processed logits kept for logprobs, and the range check.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampler.h"
#include "gtest/gtest.h"

namespace beacon {
namespace {

std::vector<float> Logits(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

SamplingParams Params(float temperature, uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

TEST(SamplerBiasTest, PlusHundredForcesAndMinusHundredAvoids) {
  const std::vector<float> x = Logits(200, 1);
  SamplingParams p = Params(1.0f, 7);
  p.logit_bias = {{123, 100.0f}};
  Sampler forced(p);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(forced.Sample(x, {}, {}), 123);

  // Greedy's argmax, biased away, is never drawn; the draw then differs.
  Sampler greedy(Params(0.0f, 1));
  const int32_t best = greedy.Sample(x, {}, {});
  SamplingParams q = Params(0.0f, 1);
  q.logit_bias = {{best, -100.0f}};
  Sampler avoid(q);
  EXPECT_NE(avoid.Sample(x, {}, {}), best);
}

TEST(SamplerBiasTest, BannedTokensAreNeverDrawnWhileAnyOtherIsLeft) {
  const std::vector<float> x = Logits(8, 2);
  const std::vector<int32_t> banned = {0, 1, 2, 3, 4, 5, 6};
  Sampler s(Params(1.0f, 3));
  for (int i = 0; i < 500; ++i) EXPECT_EQ(s.Sample(x, {}, {}, banned), 7);
  // A ban outlives a +100 bias: bans come last.
  SamplingParams p = Params(0.0f, 1);
  p.logit_bias = {{2, 100.0f}};
  Sampler biased(p);
  const std::vector<int32_t> ban2 = {2};
  EXPECT_NE(biased.Sample(x, {}, {}, ban2), 2);
}

TEST(SamplerBiasTest, ProcessedLogitsHoldBiasPenaltiesAndBans) {
  const std::vector<float> x = Logits(16, 4);
  SamplingParams p = Params(0.8f, 5);
  p.logit_bias = {{3, 2.5f}};
  p.frequency_penalty = 0.5f;
  Sampler s(p);
  EXPECT_TRUE(s.modifies_logits());
  s.set_keep_processed(true);
  const std::vector<int32_t> generated = {9, 9};
  const std::vector<int32_t> banned = {11};
  s.Sample(x, {}, generated, banned);
  const std::span<const float> out = s.processed();
  ASSERT_EQ(out.size(), x.size());
  EXPECT_FLOAT_EQ(out[3], x[3] + 2.5f);
  EXPECT_FLOAT_EQ(out[9], x[9] - 2 * 0.5f);  // frequency 0.5 x count 2, no presence
  EXPECT_TRUE(std::isinf(out[11]) && out[11] < 0);
  EXPECT_FLOAT_EQ(out[0], x[0]);  // untouched; temperature not applied
  Sampler plain(Params(1.0f, 5));
  EXPECT_FALSE(plain.modifies_logits());
  plain.Sample(x, {}, {});
  EXPECT_TRUE(plain.processed().empty());  // not kept unless asked
}

TEST(SamplerBiasTest, BiasOutsideTheRangeIsRefusedByName) {
  SamplingParams p;
  p.logit_bias = {{5, 100.5f}};
  const absl::Status s = p.Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("logit_bias"), std::string::npos) << s;
  EXPECT_NE(s.message().find("token 5"), std::string::npos) << s;
  p.logit_bias = {{5, std::nanf("")}};
  EXPECT_FALSE(p.Validate().ok());
}

TEST(SamplerBiasTest, GrammarMaskAllowsOnlyItsTokens) {
  // 70 tokens: the mask's third word is partial. Allowed: 3, 40 and 65;
  // token 10 has the best logit but is not allowed.
  std::vector<float> x(70, 0.0f);
  x[10] = 9.0f;
  x[40] = 2.0f;
  x[65] = 1.0f;
  std::vector<uint32_t> mask(3, 0u);
  for (int t : {3, 40, 65}) mask[t / 32] |= 1u << (t % 32);
  Sampler greedy(Params(0.0f, 1));
  EXPECT_EQ(greedy.Sample(x, {}, {}, {}, mask), 40);
  // A ban applies with the mask: 40 banned leaves 65 the best allowed.
  const std::vector<int32_t> banned = {40};
  EXPECT_EQ(greedy.Sample(x, {}, {}, banned, mask), 65);
  Sampler hot(Params(2.0f, 3));
  for (int i = 0; i < 500; ++i) {
    const int32_t t = hot.Sample(x, {}, {}, {}, mask);
    EXPECT_TRUE(t == 3 || t == 40 || t == 65) << t;
  }
  // A mask shorter than the vocabulary allows nothing past its end.
  const std::vector<uint32_t> short_mask = {0u, 1u << 8};  // token 40 only
  EXPECT_EQ(greedy.Sample(x, {}, {}, {}, short_mask), 40);
}

}  // namespace
}  // namespace beacon
