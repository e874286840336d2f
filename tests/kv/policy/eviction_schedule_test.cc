// EvictionSchedule: the bound, the decode-step trigger, the recompute rule and
// the peak, against the rules written out in eviction_schedule.h.
#include "kv/policy/eviction_schedule.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace beacon {
namespace {

KvPolicyOptions Beacon(int32_t budget, int32_t interval, bool keep_prompt) {
  KvPolicyOptions o = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  o.budget = budget;
  o.interval = interval;
  o.keep_prompt = keep_prompt;
  return o;
}

TEST(EvictionScheduleTest, BoundCountsThePromptOnlyWhenKept) {
  EXPECT_EQ(EvictionSchedule(Beacon(100, 16, true), 50).bound(), 150);
  EXPECT_EQ(EvictionSchedule(Beacon(100, 16, false), 50).bound(), 100);
  EXPECT_FALSE(EvictionSchedule(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull), 50).compresses());
}

TEST(EvictionScheduleTest, DecodeStepsEvictEveryIntervalOncePastTheBound) {
  // Simulate a sequence: 10 prompt slots, bound 10 + 20, interval 8.
  EvictionSchedule s(Beacon(20, 8, true), 10);
  int32_t slots = 10, peak = 10, evictions = 0;
  for (int step = 0; step < 200; ++step) {
    ++slots;  // the step's token
    peak = std::max(peak, slots);
    if (s.OnDecodeStep(slots)) {
      ASSERT_GT(slots, s.bound());
      slots = s.bound();
      s.OnEvicted();
      ++evictions;
    }
  }
  EXPECT_GT(evictions, 10);
  EXPECT_LE(peak, s.bound() + 8);
  EXPECT_EQ(peak, EvictionSchedule::PeakSlots(Beacon(20, 8, true), 10, 200));
}

TEST(EvictionScheduleTest, ReachingBoundPlusIntervalEvictsAtOnce) {
  EvictionSchedule s(Beacon(20, 8, false), 100);  // a prompt far above the bound
  EXPECT_TRUE(s.OnDecodeStep(101));               // 101 >= 20 + 8 on the first step
  s.OnEvicted();
  EXPECT_FALSE(s.OnDecodeStep(21));  // above the bound, one step since
  EXPECT_FALSE(s.OnDecodeStep(20));  // at the bound: never
}

TEST(EvictionScheduleTest, APhaseBringsOnlyTheFirstEvictionEarly) {
  // Bound 10 + 20, interval 8: with phase 3 the first eviction comes 5
  // steps past the bound instead of 8; every later one after 8 steps, and
  // the peak is the same as without a phase.
  KvPolicyOptions o = Beacon(20, 8, true);
  o.window = 4;
  o.eviction_phase = 3;
  ASSERT_TRUE(o.Validate().ok()) << o.Validate();
  EvictionSchedule s(o, 10);
  int32_t slots = 10, peak = 10;
  std::vector<int32_t> evicted_at;  // the slot count at each eviction
  for (int step = 0; step < 100; ++step) {
    peak = std::max(peak, ++slots);
    if (s.OnDecodeStep(slots)) {
      evicted_at.push_back(slots);
      slots = s.bound();
      s.OnEvicted();
    }
  }
  ASSERT_GE(evicted_at.size(), 3u);
  EXPECT_EQ(evicted_at[0], s.bound() + 5);
  for (size_t i = 1; i < evicted_at.size(); ++i) EXPECT_EQ(evicted_at[i], s.bound() + 8) << i;
  EXPECT_LE(peak, EvictionSchedule::PeakSlots(o, 10, 100));

  o.eviction_phase = 8;  // outside [0, interval)
  EXPECT_THAT(std::string(o.Validate().message()), ::testing::HasSubstr("kv_eviction_phase"));
  o.eviction_phase = -1;
  EXPECT_FALSE(o.Validate().ok());
}

TEST(EvictionScheduleTest, SpreadPhaseIsTheRequestsOwnAndSpreadsBursts) {
  const std::vector<int32_t> prompt = {151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30};
  const int32_t p0 = EvictionSchedule::SpreadPhase(prompt, 0, 1, 16);
  EXPECT_EQ(EvictionSchedule::SpreadPhase(prompt, 0, 1, 16), p0);  // a function of the request alone
  EXPECT_GE(p0, 0);
  EXPECT_LT(p0, 16);
  EXPECT_EQ(EvictionSchedule::SpreadPhase(prompt, 0, 1, 1), 0);
  // The n samples of one prompt: evenly over the interval.
  std::set<int32_t> samples;
  for (int32_t i = 0; i < 4; ++i) {
    const int32_t p = EvictionSchedule::SpreadPhase(prompt, i, 4, 16);
    EXPECT_EQ(p, (p0 + 4 * i) % 16) << i;
    samples.insert(p);
  }
  EXPECT_EQ(samples.size(), 4u);
  // 64 prompts that differ in one token (a burst from one template) cover
  // most of the 16 phases, not one.
  std::vector<int> count(16, 0);
  for (int32_t t = 0; t < 64; ++t) {
    std::vector<int32_t> q = prompt;
    q[7] = 1000 + t;
    ++count[EvictionSchedule::SpreadPhase(q, 0, 1, 16)];
  }
  EXPECT_LE(*std::max_element(count.begin(), count.end()), 12);
  EXPECT_GE(std::count_if(count.begin(), count.end(), [](int c) { return c > 0; }), 12);
}

TEST(EvictionScheduleTest, FullNeverEvicts) {
  EvictionSchedule s(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull), 10);
  for (int32_t n = 11; n < 5000; ++n) ASSERT_FALSE(s.OnDecodeStep(n));
  EXPECT_FALSE(s.EvictsAfterRecomputeChunk(100, 5000));
  EXPECT_EQ(EvictionSchedule::PeakSlots(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull), 10, 5000), 5010);
}

TEST(EvictionScheduleTest, RecomputeEvictsOnlyPastThePromptAndAboveTheBound) {
  EvictionSchedule s(Beacon(20, 8, true), 10);        // bound 30
  EXPECT_FALSE(s.EvictsAfterRecomputeChunk(10, 40));  // still the prompt
  EXPECT_FALSE(s.EvictsAfterRecomputeChunk(40, 30));  // at the bound
  EXPECT_TRUE(s.EvictsAfterRecomputeChunk(40, 31));
}

TEST(EvictionScheduleTest, PeakIsConstantInTheOutputAndNeverAboveTheTotal) {
  const KvPolicyOptions o = Beacon(100, 16, true);
  EXPECT_EQ(EvictionSchedule::PeakSlots(o, 50, 1000), 166);
  EXPECT_EQ(EvictionSchedule::PeakSlots(o, 50, 100000), 166);
  EXPECT_EQ(EvictionSchedule::PeakSlots(o, 50, 10), 60);
  const KvPolicyOptions dropped = Beacon(100, 16, false);
  EXPECT_EQ(EvictionSchedule::PeakSlots(dropped, 500, 1000), 501);  // a long prompt evicts at its first step
}

}  // namespace
}  // namespace beacon
