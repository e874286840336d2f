// The model evaluation's two passes on the real default model, briefly:
// a configuration that never evicts is indistinguishable from the full
// cache (KL exactly 0: the engine is batch-invariant), a compressing one
// evicts within its bound, and the free-running agreement measured in
// pass 1 equals the one derived from the teacher-forced replay.
#include "eval/model_eval.h"

#include <filesystem>

#include "engine/runtime.h"
#include "eval/free_run.h"
#include "eval/replay.h"
#include "gtest/gtest.h"
#include "kv/policy/sequence_compressor.h"

namespace beacon::eval {
namespace {

TEST(ModelEvalTest, ReplayAndFreeRunOnTheDefaultModel) {
  if (!std::filesystem::exists(BEACON_MODEL_PATH)) GTEST_SKIP() << "no model at " << BEACON_MODEL_PATH;
  RuntimeOptions ro;
  ro.model = BEACON_MODEL_PATH;
  ro.threads = 2;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(ro);
  ASSERT_TRUE(rt.ok()) << rt.status();
  absl::StatusOr<std::vector<int32_t>> prompt =
      (*rt)->EncodePrompt("Write a numbered plan for a picnic, then follow it.", true, "");
  ASSERT_TRUE(prompt.ok());
  constexpr int32_t kTokens = 72;
  // Budget 32 with interval 8 evicts several times in 72 tokens; 512 never.
  absl::StatusOr<std::vector<PolicySpec>> grid = MakePolicyGrid({"streaming", "h2o", "beacon"}, {32, 512}, 8);
  ASSERT_TRUE(grid.ok()) << grid.status();

  absl::StatusOr<FreeRunResult> fr = RunTraceAndFreeRuns(rt->get(), *prompt, *grid, kTokens, 512, nullptr);
  ASSERT_TRUE(fr.ok()) << fr.status();
  ASSERT_EQ(fr->trace.size(), static_cast<size_t>(kTokens));
  absl::StatusOr<ReplayResult> rp = RunReplay(rt->get(), *prompt, fr->trace, *grid, 512, nullptr);
  ASSERT_TRUE(rp.ok()) << rp.status();
  EXPECT_EQ(rp->reference_mismatches, 0);

  for (size_t i = 0; i < grid->size(); ++i) {
    const PolicySpec& spec = (*grid)[i];
    const ReplayStats& st = rp->stats[i];
    SCOPED_TRACE(spec.policy + "@" + std::to_string(spec.budget));
    EXPECT_EQ(st.kl.count(), kTokens - 1);
    EXPECT_EQ(st.agreement, fr->agreement[i]);
    if (spec.budget == 512) {
      EXPECT_EQ(st.evictions, 0);
      EXPECT_EQ(st.kl.value(), 0.0);
      EXPECT_EQ(st.top1.value(), 1.0);
      EXPECT_NEAR(st.recall.value(), 1.0, 1e-4);
      EXPECT_EQ(fr->agreement[i], kTokens);
      EXPECT_EQ(st.kl_post.count(), 0);
    } else {
      EXPECT_GT(st.evictions, 2);
      EXPECT_GT(st.kl_post.count(), 0);
      EXPECT_GT(st.kl_post.value(), 0.0);
      EXPECT_LT(st.recall_post.value(), 1.0);
      EXPECT_GT(st.recall_post.value(), 0.0);
      EXPECT_LE(st.peak_slots, SequenceCompressor::PeakSlots(spec.options, prompt->size(), kTokens));
    }
  }
}

TEST(DistinctNgramRatioTest, MeasuresRepetition) {
  EXPECT_DOUBLE_EQ(DistinctNgramRatio({1, 2, 1, 2, 1, 2}, 2), 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(DistinctNgramRatio({1, 2, 3, 4}, 2), 1.0);
  EXPECT_DOUBLE_EQ(DistinctNgramRatio({1}, 4), 1.0);
}

}  // namespace
}  // namespace beacon::eval
