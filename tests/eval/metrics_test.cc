// The fidelity metrics' arithmetic on hand-computed cases.
#include "eval/metrics.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace beacon::eval {
namespace {

TEST(KlDivergenceTest, IdenticalDistributionsHaveZeroKl) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 4.0f);
  std::vector<float> x(49152);
  for (float& v : x) v = n(rng);
  EXPECT_EQ(KlDivergence(x, x), 0.0);
}

TEST(KlDivergenceTest, MatchesAHandComputedPair) {
  // p = softmax(0, ln 3) = (1/4, 3/4); q = softmax(0, 0) = (1/2, 1/2).
  const std::vector<float> p = {0.0f, std::log(3.0f)};
  const std::vector<float> q = {0.0f, 0.0f};
  const double want_pq = 0.25 * std::log(0.25 / 0.5) + 0.75 * std::log(0.75 / 0.5);  // 0.130812
  const double want_qp = 0.5 * std::log(0.5 / 0.25) + 0.5 * std::log(0.5 / 0.75);    // 0.143841
  EXPECT_NEAR(KlDivergence(p, q), want_pq, 1e-7);
  EXPECT_NEAR(KlDivergence(q, p), want_qp, 1e-7);  // KL is not symmetric
  EXPECT_NEAR(want_pq, 0.130812, 1e-6);
}

TEST(KlDivergenceTest, ThreeWayCaseAndShiftInvariance) {
  // p = (0.7, 0.2, 0.1), q = (0.1, 0.3, 0.6), as logits with arbitrary shifts.
  const std::vector<float> p = {std::log(0.7f) + 5.0f, std::log(0.2f) + 5.0f, std::log(0.1f) + 5.0f};
  const std::vector<float> q = {std::log(0.1f) - 3.0f, std::log(0.3f) - 3.0f, std::log(0.6f) - 3.0f};
  const double want = 0.7 * std::log(7.0) + 0.2 * std::log(0.2 / 0.3) + 0.1 * std::log(0.1 / 0.6);  // 1.1035
  EXPECT_NEAR(KlDivergence(p, q), want, 1e-6);
}

TEST(KlDivergenceTest, StableForHugeLogitsAndVanishingMass) {
  // exp(1000) overflows a double; the shifted form must not. p puts all its
  // mass on token 0; q puts e^-40 on it: KL = -log q_0 = 40 (to ~1e-17).
  const std::vector<float> p = {1000.0f, 0.0f};
  const std::vector<float> q = {1000.0f, 1040.0f};
  const double kl = KlDivergence(p, q);
  EXPECT_TRUE(std::isfinite(kl));
  EXPECT_NEAR(kl, 40.0, 1e-9);
}

TEST(KlDivergenceTest, SharedReferenceMatchesOneShot) {
  const std::vector<float> p = {1.0f, -2.0f, 0.5f, 3.0f};
  const std::vector<float> q = {0.0f, 1.0f, 2.0f, -1.0f};
  SoftmaxRef ref;
  ref.Set(p);
  EXPECT_DOUBLE_EQ(ref.KlTo(q), KlDivergence(p, q));
  double sum = 0.0;
  for (double v : ref.p) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-15);
  EXPECT_NEAR(LogSumExp(p), std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(0.5) + std::exp(3.0)), 1e-12);
}

TEST(ArgMaxTest, TiesGoToTheLowestIndex) {
  EXPECT_EQ(ArgMax(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(ArgMax(std::vector<float>{-1.0f}), 0);
}

TEST(MassOnPositionsTest, SumsTheKeptPositionsOnly) {
  const std::vector<float> probs = {0.1f, 0.2f, 0.3f, 0.4f};
  EXPECT_NEAR(MassOnPositions(probs, std::vector<int32_t>{0, 3}), 0.5, 1e-7);
  EXPECT_NEAR(MassOnPositions(probs, std::vector<int32_t>{0, 1, 2, 3}), 1.0, 1e-7);
  // Positions the reference never saw (or -1, an unwritten slot) add nothing.
  EXPECT_NEAR(MassOnPositions(probs, std::vector<int32_t>{2, 4, -1}), 0.3, 1e-7);
  EXPECT_EQ(MassOnPositions(probs, std::vector<int32_t>{}), 0.0);
}

TEST(LeadingAgreementTest, CountsTheCommonPrefix) {
  EXPECT_EQ(LeadingAgreement(std::vector<uint8_t>{1, 1, 0, 1, 1}), 2);
  EXPECT_EQ(LeadingAgreement(std::vector<uint8_t>{0, 1}), 0);
  EXPECT_EQ(LeadingAgreement(std::vector<uint8_t>{1, 1, 1}), 3);
  EXPECT_EQ(LeadingAgreement(std::vector<uint8_t>{}), 0);
}

TEST(MeanTest, AveragesAndMerges) {
  Mean a, b;
  EXPECT_EQ(a.value(), 0.0);
  a.Add(1.0);
  a.Add(2.0);
  b.Add(6.0);
  a.Merge(b);
  EXPECT_EQ(a.count(), 3);
  EXPECT_DOUBLE_EQ(a.value(), 3.0);
}

}  // namespace
}  // namespace beacon::eval
