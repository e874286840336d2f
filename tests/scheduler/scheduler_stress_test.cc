// Randomized end-to-end run of the scheduler on the SimEngine, in both
// admission modes, with a fixed seed: 1,000 requests of random prompt and
// output lengths under `full` and compressing policies, arriving a few per
// step, with random cancellations and deadlines on a virtual clock
// (t0 + step * 10 ms). At the end every request is over, was removed exactly
// once and holds no block; none starved; first admissions were FCFS; and in
// reserve mode the reservations bounded the KV at every engine step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kv/policy/sequence_compressor.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/sched_test_util.h"

namespace beacon {
namespace scheduler_stress_test {
namespace {

using namespace schedtest;

struct Planned {
  SimSequenceSpec spec;
  std::optional<SchedClock::duration> deadline;
};

std::vector<Planned> Plan(int n, std::mt19937_64& rng) {
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int32_t budgets[] = {64, 128, 256};
  const int32_t intervals[] = {8, 16, 64};
  std::vector<Planned> plan(n);
  for (Planned& p : plan) {
    const int32_t prompt = static_cast<int32_t>(uni(1, 600));
    const int32_t max_new = static_cast<int32_t>(uni(1, 500));
    const int32_t output = static_cast<int32_t>(uni(1, 600));
    switch (uni(0, 3)) {
      case 0:
      case 1: p.spec = Full(prompt, output, max_new); break;
      default:
        p.spec = Beacon(prompt, output, max_new, budgets[uni(0, 2)], intervals[uni(0, 2)]);
        if (uni(0, 1) == 0) p.spec.kv.policy = KvPolicyKind::kStreaming;
        p.spec.kv.keep_prompt = uni(0, 1) == 0;
    }
    if (uni(0, 4) == 0) p.deadline = std::chrono::milliseconds(uni(50, 8000));
  }
  return plan;
}

void Stress(AdmissionMode mode, uint64_t seed, int32_t max_running, int32_t max_step_tokens, int32_t chunk) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  constexpr int kN = 1000;
  constexpr int32_t kBlocks = 600, kBs = 16;
  std::mt19937_64 rng(seed);
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const std::vector<Planned> plan = Plan(kN, rng);
  const bool reserve = mode == AdmissionMode::kReserve;

  Harness h(Config(mode, max_running, max_step_tokens, chunk), kBlocks, kBs);
  std::set<RequestId> live;
  std::vector<SchedClock::time_point> deadline_at(kN, SchedClock::time_point::max());
  std::vector<bool> cancelled(kN, false);
  int hook_violations = 0;
  auto violation = [&](const std::string& what) {
    if (hook_violations++ == 0) ADD_FAILURE() << "step " << h.steps << ": " << what;
  };
  // Mid-step (after the engine ran, before the scheduler applies outcomes).
  h.engine.SetRunHook([&](const SimEngine& e) {
    if (!reserve) return;
    if (e.UsedBlocks() > h.sched.reserved_blocks()) violation("used blocks above the reservations");
    int64_t reserved = 0;
    for (RequestId id : live) {
      const SchedRequest* r = h.sched.Find(id);
      if (r == nullptr || r->state != RequestState::kRunning) continue;
      const int32_t footprint = Ceil(r->peak_slots, kBs);
      reserved += footprint;
      if (r->reserved_blocks != footprint) violation("request " + std::to_string(id) + " reserved != footprint");
      const SequenceKv* kv = e.kv(id);
      if (kv != nullptr && kv->num_blocks() > footprint)
        violation("request " + std::to_string(id) + " over its footprint");
    }
    if (reserved > kBlocks) violation("running footprints exceed the pool: " + std::to_string(reserved));
    if (reserved != h.sched.reserved_blocks()) violation("reserved_blocks() != sum of running footprints");
  });

  RequestId next = 0;
  size_t removed_seen = 0;
  int n_cancelled = 0, n_expired = 0, n_finished = 0;
  while (next < kN || h.sched.HasWork()) {
    ASSERT_LT(h.steps, 1000000) << "no progress: " << h.sched.num_waiting() << " waiting, " << h.sched.num_running()
                                << " running";
    for (int64_t k = uni(0, 4); k > 0 && next < kN; --k, ++next) {
      const Planned& p = plan[next];
      ASSERT_TRUE(h.Add(next, p.spec, p.deadline).ok()) << next;
      if (p.deadline) deadline_at[next] = h.Now() + *p.deadline;
      live.insert(next);
    }
    if (!live.empty() && uni(0, 99) == 0) {
      auto it = live.begin();
      std::advance(it, uni(0, static_cast<int64_t>(live.size()) - 1));
      const RequestId id = *it;
      EXPECT_TRUE(h.sched.Abort(id, RequestState::kFinishedCancelled)) << id;
      cancelled[id] = true;
    }
    const SchedClock::time_point now = h.Now();
    const StepReport r = h.Step();
    if (reserve) {
      EXPECT_EQ(r.preempted, 0);
      EXPECT_LE(h.engine.UsedBlocks(), h.sched.reserved_blocks());
    }
    for (; removed_seen < h.engine.remove_order().size(); ++removed_seen) {
      const RequestId id = h.engine.remove_order()[removed_seen];
      live.erase(id);
      const SimEngine::Record& rec = h.engine.records().at(id);
      EXPECT_EQ(rec.sched_generated, rec.generated) << id;
      if (cancelled[id]) {
        EXPECT_EQ(rec.state, RequestState::kFinishedCancelled) << id;
        ++n_cancelled;
      } else if (rec.state == RequestState::kFinishedTimeLimit) {
        EXPECT_LE(deadline_at[id], now) << id << " expired early";
        ++n_expired;
      } else {
        h.ExpectFinishedNormally(id, plan[id].spec);  // no starvation, exact token counts
        ++n_finished;
        const SimSequenceSpec& s = plan[id].spec;
        const int64_t peak = SequenceCompressor::PeakSlots(s.kv, s.prompt_tokens, s.max_new_tokens);
        EXPECT_LE(rec.max_slots, rec.preemptions == 0 ? peak : peak + h.sched.config().prefill_chunk) << id;
      }
    }
  }
  std::printf("%s: %lld steps, %d finished, %d cancelled, %d expired, peak running %d, preempted %lld\n",
              std::string(AdmissionModeName(mode)).c_str(), static_cast<long long>(h.steps), n_finished, n_cancelled,
              n_expired, h.engine.peak_running(), static_cast<long long>(h.preempted));
  EXPECT_EQ(hook_violations, 0);
  EXPECT_EQ(next, static_cast<RequestId>(kN));
  EXPECT_TRUE(live.empty());
  EXPECT_EQ(n_finished + n_cancelled + n_expired, kN);
  for (RequestId id = 0; id < kN; ++id) {
    auto it = h.engine.records().find(id);
    ASSERT_NE(it, h.engine.records().end()) << id << " never removed";
    EXPECT_EQ(it->second.remove_calls, 1) << id;
    EXPECT_TRUE(IsFinished(it->second.state)) << id;
    if (reserve) {
      EXPECT_EQ(it->second.preemptions, 0) << id;
    }
  }
  // The StepReports add up: Step() ends all but the Abort()ed; each admission
  // runs at once; every token run is reported.
  EXPECT_EQ(h.finished + n_cancelled, kN);
  if (reserve) {
    EXPECT_EQ(h.admitted, static_cast<int64_t>(h.engine.first_run_order().size()));
  } else {
    EXPECT_GE(h.admitted, static_cast<int64_t>(h.engine.first_run_order().size()));
  }
  EXPECT_EQ(h.tokens, h.engine.tokens());
  EXPECT_EQ(h.engine.unknown_removes(), 0);
  EXPECT_EQ(h.engine.UsedBlocks(), 0);
  EXPECT_EQ(h.engine.cache().pool().num_free(), h.engine.cache().pool().num_blocks());
  EXPECT_EQ(h.engine.exhausted(), 0);
  EXPECT_EQ(h.engine.protocol_errors(), 0);
  const std::vector<RequestId>& order = h.engine.first_run_order();
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end())) << "first admissions out of arrival order";
  EXPECT_EQ(std::adjacent_find(order.begin(), order.end()), order.end());
  // The run exercised what it claims to.
  EXPECT_GT(n_finished, 500);
  EXPECT_GT(n_cancelled, 10);
  EXPECT_GT(n_expired, 10);
  EXPECT_GT(h.engine.peak_running(), max_running / 2);
  if (!reserve) {
    EXPECT_GT(h.preempted, 0);
  }
}

// Two fixed seeds and shapes each: a wide step, and a narrow one where the
// token budget, not the pool, limits prefill.
TEST(SchedulerStress, Reserve) {
  Stress(AdmissionMode::kReserve, 20240601, 32, 512, 128);
  Stress(AdmissionMode::kReserve, 11, 32, 64, 32);
}
TEST(SchedulerStress, Optimistic) {
  Stress(AdmissionMode::kOptimistic, 20240601, 32, 512, 128);
  Stress(AdmissionMode::kOptimistic, 11, 32, 64, 32);
}

}  // namespace
}  // namespace scheduler_stress_test
}  // namespace beacon
