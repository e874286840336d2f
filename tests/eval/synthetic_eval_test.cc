// The synthetic evaluation's invariants: a budget that never evicts recalls
// everything; compression never reports more than that; peaks follow the
// compressor's bound; StreamingLLM, which keeps only sinks, prompt and the
// recent window, can hold none of the plan span at the end.
#include "eval/synthetic_eval.h"

#include "gtest/gtest.h"
#include "kv/policy/sequence_compressor.h"

namespace beacon::eval {
namespace {

SyntheticEvalOptions SmallRun() {
  SyntheticEvalOptions o;
  o.policies = {"streaming", "h2o", "snapkv", "rkv", "random", "beacon"};
  o.budgets = {64, 4096};
  o.traces = 1;
  o.trace.middle_len = 700;
  return o;
}

TEST(SyntheticEvalTest, NoEvictionMeansFullRecallAndCompressionLess) {
  const SyntheticEvalOptions o = SmallRun();
  absl::StatusOr<std::vector<SyntheticResult>> r = RunSyntheticEval(o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 12u);
  for (const SyntheticResult& x : *r) {
    SCOPED_TRACE(x.policy + "@" + std::to_string(x.budget));
    EXPECT_GT(x.revisit_queries, 0);
    EXPECT_GE(x.revisit_recall, 0.0);
    EXPECT_LE(x.revisit_recall, 1.0 + 1e-6);
    if (x.budget == 4096) {
      EXPECT_EQ(x.evictions, 0.0);
      EXPECT_NEAR(x.revisit_recall, 1.0, 1e-5);
      EXPECT_NEAR(x.all_recall, 1.0, 1e-5);
      EXPECT_EQ(x.plan_kept_end, 1.0);
      EXPECT_EQ(x.peak_slots, o.trace.n_tokens());
    } else {
      EXPECT_GT(x.evictions, 0.0);
      EXPECT_LT(x.all_recall, 1.0);
      KvPolicyOptions po = *KvPolicyOptions::DefaultsForName(x.policy);
      po.budget = x.budget;
      po.interval = o.interval;
      EXPECT_LE(x.peak_slots, SequenceCompressor::PeakSlots(po, o.trace.prompt_len, o.trace.middle_len));
    }
    if (x.policy == "streaming" && x.budget == 64) {
      EXPECT_EQ(x.plan_kept_end, 0.0);
    }
  }
}

TEST(SyntheticEvalTest, RejectsTheReferenceAsAPolicy) {
  SyntheticEvalOptions o = SmallRun();
  o.policies = {"full"};
  EXPECT_EQ(RunSyntheticEval(o, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace beacon::eval
