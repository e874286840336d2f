// Intervals over prompts and the paired comparison's verdicts, on
// summaries built by hand so that the right answer is known.
#include "eval/model_intervals.h"

#include <cmath>

#include "gtest/gtest.h"

namespace beacon::eval {
namespace {

ModelResult Result(const std::string& policy, double kl_post, double recall_post) {
  ModelResult r;
  r.policy = policy;
  r.budget = 128;
  r.kl_post = kl_post;
  r.recall_post = recall_post;
  r.top1_post = 0.9;
  r.agreement = 100;
  return r;
}

// n prompts; beacon's KL is `gap` below h2o's on every prompt, with a
// prompt-dependent level; random equals beacon exactly.
std::vector<PromptSummary> Prompts(int n, double gap) {
  std::vector<PromptSummary> out;
  for (int i = 0; i < n; ++i) {
    const double level = 0.01 * (i + 1);
    PromptSummary p;
    p.id = "p" + std::to_string(i);
    p.results = {Result("beacon", level, 0.9 + 0.001 * i), Result("h2o", level + gap, 0.9 + 0.001 * i),
                 Result("random", level, 0.9 + 0.001 * i)};
    out.push_back(std::move(p));
  }
  return out;
}

const PairedDifference* Find(const std::vector<PairedDifference>& d, const std::string& other,
                             const std::string& metric) {
  for (const PairedDifference& x : d) {
    if (x.other == other && x.metric == metric) return &x;
  }
  return nullptr;
}

TEST(ModelIntervalsTest, MeanIntervalContainsTheMean) {
  const std::vector<PromptSummary> p = Prompts(20, 0.005);
  const MeanInterval m = PromptInterval(p, 0, IntervalMetrics()[0], 2000, 1);
  EXPECT_EQ(m.n, 20);
  EXPECT_NEAR(m.mean, 0.105, 1e-12);
  EXPECT_LT(m.ci.lo, m.mean);
  EXPECT_GT(m.ci.hi, m.mean);
  EXPECT_GT(m.ci.lo, 0.01);
  EXPECT_LT(m.ci.hi, 0.2);
}

TEST(ModelIntervalsTest, PairingSeesAConsistentGapTheMeansHide) {
  // The gap (0.005) is far inside either mean's spread over prompts, but
  // the same on every prompt: the paired difference is exactly -0.005.
  const std::vector<PairedDifference> d = CompareWithPaired(Prompts(20, 0.005), "beacon", 2000, 1);
  const PairedDifference* kl = Find(d, "h2o", "kl_post");
  ASSERT_NE(kl, nullptr);
  EXPECT_NEAR(kl->diff.mean, -0.005, 1e-12);
  EXPECT_EQ(kl->verdict, "win");  // lower KL is better
  const PairedDifference* same = Find(d, "random", "kl_post");
  ASSERT_NE(same, nullptr);
  EXPECT_EQ(same->verdict, "tie");
  EXPECT_EQ(same->diff.ci.lo, 0.0);
  // Higher recall is better: h2o's recall equals beacon's, a tie.
  EXPECT_EQ(Find(d, "h2o", "recall_post")->verdict, "tie");
  EXPECT_EQ(Find(d, "beacon", "kl_post"), nullptr);  // never against itself
}

TEST(ModelIntervalsTest, WorseIsALossAndNaNPromptsAreSkipped) {
  std::vector<PromptSummary> p = Prompts(10, -0.02);  // beacon's KL above h2o's
  p[3].results[1].kl_post = std::nan("");             // h2o never evicted on prompt 3
  const std::vector<PairedDifference> d = CompareWithPaired(p, "beacon", 500, 7);
  const PairedDifference* kl = Find(d, "h2o", "kl_post");
  ASSERT_NE(kl, nullptr);
  EXPECT_EQ(kl->diff.n, 9);
  EXPECT_EQ(kl->verdict, "lose");
  EXPECT_EQ(PromptInterval(p, 1, IntervalMetrics()[0], 500, 7).n, 9);
}

TEST(ModelIntervalsTest, NoDataIsNotAVerdict) {
  std::vector<PromptSummary> p = Prompts(3, 0.01);
  for (PromptSummary& s : p) s.results[1].kl_post = std::nan("");
  const std::vector<PairedDifference> d = CompareWithPaired(p, "beacon", 100, 1);
  EXPECT_EQ(Find(d, "h2o", "kl_post")->verdict, "-");
  EXPECT_TRUE(std::isnan(PromptInterval(p, 1, IntervalMetrics()[0], 100, 1).mean));
  EXPECT_TRUE(CompareWithPaired(p, "absent", 100, 1).empty());
}

}  // namespace
}  // namespace beacon::eval
