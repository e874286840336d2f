// beacon-eval needle: case construction (deterministic, the fact never in
// the prompt), answer scoring, the intervals, the eviction prediction, the
// summary arithmetic on hand-made results, and a small run on the real
// default model whose full-cache calibration must be self-consistent.
#include "eval/needle.h"

#include <cctype>
#include <filesystem>
#include <set>

#include "engine/runtime.h"
#include "eval/bootstrap.h"
#include "eval/needle_cases.h"
#include "eval/needle_passes.h"
#include "eval/needle_report.h"
#include "gtest/gtest.h"

namespace beacon::eval {
namespace {

TEST(NeedleCaseTest, DeterministicUnderASeed) {
  for (int32_t id = 0; id < 30; ++id) {
    const NeedleCase a = MakeNeedleCase(7, id), b = MakeNeedleCase(7, id);
    EXPECT_EQ(a.answer, b.answer);
    EXPECT_EQ(a.prompt, b.prompt);
    EXPECT_EQ(a.fact, b.fact);
    EXPECT_EQ(a.cue, b.cue);
    EXPECT_EQ(a.filler_seed, b.filler_seed);
  }
  // Another seed draws other cases (not all 30 answers can coincide).
  int same = 0;
  for (int32_t id = 0; id < 30; ++id) same += MakeNeedleCase(7, id).answer == MakeNeedleCase(8, id).answer;
  EXPECT_LT(same, 5);
}

TEST(NeedleCaseTest, TheFactIsInThePassageNeverInThePromptOrCue) {
  std::set<std::string> answers;
  for (int32_t id = 0; id < 60; ++id) {
    const NeedleCase c = MakeNeedleCase(1, id);
    SCOPED_TRACE(c.fact);
    ASSERT_FALSE(c.answer.empty());
    answers.insert(c.answer);
    EXPECT_EQ(c.kind, static_cast<FactKind>(id % 3));
    EXPECT_EQ(c.prompt.find(c.answer), std::string::npos);
    EXPECT_EQ(c.cue.find(c.answer), std::string::npos);
    EXPECT_NE(c.fact.find(c.answer), std::string::npos);
    switch (c.kind) {
      case FactKind::kNumber:
        ASSERT_EQ(c.answer.size(), 4u);
        EXPECT_NE(c.answer[0], '0');
        for (char ch : c.answer) EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(ch)));
        break;
      case FactKind::kCode:
        ASSERT_EQ(c.answer.size(), 4u);
        for (int i = 0; i < 4; ++i) {
          const unsigned char ch = c.answer[i];
          EXPECT_TRUE(i % 2 == 0 ? std::isupper(ch) : std::isdigit(ch));
          EXPECT_EQ(std::string("IO01").find(ch), std::string::npos);
        }
        break;
      case FactKind::kName: EXPECT_NE(c.answer.find(' '), std::string::npos); break;
    }
  }
  EXPECT_GT(answers.size(), 50u);  // drawn, not constant
}

TEST(AnswerMatchesTest, PrefixWithAWordBoundary) {
  EXPECT_TRUE(AnswerMatches(" 4827", "4827"));
  EXPECT_TRUE(AnswerMatches(" 4827.", "4827"));
  EXPECT_TRUE(AnswerMatches("\n\t 4827\nThe", "4827"));
  EXPECT_TRUE(AnswerMatches(" Mara Lindqvist, who", "Mara Lindqvist"));
  EXPECT_TRUE(AnswerMatches(" Mara Lindqvist's", "Mara Lindqvist"));
  EXPECT_FALSE(AnswerMatches(" 48271", "4827"));  // a longer number
  EXPECT_FALSE(AnswerMatches(" Mara Lindqvists", "Mara Lindqvist"));
  EXPECT_FALSE(AnswerMatches(" k7q2", "K7Q2"));           // case-sensitive
  EXPECT_FALSE(AnswerMatches(" K7Q", "K7Q2"));            // cut short
  EXPECT_FALSE(AnswerMatches(" the code K7Q2", "K7Q2"));  // must come first
  EXPECT_FALSE(AnswerMatches("", "K7Q2"));
  EXPECT_FALSE(AnswerMatches(" K7Q2", ""));
}

TEST(BootstrapTest, KnownCases) {
  const std::vector<double> ones(20, 1.0);
  const Interval all = BootstrapMeanInterval(ones, 500, 1);
  EXPECT_EQ(all.lo, 1.0);
  EXPECT_EQ(all.hi, 1.0);
  // Two cases, 0 and 1: resampled means are 0, 1/2, 1 with probability
  // 1/4, 1/2, 1/4, so the central 95% spans all of [0, 1].
  const Interval two = BootstrapMeanInterval(std::vector<double>{0.0, 1.0}, 4000, 3);
  EXPECT_EQ(two.lo, 0.0);
  EXPECT_EQ(two.hi, 1.0);
  // 50 of 100: the mean's sd is 0.05, so about 0.5 -/+ 1.96 * 0.05.
  std::vector<double> half(100, 0.0);
  for (int i = 0; i < 50; ++i) half[i] = 1.0;
  const Interval h = BootstrapMeanInterval(half, 4000, 5);
  EXPECT_NEAR(h.lo, 0.40, 0.015);
  EXPECT_NEAR(h.hi, 0.60, 0.015);
  const Interval again = BootstrapMeanInterval(half, 4000, 5);  // seeded
  EXPECT_EQ(h.lo, again.lo);
  EXPECT_EQ(h.hi, again.hi);
}

TEST(BootstrapTest, WilsonKnownValues) {
  // 0 of 10: upper end z^2 / (n + z^2).
  const double z2 = 1.959963984540054 * 1.959963984540054;
  const Interval none = WilsonInterval(0, 10);
  EXPECT_EQ(none.lo, 0.0);
  EXPECT_NEAR(none.hi, z2 / (10 + z2), 1e-12);
  const Interval all = WilsonInterval(10, 10);
  EXPECT_NEAR(all.lo, 10 / (10 + z2), 1e-12);
  EXPECT_NEAR(all.hi, 1.0, 1e-12);
  const Interval mid = WilsonInterval(5, 10);
  EXPECT_NEAR(mid.lo + mid.hi, 1.0, 1e-12);  // symmetric about 1/2
  EXPECT_NEAR(mid.lo, 0.2366, 1e-4);
}

TEST(NeedlePassesTest, EvictionPrediction) {
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kStreaming);
  o.budget = 64;
  o.interval = 128;
  // Bound 10 + 64 = 74; the first eviction comes when the cache holds
  // bound + interval = 202 slots, i.e. after step 192.
  EXPECT_FALSE(EvictsBeforeLastStep(o, 10, 150));
  EXPECT_FALSE(EvictsBeforeLastStep(o, 10, 192));
  EXPECT_TRUE(EvictsBeforeLastStep(o, 10, 300));
  EXPECT_FALSE(EvictsBeforeLastStep(KvPolicyOptions(), 10, 100000));  // full
}

NeedleCaseResult Kept(int32_t id, int32_t d, std::vector<std::tuple<std::string, int32_t, bool, int64_t>> rows) {
  NeedleCaseResult r;
  r.id = id;
  r.distance = d;
  r.kept = true;
  r.status = "kept";
  for (const auto& [p, b, ok, ev] : rows) r.rows.push_back(NeedleRow{p, b, ok, ok ? "x" : "y", ev, 0, ev > 0});
  return r;
}

TEST(NeedleReportTest, CellsCalibrationAndPairedComparison) {
  std::vector<NeedleCaseResult> results;
  // D=100: 4 kept cases; beacon right on all, h2o on two; random never evicts.
  for (int i = 0; i < 4; ++i) {
    results.push_back(
        Kept(i, 100, {{"full", 0, true, 0}, {"h2o", 64, i < 2, 2}, {"beacon", 64, true, 2}, {"random", 64, true, 0}}));
  }
  NeedleCaseResult wrong;
  wrong.id = 4;
  wrong.distance = 100;
  wrong.status = "full cache wrong";
  results.push_back(wrong);
  const NeedleSummary s = SummarizeNeedle(results, {100}, 1000, 1);
  ASSERT_EQ(s.calibration.size(), 1u);
  EXPECT_EQ(s.calibration[0].tried, 5);
  EXPECT_EQ(s.calibration[0].kept, 4);
  EXPECT_EQ(s.calibration[0].full_wrong, 1);
  ASSERT_EQ(s.cells.size(), 4u);
  EXPECT_EQ(s.cells[0].policy, "full");
  EXPECT_EQ(s.cells[0].rate, 1.0);
  EXPECT_EQ(s.cells[1].policy, "h2o");
  EXPECT_EQ(s.cells[1].cases, 4);
  EXPECT_EQ(s.cells[1].successes, 2);
  EXPECT_DOUBLE_EQ(s.cells[1].rate, 0.5);
  EXPECT_DOUBLE_EQ(s.cells[1].mean_evictions, 2.0);
  ASSERT_EQ(s.comparisons.size(), 2u);
  EXPECT_EQ(s.comparisons[0].other, "h2o");
  EXPECT_DOUBLE_EQ(s.comparisons[0].difference, 0.5);
  // Differences {0, 0, 1, 1}: a resample of four zeros has probability
  // 1/16 > 2.5%, so the interval's low end is 0.
  EXPECT_EQ(s.comparisons[0].bootstrap.lo, 0.0);
  EXPECT_EQ(s.comparisons[0].verdict, "ties");
  EXPECT_EQ(s.comparisons[1].other, "random");
  EXPECT_EQ(s.comparisons[1].verdict, "ties");  // beacon evicted, random did not: not "= full"
  const std::string md = NeedleMarkdown(s, "# t\n");
  EXPECT_NE(md.find("| random@64 | = full (4/4) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| h2o@64 | 0.50 ["), std::string::npos) << md;
  EXPECT_EQ(NeedleRawTable(results).rows().size(), 16u);
}

TEST(NeedleOptionsTest, BadOptionsFailWithTheFieldNamed) {
  NeedleOptions o;
  o.policies = {"beacon"};
  o.budgets = {64};
  o.distances = {256};
  EXPECT_TRUE(ValidateNeedleOptions(o).ok());
  NeedleOptions bad = o;
  bad.distances = {};
  EXPECT_NE(ValidateNeedleOptions(bad).message().find("distances"), std::string::npos);
  bad = o;
  bad.distances = {0};
  EXPECT_NE(ValidateNeedleOptions(bad).message().find("distances"), std::string::npos);
  bad = o;
  bad.policies = {"bogus"};
  EXPECT_NE(ValidateNeedleOptions(bad).message().find("policies"), std::string::npos);
  bad = o;
  bad.cases = 0;
  EXPECT_NE(ValidateNeedleOptions(bad).message().find("cases"), std::string::npos);
}

// Two cases at a short distance on the real model, full cache plus one
// policy that must evict: every kept case's full cache scores 1, the batch's
// full cache repeats pass 1 token for token, and the policy really evicted.
TEST(NeedleModelTest, CalibrationIsConsistentOnTheDefaultModel) {
  if (!std::filesystem::exists(BEACON_MODEL_PATH)) GTEST_SKIP() << "no model at " << BEACON_MODEL_PATH;
  RuntimeOptions ro;
  ro.model = BEACON_MODEL_PATH;
  ro.threads = 2;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(ro);
  ASSERT_TRUE(rt.ok()) << rt.status();
  NeedleOptions o;
  o.policies = {"streaming"};
  o.budgets = {40};
  o.interval = 8;
  o.distances = {48};
  o.cases = 2;
  std::vector<NeedleCaseResult> results;
  ASSERT_TRUE(RunNeedleEval(rt->get(), o, stderr, [&](const NeedleCaseResult& r) { results.push_back(r); }).ok());
  ASSERT_EQ(results.size(), 2u);
  int kept = 0;
  for (const NeedleCaseResult& r : results) {
    SCOPED_TRACE(r.answer + " / full said: " + r.full_text);
    EXPECT_EQ(r.status == "kept", r.kept);
    EXPECT_EQ(AnswerMatches(r.full_text, r.answer), r.kept || r.status == "filler restates the answer");
    EXPECT_FALSE(r.filler_text.empty());
    if (!r.kept) {
      EXPECT_TRUE(r.rows.empty());
      continue;
    }
    ++kept;
    EXPECT_TRUE(r.full_consistent);
    ASSERT_EQ(r.rows.size(), 2u);
    EXPECT_EQ(r.rows[0].policy, "full");
    EXPECT_TRUE(r.rows[0].success);
    EXPECT_EQ(r.rows[0].generated, r.full_text);
    EXPECT_EQ(r.rows[1].policy, "streaming");
    EXPECT_TRUE(r.rows[1].ran);
    EXPECT_GT(r.rows[1].evictions, 0);
  }
  // The calibration must keep something for the run to measure anything.
  EXPECT_GT(kept, 0);
  const NeedleSummary s = SummarizeNeedle(results, o.distances, 200, 1);
  ASSERT_FALSE(s.cells.empty());
  EXPECT_EQ(s.cells[0].policy, "full");
  EXPECT_EQ(s.cells[0].rate, 1.0);
  EXPECT_EQ(s.calibration[0].inconsistent, 0);
}

}  // namespace
}  // namespace beacon::eval
