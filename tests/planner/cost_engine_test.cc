// CostEngine: the scheduler's own SimEngine accounting, priced step by step.
// The planner drives beacon::Scheduler itself (no copy): the same requests
// give the same schedule with and without the cost model around SimEngine.
#include "planner/cost_engine.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "gtest/gtest.h"
#include "kv/policy/sequence_compressor.h"
#include "scheduler/scheduler.h"
#include "tests/planner/planner_test_util.h"

namespace beacon::planner {
namespace {

using test::ToyGpu;
using test::ToyModel;

SchedClock::time_point T(double s) {
  return SchedClock::time_point(std::chrono::duration_cast<SchedClock::duration>(std::chrono::duration<double>(s)));
}

SimSequenceSpec Spec(int32_t prompt, int32_t output, const KvPolicyOptions& kv, int32_t max_new = 0) {
  SimSequenceSpec s;
  s.prompt_tokens = prompt;
  s.output_tokens = output;
  s.max_new_tokens = max_new > 0 ? max_new : output;
  s.kv = kv;
  return s;
}

TEST(CostEngine, PricesEachStepAndTimesTheRequest) {
  const CostModel cost(ToyModel(), ToyGpu(), PolicyCostFor(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull)));
  CostEngine engine(100, 16, cost);
  Scheduler sched(SchedulerConfig{}, engine.mutable_cache(), &engine);
  const SimSequenceSpec spec = Spec(4, 3, KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull));
  ASSERT_TRUE(engine.AddSequence(7, spec, 0.0).ok());
  ASSERT_TRUE(sched.Add(MakeSimRequest(7, spec), MakeSimKvSpec(7, spec, false)).ok());
  // Step 1: the 4-token prompt (10 causal pairs, 4 slots written and read), samples token 1.
  sched.Step(T(engine.now_s()));
  EXPECT_DOUBLE_EQ(engine.last_step().bytes, 2400 + 8 * 128);
  EXPECT_DOUBLE_EQ(engine.last_step().flops, 2 * 1000 * 4 + 2 * 100 + 256 * 10);
  EXPECT_DOUBLE_EQ(engine.now_s(), 3424e-12);
  // Steps 2 and 3 decode at 4 and 5 cached slots.
  sched.Step(T(engine.now_s()));
  EXPECT_DOUBLE_EQ(engine.last_step().bytes, 2400 + 6 * 128);
  sched.Step(T(engine.now_s()));
  EXPECT_DOUBLE_EQ(engine.last_step().bytes, 2400 + 7 * 128);
  EXPECT_FALSE(sched.HasWork());
  const RequestTiming& t = engine.timing(7);
  EXPECT_DOUBLE_EQ(t.first_token_s, 3424e-12);
  EXPECT_DOUBLE_EQ(t.finish_s, (3424 + 3168 + 3296) * 1e-12);
  EXPECT_EQ(t.generated, 3);
  EXPECT_EQ(t.state, RequestState::kFinishedLength);
  EXPECT_EQ(engine.TakeFinished(), std::vector<RequestId>{7});
  EXPECT_EQ(engine.stats().steps, 3);
  EXPECT_EQ(engine.stats().decode_tokens, 2);
  EXPECT_EQ(engine.stats().prefill_tokens, 4);
  EXPECT_EQ(engine.sim().UsedBlocks(), 0);
}

TEST(CostEngine, CountsEvictionsAndTheMidStepPeak) {
  KvPolicyOptions kv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  kv.budget = 8;
  kv.interval = 4;
  kv.window = 4;
  kv.keep_prompt = true;
  const CostModel cost(ToyModel(), ToyGpu(), PolicyCostFor(kv));
  CostEngine engine(100, 4, cost);
  Scheduler sched(SchedulerConfig{}, engine.mutable_cache(), &engine);
  const SimSequenceSpec spec = Spec(4, 40, kv);
  ASSERT_TRUE(engine.AddSequence(1, spec, 0.0).ok());
  ASSERT_TRUE(sched.Add(MakeSimRequest(1, spec), MakeSimKvSpec(1, spec, false)).ok());
  while (sched.HasWork()) sched.Step(T(engine.now_s()));
  // The SequenceCompressor rule by hand: bound = prompt 4 + budget 8 = 12;
  // after a decode step, evict to 12 when above it and (4 steps since it
  // last went above the bound, or 12 + 4 slots).
  int32_t slots = 4, steps = 0, evictions = 0, peak = 4;
  for (int32_t token = 2; token <= 40; ++token) {  // token 1 came from the prefill
    ++slots;
    peak = std::max(peak, slots);
    if (slots <= 12) {
      steps = 0;
      continue;
    }
    ++steps;
    if (steps >= 4 || slots >= 16) slots = 12, steps = 0, ++evictions;
  }
  EXPECT_EQ(evictions, 7);  // at 16 slots, then every 4 steps
  EXPECT_EQ(engine.stats().evictions, evictions);
  EXPECT_EQ(peak, 16);
  EXPECT_EQ(peak, SequenceCompressor::PeakSlots(kv, 4, 40));
  // The peak counts the slots held before the step's eviction: 16 slots = 4 blocks of 4.
  EXPECT_EQ(engine.stats().peak_used_blocks, 4);
  EXPECT_GT(engine.stats().evict_s, 0);
  EXPECT_EQ(engine.timing(1).max_slots, 16);
}

// The same requests through beacon::Scheduler over a bare SimEngine and over
// CostEngine: the same admissions, preemptions, orders and KV footprints.
void ExpectSameSchedule(AdmissionMode mode) {
  SchedulerConfig cfg;
  cfg.max_running = 12;
  cfg.max_step_tokens = 64;
  cfg.prefill_chunk = 16;
  cfg.admission = mode;
  const int32_t blocks = 60, bs = 8;
  SimEngine bare(blocks, bs);
  const CostModel cost(ToyModel(), ToyGpu(), PolicyCostFor(KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon)));
  CostEngine priced(blocks, bs, cost);
  Scheduler a(cfg, bare.mutable_cache(), &bare), b(cfg, priced.mutable_cache(), &priced);
  std::mt19937_64 rng(3);
  for (RequestId id = 0; id < 40; ++id) {
    KvPolicyOptions kv = KvPolicyOptions::DefaultsFor(id % 3 == 0 ? KvPolicyKind::kFull : KvPolicyKind::kBeacon);
    kv.budget = 32;
    kv.interval = 8;
    kv.window = 8;
    const int32_t prompt = 1 + static_cast<int32_t>(rng() % 40);
    const int32_t output = 1 + static_cast<int32_t>(rng() % 120);
    const SimSequenceSpec spec = Spec(prompt, output, kv, 130);
    ASSERT_TRUE(bare.AddSequence(id, spec).ok());
    ASSERT_TRUE(priced.AddSequence(id, spec, 0.0).ok());
    ASSERT_TRUE(a.Add(MakeSimRequest(id, spec), MakeSimKvSpec(id, spec, false)).ok());
    ASSERT_TRUE(b.Add(MakeSimRequest(id, spec), MakeSimKvSpec(id, spec, false)).ok());
  }
  int steps = 0;
  while (a.HasWork() || b.HasWork()) {
    const StepReport ra = a.Step(T(steps)), rb = b.Step(T(steps));
    ASSERT_EQ(ra.tokens, rb.tokens) << "step " << steps;
    ASSERT_EQ(ra.admitted, rb.admitted);
    ASSERT_EQ(ra.preempted, rb.preempted);
    ASSERT_EQ(ra.finished, rb.finished);
    ASSERT_LT(++steps, 100000);
  }
  EXPECT_EQ(bare.first_run_order(), priced.sim().first_run_order());
  EXPECT_EQ(bare.remove_order(), priced.sim().remove_order());
  for (const auto& [id, rec] : bare.records()) {
    const SimEngine::Record& other = priced.sim().records().at(id);
    EXPECT_EQ(rec.max_slots, other.max_slots) << id;
    EXPECT_EQ(rec.preemptions, other.preemptions) << id;
    EXPECT_EQ(rec.state, other.state) << id;
    EXPECT_EQ(priced.timing(id).max_slots, rec.max_slots) << id;
  }
  EXPECT_EQ(bare.peak_running(), priced.sim().peak_running());
  EXPECT_EQ(priced.stats().steps, bare.steps());
  EXPECT_EQ(priced.sim().UsedBlocks(), 0);
  if (mode == AdmissionMode::kOptimistic) {
    int32_t preempted = 0;
    for (const auto& [id, rec] : bare.records()) preempted += rec.preemptions;
    EXPECT_GT(preempted, 0) << "the pool should be tight enough to preempt";
  }
}

TEST(CostEngine, SameScheduleAsTheBareSimEngineReserve) { ExpectSameSchedule(AdmissionMode::kReserve); }
TEST(CostEngine, SameScheduleAsTheBareSimEngineOptimistic) { ExpectSameSchedule(AdmissionMode::kOptimistic); }

// The planner has no scheduler of its own: it includes beacon-serve's and
// defines no admission or batching logic.
TEST(CostEngine, PlannerSourcesHoldNoCopyOfTheScheduler) {
  namespace fs = std::filesystem;
  bool includes_scheduler = false;
  for (const fs::directory_entry& e : fs::directory_iterator(test::Src("planner"))) {
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (const char* copy : {"class Scheduler", "TryAdmit", "PreemptNewest", "StepReport Step("}) {
      EXPECT_EQ(s.find(copy), std::string::npos) << e.path() << " contains " << copy;
    }
    includes_scheduler |= s.find("#include \"scheduler/scheduler.h\"") != std::string::npos;
  }
  EXPECT_TRUE(includes_scheduler);
}

}  // namespace
}  // namespace beacon::planner
