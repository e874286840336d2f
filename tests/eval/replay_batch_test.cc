// eval/replay_batch.h on the default model, through the StepExecutor: a
// replay that never evicts computes the reference's logits exactly (the
// engine is batch-invariant), one that does evicts within its bound, after
// the step's measurement (which sees the KV the pass attended to); every
// entry generates the forced trace, then its own greedy tokens; a finished
// batch refuses another step; the reference records attention only when
// asked.
#include "eval/replay_batch.h"

#include <algorithm>

#include "eval/metrics.h"
#include "gtest/gtest.h"
#include "tests/engine/default_model.h"

namespace beacon::eval {
namespace {

constexpr int32_t kForced = 64;
constexpr int32_t kFree = 3;

std::vector<int32_t> Prompt() { return {1, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200}; }

std::vector<int32_t> Trace() {
  std::vector<int32_t> t(kForced);
  for (int32_t i = 0; i < kForced; ++i) t[i] = 2000 + i;
  return t;
}

TEST(ReplayBatchTest, ReplaysTheTraceThroughTheExecutorAndMeasuresBeforeEviction) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "no model at " << BEACON_MODEL_PATH;
  absl::StatusOr<std::vector<PolicySpec>> grid = MakePolicyGrid({"streaming"}, {512, 40}, 4);
  ASSERT_TRUE(grid.ok()) << grid.status();
  absl::StatusOr<std::unique_ptr<ReplayBatch>> made =
      ReplayBatch::Create(rt, Prompt(), Trace(), kForced + kFree, *grid, /*record=*/true);
  ASSERT_TRUE(made.ok()) << made.status();
  ReplayBatch& b = **made;
  ASSERT_EQ(b.size(), 2u);
  ASSERT_TRUE(b.Prefill(4).ok());
  int32_t pos = static_cast<int32_t>(Prompt().size());
  bool evicted_after_measuring = false;
  for (int32_t t = 1; t < kForced; ++t, ++pos) {  // the prefill made the first forced token
    int32_t slots_measured = 0;
    bool recorded = false;
    ASSERT_TRUE(b.Step([&] {
                   const std::span<const float> ref = b.logits(0), same = b.logits(1);
                   ASSERT_TRUE(std::equal(ref.begin(), ref.end(), same.begin())) << "step " << t;
                   slots_measured = b.kv(1).num_slots();
                   recorded = b.recorder().n_slots(0, 0) == pos + 1;  // this step's attention, over every slot
                 }).ok());
    EXPECT_TRUE(recorded) << "step " << t;
    evicted_after_measuring |= b.kv(1).num_slots() < slots_measured;
  }
  EXPECT_TRUE(evicted_after_measuring) << "the measurement saw the KV after the step's eviction";
  EXPECT_EQ(b.compressor(0).evictions(), 0);
  EXPECT_GT(b.compressor(1).evictions(), 0);
  EXPECT_LE(b.kv(1).num_slots(), b.compressor(1).bound() + 4);
  EXPECT_EQ(b.reference_kv().num_slots(), pos);
  for (size_t e = 0; e < 3; ++e) {
    ASSERT_EQ(b.generated(e).size(), static_cast<size_t>(kForced)) << e;
    EXPECT_EQ(b.generated(e), Trace()) << "entry " << e << " did not generate the forced trace";
  }

  // Past the trace each entry draws its own greedy token from its own logits.
  for (int32_t k = 0; k < kFree; ++k) {
    std::vector<int32_t> argmax(3);
    ASSERT_TRUE(b.Step([&] {
                   for (size_t e = 0; e < 3; ++e) argmax[e] = ArgMax(b.logits(e));
                 }).ok());
    for (size_t e = 0; e < 3; ++e) EXPECT_EQ(b.generated(e).back(), argmax[e]) << "entry " << e << ", token " << k;
  }
  EXPECT_EQ(b.Step().code(), absl::StatusCode::kFailedPrecondition);  // max_new reached
}

TEST(ReplayBatchTest, RecordsOnlyWhenAskedAndRefusesAPlainFullSpec) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "no model at " << BEACON_MODEL_PATH;
  absl::StatusOr<std::vector<PolicySpec>> grid = MakePolicyGrid({"streaming"}, {40}, 4);
  ASSERT_TRUE(grid.ok()) << grid.status();
  absl::StatusOr<std::unique_ptr<ReplayBatch>> made =
      ReplayBatch::Create(rt, Prompt(), Trace(), kForced, *grid, /*record=*/false);
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_TRUE((*made)->Prefill(16).ok());
  ASSERT_TRUE((*made)->Step().ok());
  EXPECT_EQ((*made)->recorder().n_slots(0, 0), 0);

  std::vector<PolicySpec> full = *grid;
  full[0].options = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
  EXPECT_EQ(ReplayBatch::Create(rt, Prompt(), Trace(), kForced, full).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReplayBatch::Create(rt, Prompt(), Trace(), kForced - 1, *grid).status().code(),
            absl::StatusCode::kInvalidArgument);  // more forced tokens than max_new
}

}  // namespace
}  // namespace beacon::eval
