// beacon-bench policy's per-step accounting: nearest-rank percentiles and
// the steady state after the first eviction.
#include "bench/policy_step_stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace beacon {
namespace {

TEST(NearestRankPercentile, IsAMeasuredSampleAtTheCeilingRank) {
  EXPECT_EQ(NearestRankPercentile({}, 50), 0);
  EXPECT_EQ(NearestRankPercentile({7}, 50), 7);
  EXPECT_EQ(NearestRankPercentile({7}, 99), 7);
  // Ranks: p50 of 4 -> 2nd, of 5 -> 3rd; no interpolation between samples.
  EXPECT_EQ(NearestRankPercentile({4, 1, 3, 2}, 50), 2);
  EXPECT_EQ(NearestRankPercentile({5, 1, 4, 2, 3}, 50), 3);
  // 100 samples 1..100 (shuffled): p99 is the 99th, not the maximum; 101
  // samples: rank ceil(99.99) = 100.
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(NearestRankPercentile(v, 99), 99);
  EXPECT_EQ(NearestRankPercentile(v, 100), 100);
  v.push_back(1000);
  EXPECT_EQ(NearestRankPercentile(v, 99), 100);
}

// A warm-up of cheap steps, then evictions every 4th step with one slow
// shrink-like step between: the steady summary starts after the first
// eviction's step, and its p99/max catch the spikes the mean hides.
TEST(PolicyStepStats, SteadyStateStartsAfterTheFirstEviction) {
  PolicyStepStats st;
  for (int i = 0; i < 10; ++i) st.AddStep(0.001, 0);  // steps 0..9: observing only
  EXPECT_EQ(st.first_eviction_step(), -1);
  EXPECT_EQ(st.steady_steps(), 0);
  EXPECT_EQ(st.Steady().steps, 0);
  EXPECT_EQ(st.Steady().p99_s, 0);
  st.AddStep(1.5, 1);  // step 10: the first eviction, not steady
  // Steps 11..210: an eviction (0.1 s) every 4th, a 0.9 s spike once.
  for (int i = 0; i < 200; ++i) {
    const bool evict = i % 4 == 3;
    st.AddStep(i == 100 ? 0.9 : evict ? 0.1 : 0.002, evict ? 1 : 0);
  }
  EXPECT_EQ(st.steps(), 211);
  EXPECT_EQ(st.first_eviction_step(), 10);
  EXPECT_EQ(st.steady_steps(), 200);
  EXPECT_EQ(st.steady_evictions(), 50);
  EXPECT_DOUBLE_EQ(st.steady_evictions_per_step(), 0.25);
  const StepTimeSummary s = st.Steady();
  EXPECT_EQ(s.steps, 200);
  EXPECT_EQ(s.p50_s, 0.002);
  EXPECT_EQ(s.p99_s, 0.1);  // 50 evictions are a quarter of the steps
  EXPECT_EQ(s.max_s, 0.9);  // the first eviction's step (1.5 s) is not in it
  EXPECT_NEAR(s.mean_s, (149 * 0.002 + 50 * 0.1 + 0.9) / 200, 1e-12);
  // Without the eviction steps: 149 cheap steps and the spike.
  const StepTimeSummary quiet = st.SteadyWithoutEvictions();
  EXPECT_EQ(quiet.steps, 150);
  EXPECT_EQ(quiet.p50_s, 0.002);
  EXPECT_EQ(quiet.p99_s, 0.002);  // rank 149 of 150
  EXPECT_EQ(quiet.max_s, 0.9);
  const StepTimeSummary all = st.All();
  EXPECT_EQ(all.steps, 211);
  EXPECT_EQ(all.max_s, 1.5);
  EXPECT_EQ(all.p50_s, 0.002);
}

// Two evictions in one step (a recompute-like burst) count as two.
TEST(PolicyStepStats, CountsEveryEvictionOfAStep) {
  PolicyStepStats st;
  st.AddStep(0.1, 2);  // the first eviction's step: its second eviction is not steady either
  st.AddStep(0.2, 3);
  st.AddStep(0.3, 0);
  EXPECT_EQ(st.first_eviction_step(), 0);
  EXPECT_EQ(st.steady_evictions(), 3);
  EXPECT_DOUBLE_EQ(st.steady_evictions_per_step(), 1.5);
  EXPECT_EQ(st.Steady().max_s, 0.3);
  EXPECT_EQ(st.Steady().p50_s, 0.2);
}

}  // namespace
}  // namespace beacon
