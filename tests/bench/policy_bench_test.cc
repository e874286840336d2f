// BenchPolicy's batch shapes on the real default model (issue 34): the
// whole-step latency figures are only worth their p99 if the sequences'
// evictions fall where the shape says. With no stagger every sequence
// evicts on the same steps; with prompts interval / batch apart, no two
// sequences evict on one step; nor with each its own eviction phase.
#include "bench/policy_bench.h"

#include "gtest/gtest.h"
#include "kv/policy/kv_policy.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

KvPolicyOptions Beacon() {
  KvPolicyOptions o = *KvPolicyOptions::DefaultsForName("beacon");
  o.budget = 64;
  o.interval = 16;
  return o;
}

// Steps that made at least one eviction (the steady state, plus the first).
int64_t EvictionSteps(const PolicyStepStats& s) {
  return s.Steady().steps - s.SteadyWithoutEvictions().steps + (s.first_eviction_step() >= 0 ? 1 : 0);
}

TEST(PolicyBenchTest, SequencesInPhaseEvictOnTheSameSteps) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "models/default.gguf missing";
  absl::StatusOr<PolicyBenchResult> r =
      BenchPolicy(rt, Beacon(), PolicyBenchShape{.prompt_len = 16, .steps = 120, .batch = 3, .stagger = 0});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GT(r->evictions, 3);
  ASSERT_EQ(r->evictions % 3, 0);
  EXPECT_EQ(EvictionSteps(r->whole_step), r->evictions / 3);
  EXPECT_EQ(r->whole_step.steps(), 120);
  EXPECT_EQ(r->whole_step.steady_evictions(), r->per_step.steady_evictions());
}

TEST(PolicyBenchTest, StaggeredPromptsSpreadTheEvictions) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "models/default.gguf missing";
  absl::StatusOr<PolicyBenchResult> r =
      BenchPolicy(rt, Beacon(), PolicyBenchShape{.prompt_len = 16, .steps = 120, .batch = 2, .stagger = 8});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GT(r->evictions, 2);
  EXPECT_EQ(EvictionSteps(r->whole_step), r->evictions);  // one sequence per eviction step
  // Every whole step costs at least its policy work.
  EXPECT_GE(r->whole_step.Steady().max_s, r->per_step.Steady().max_s);
}

TEST(PolicyBenchTest, SpreadPhasesSpreadABurst) {
  // Three sequences start together (stagger 0), as a burst of requests
  // admitted on one step; each gets its prompt's eviction phase, as
  // beacon-serve gives it. Their phases differ, so no two evict on one step.
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "models/default.gguf missing";
  absl::StatusOr<PolicyBenchResult> r = BenchPolicy(
      rt, Beacon(), PolicyBenchShape{.prompt_len = 16, .steps = 120, .batch = 3, .stagger = 0, .spread_phase = true});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GT(r->evictions, 3);
  EXPECT_EQ(EvictionSteps(r->whole_step), r->evictions);
  // The phase never raises the peak.
  absl::StatusOr<PolicyBenchResult> aligned =
      BenchPolicy(rt, Beacon(), PolicyBenchShape{.prompt_len = 16, .steps = 120, .batch = 3, .stagger = 0});
  ASSERT_TRUE(aligned.ok()) << aligned.status();
  EXPECT_EQ(r->peak_slots, aligned->peak_slots);
}

TEST(PolicyBenchTest, RefusesAnEmptyShape) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "models/default.gguf missing";
  EXPECT_FALSE(BenchPolicy(rt, Beacon(), PolicyBenchShape{.batch = 0}).ok());
  EXPECT_FALSE(BenchPolicy(rt, Beacon(), PolicyBenchShape{.steps = 0}).ok());
}

}  // namespace
}  // namespace beacon
