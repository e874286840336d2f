// Admission capacity: reserve mode admits exactly floor(pool / footprint)
// sequences, where the footprint is prompt + max_tokens under `full` and the
// constant kept_prompt + budget + interval under a compressing policy (so the
// same pool holds many more long-output requests); optimistic mode admits
// more, preempts under pressure, and still finishes every request exactly.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kv/policy/sequence_compressor.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/sched_test_util.h"

namespace beacon {
namespace {

using namespace schedtest;

// Runs `n` copies of `spec` (all queued at once) to the end and returns the
// most sequences that held KV at once. Checks reserve mode's invariants at
// every engine step and every request's end.
int32_t PeakConcurrency(AdmissionMode mode, int32_t pool_blocks, int32_t max_running, const SimSequenceSpec& spec,
                        int n, int64_t* preempted = nullptr) {
  Harness h(Config(mode, max_running), pool_blocks);
  h.engine.SetRunHook([&](const SimEngine& e) {
    EXPECT_LE(e.UsedBlocks(), e.TotalBlocks());
    if (mode == AdmissionMode::kReserve) {
      EXPECT_LE(e.UsedBlocks(), h.sched.reserved_blocks());
      EXPECT_LE(h.sched.reserved_blocks(), e.TotalBlocks());
    }
  });
  for (RequestId id = 0; id < static_cast<RequestId>(n); ++id) EXPECT_TRUE(h.Add(id, spec).ok());
  EXPECT_TRUE(h.RunUntilIdle(10000000));
  for (RequestId id = 0; id < static_cast<RequestId>(n); ++id) {
    h.ExpectFinishedNormally(id, spec);
    // The peak bounds a sequence; a compressing one's recompute may pass it
    // by up to one chunk before it evicts.
    const SimEngine::Record& r = h.engine.records().at(id);
    const int64_t peak = SequenceCompressor::PeakSlots(spec.kv, spec.prompt_tokens, spec.max_new_tokens);
    EXPECT_LE(r.max_slots, r.preemptions == 0 ? peak : peak + h.sched.config().prefill_chunk) << id;
  }
  EXPECT_EQ(h.engine.UsedBlocks(), 0);
  EXPECT_EQ(h.engine.exhausted(), 0);
  EXPECT_EQ(h.engine.protocol_errors(), 0);
  EXPECT_EQ(h.engine.peak_running(), h.max_running);
  if (mode == AdmissionMode::kReserve) {
    EXPECT_EQ(h.preempted, 0);
  }
  if (preempted != nullptr) *preempted = h.preempted;
  return h.engine.peak_running();
}

TEST(SchedulerCapacity, ReserveFullAdmitsPoolOverPromptPlusMaxTokens) {
  const SimSequenceSpec spec = Full(200, 300, 300);  // 500 slots: 32 blocks
  EXPECT_EQ(Ceil(500, 16), 32);
  EXPECT_EQ(PeakConcurrency(AdmissionMode::kReserve, 200, 64, spec, 20), 200 / 32);  // 6
  EXPECT_EQ(PeakConcurrency(AdmissionMode::kReserve, 256, 64, spec, 20), 8);
  // Early stops do not change what is reserved.
  EXPECT_EQ(PeakConcurrency(AdmissionMode::kReserve, 200, 64, Full(200, 50, 300), 20), 6);
}

TEST(SchedulerCapacity, ReserveCompressingAdmitsPoolOverConstantFootprint) {
  const SimSequenceSpec beacon = Beacon(200, 2000, 2000, 64, 16);
  const int64_t peak = SequenceCompressor::PeakSlots(beacon.kv, 200, 2000);
  ASSERT_EQ(peak, 200 + 64 + 16);  // kept prompt + budget + interval
  ASSERT_EQ(Ceil(peak, 16), 18);
  const int32_t compressed = PeakConcurrency(AdmissionMode::kReserve, 200, 64, beacon, 20);
  EXPECT_EQ(compressed, 200 / 18);  // 11
  // The same requests under `full`: 2200 slots, 138 blocks: one at a time.
  const int32_t full = PeakConcurrency(AdmissionMode::kReserve, 200, 64, Full(200, 2000, 2000), 4);
  EXPECT_EQ(full, 200 / Ceil(2200, 16));  // 1
  EXPECT_GE(compressed, 10 * full);
  // The running cap still applies.
  EXPECT_EQ(PeakConcurrency(AdmissionMode::kReserve, 200, 8, beacon, 20), 8);
  // Footprint constant in max_tokens: 20000-token outputs fit as many.
  EXPECT_EQ(PeakConcurrency(AdmissionMode::kReserve, 200, 64, Beacon(200, 20000, 20000), 12), 11);
}

TEST(SchedulerCapacity, OptimisticAdmitsMoreAndPreemptsUnderPressure) {
  struct Case {
    std::string name;
    SimSequenceSpec spec;
    int32_t reserve_peak;
  };
  const std::vector<Case> cases = {
      {"full", Full(200, 300, 300), 6},
      {"full, early stops", Full(200, 280, 300), 6},
      {"beacon", Beacon(200, 2000, 2000), 11},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    int64_t preempted = 0;
    const int32_t reserve = PeakConcurrency(AdmissionMode::kReserve, 200, 64, c.spec, 20);
    EXPECT_EQ(reserve, c.reserve_peak);
    const int32_t optimistic = PeakConcurrency(AdmissionMode::kOptimistic, 200, 64, c.spec, 20, &preempted);
    EXPECT_GT(optimistic, reserve);
    EXPECT_GT(preempted, 0);
  }
}

// Mixed sizes in optimistic mode: preempted requests are recomputed and end
// with exactly their tokens; the engine never runs out of blocks.
TEST(SchedulerCapacity, OptimisticPreemptionKeepsTokenCounts) {
  Harness h(Config(AdmissionMode::kOptimistic, 32, 256, 128), 150);
  std::vector<SimSequenceSpec> specs;
  for (RequestId id = 0; id < 60; ++id) {
    const int32_t prompt = 20 + static_cast<int32_t>(id * 37 % 400);
    const int32_t max_new = 50 + static_cast<int32_t>(id * 53 % 500);
    const int32_t output = id % 3 == 0 ? max_new / 2 + 1 : max_new;
    specs.push_back(id % 4 == 1 ? Beacon(prompt, output, max_new, 64, 16) : Full(prompt, output, max_new));
    ASSERT_TRUE(h.Add(id, specs.back()).ok());
  }
  ASSERT_TRUE(h.RunUntilIdle(1000000));
  int preempted_requests = 0;
  for (RequestId id = 0; id < 60; ++id) {
    h.ExpectFinishedNormally(id, specs[id]);
    preempted_requests += h.engine.records().at(id).preemptions > 0;
  }
  EXPECT_GT(h.preempted, 0);
  EXPECT_GT(preempted_requests, 0);
  EXPECT_EQ(h.engine.exhausted(), 0);
  EXPECT_EQ(h.engine.UsedBlocks(), 0);
}

}  // namespace
}  // namespace beacon
