// eval/replay_batch.h on the default model: a replay that never evicts
// computes the reference's logits exactly (the engine is batch-invariant),
// one that does evicts within its bound after AfterStep, FeedEach gives each
// entry its own token and refuses a wrong count, and the reference records
// attention only when asked.
#include "eval/replay_batch.h"

#include "gtest/gtest.h"
#include "tests/engine/default_model.h"

namespace beacon::eval {
namespace {

TEST(ReplayBatchTest, NonEvictingReplayIsTheReferenceAndOthersEvict) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "no model at " << BEACON_MODEL_PATH;
  const std::vector<int32_t> prompt = {1, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200};
  absl::StatusOr<std::vector<PolicySpec>> grid = MakePolicyGrid({"streaming"}, {512, 40}, 4);
  ASSERT_TRUE(grid.ok()) << grid.status();
  constexpr int32_t kSteps = 64;
  absl::StatusOr<std::unique_ptr<ReplayBatch>> made =
      ReplayBatch::Create(rt, static_cast<int32_t>(prompt.size()), kSteps, *grid);
  ASSERT_TRUE(made.ok()) << made.status();
  ReplayBatch& b = **made;
  ASSERT_EQ(b.size(), 2u);
  ASSERT_TRUE(b.Prefill(prompt, 4).ok());
  int32_t pos = static_cast<int32_t>(prompt.size());
  for (int32_t t = 0; t < kSteps; ++t, ++pos) {
    ASSERT_TRUE(b.Feed(2000 + t, pos).ok());
    const std::span<const float> ref = b.logits(0), same = b.logits(1);
    ASSERT_TRUE(std::equal(ref.begin(), ref.end(), same.begin())) << "step " << t;
    b.AfterStep(pos);
  }
  EXPECT_EQ(b.compressor(0).evictions(), 0);
  EXPECT_GT(b.compressor(1).evictions(), 0);
  EXPECT_LE(b.kv(1).num_slots(), b.compressor(1).bound() + 4);
  EXPECT_EQ(b.reference_kv().num_slots(), pos);

  const std::vector<int32_t> own = {3000, 3001, 3002};
  EXPECT_TRUE(b.FeedEach(own, pos).ok());
  EXPECT_EQ(b.FeedEach(std::vector<int32_t>{1, 2}, pos).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace beacon::eval
