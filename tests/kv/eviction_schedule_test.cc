// EvictionSchedule: the bound, the decode-step trigger, the recompute rule and
// the peak, against the rules written out in eviction_schedule.h.
#include "kv/eviction_schedule.h"

#include <algorithm>

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
