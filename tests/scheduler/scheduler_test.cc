// Scheduler unit tests on the SimEngine: step composition (decode before
// prefill, token budget, prefill chunking, the running cap), FCFS admission,
// Add's errors, Abort / deadline / AbortAll / destructor drain (KV freed at
// once, Remove exactly once), an engine-failed sequence, and outcomes that
// break the engine's contract.
#include "scheduler/scheduler.h"

#include <chrono>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/scheduler/sched_test_util.h"

namespace beacon {
namespace {

using namespace schedtest;

// In every step's work, decode entries come before prefill entries.
void ExpectDecodeFirst(const SimEngine& e) {
  bool seen_prefill = false;
  for (const ScheduledSeq& w : e.last_work()) {
    if (w.prefill) seen_prefill = true;
    EXPECT_FALSE(!w.prefill && seen_prefill) << "decode of " << w.id << " after a prefill";
    if (!w.prefill) {
      EXPECT_EQ(w.n_tokens, 1);
    }
  }
}

TEST(Scheduler, DecodeRunsBeforePrefill) {
  Harness h(Config(AdmissionMode::kReserve, 64, 512, 256), 1000);
  ASSERT_TRUE(h.Add(1, Full(100, 50, 50)).ok());
  StepReport r = h.Step();
  EXPECT_EQ(r.admitted, 1);
  EXPECT_EQ(r.prefill_seqs, 1);
  EXPECT_EQ(r.tokens, 100);
  ASSERT_NE(h.sched.Find(1), nullptr);
  EXPECT_TRUE(h.sched.Find(1)->scheduled_once);
  EXPECT_EQ(h.sched.Find(1)->first_scheduled, h.t0);  // queue time ends at admission
  EXPECT_EQ(h.sched.Find(1)->generated, 1);
  ASSERT_TRUE(h.Add(2, Full(300, 5, 5)).ok());
  ASSERT_TRUE(h.Add(3, Full(300, 5, 5)).ok());
  r = h.Step();
  const std::vector<ScheduledSeq>& w = h.engine.last_work();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].id, 1u);
  EXPECT_FALSE(w[0].prefill);
  EXPECT_EQ(w[1].id, 2u);
  EXPECT_EQ(w[1].n_tokens, 256);
  EXPECT_EQ(w[2].id, 3u);
  EXPECT_EQ(w[2].n_tokens, 255);  // what the budget leaves
  EXPECT_EQ(r.decode_seqs, 1);
  EXPECT_EQ(r.prefill_seqs, 2);
  EXPECT_EQ(r.tokens, 512);
  while (h.sched.HasWork()) {
    h.Step();
    ExpectDecodeFirst(h.engine);
  }
  h.ExpectFinishedNormally(1, Full(100, 50, 50));
  h.ExpectFinishedNormally(2, Full(300, 5, 5));
  h.ExpectFinishedNormally(3, Full(300, 5, 5));
}

// The scheduler's record is the request's one record: it times the tokens
// by the engine's results (SeqResult::at), reports the step's token
// latencies, keeps the prompt tokens taken by reference at the first
// admission, and Remove gets it whole.
TEST(Scheduler, RecordTimesTokensAndKeepsCachedTokens) {
  Harness h(Config(), 100);
  h.sched.kv().EnablePrefixCache(/*salt=*/1);
  SimSequenceSpec spec = Full(40, 3, 3);
  spec.prefix_id = 9;  // every prompt token shared by the same prefix id
  spec.prefix_tokens = 40;
  const SchedClock::time_point arrival = h.Now();
  ASSERT_TRUE(h.Add(1, spec).ok());
  StepReport r = h.Step();  // the prompt, and the first token 4 ms into the step
  ASSERT_EQ(r.ttft_seconds.size(), 1u);
  EXPECT_DOUBLE_EQ(r.ttft_seconds[0], 0.004);
  EXPECT_TRUE(r.itl_seconds.empty());
  EXPECT_EQ(h.sched.Find(1)->first_token, arrival + 4ms);
  r = h.Step();
  EXPECT_TRUE(r.ttft_seconds.empty());
  ASSERT_EQ(r.itl_seconds.size(), 1u);
  EXPECT_DOUBLE_EQ(r.itl_seconds[0], 0.010);
  ASSERT_TRUE(h.RunUntilIdle());
  const SchedRequest& first = h.engine.records().at(1).request;
  EXPECT_EQ(first.state, RequestState::kFinishedLength);
  EXPECT_EQ(first.generated, 3);
  EXPECT_EQ(first.first_token, arrival + 4ms);
  EXPECT_EQ(first.last_token, arrival + 24ms);
  EXPECT_EQ(first.first_scheduled, arrival);
  EXPECT_EQ(first.cached_tokens, 0);
  // The same prompt again: its two whole blocks before the last prompt
  // token's come from the prefix cache.
  ASSERT_TRUE(h.Add(2, spec).ok());
  ASSERT_TRUE(h.RunUntilIdle());
  EXPECT_EQ(h.engine.records().at(2).request.cached_tokens, 32);
  EXPECT_EQ(h.engine.records().at(2).request.generated, 3);
}

TEST(Scheduler, TokenBudgetPerStep) {
  Harness h(Config(AdmissionMode::kReserve, 8, 64, 32), 1000);
  std::mt19937 rng(5);
  std::vector<SimSequenceSpec> specs;
  for (RequestId id = 0; id < 20; ++id) {
    specs.push_back(Full(10 + rng() % 190, 5 + rng() % 25, 30));
    ASSERT_TRUE(h.Add(id, specs.back()).ok());
  }
  int full_steps = 0;
  while (h.sched.HasWork()) {
    const StepReport r = h.Step();
    if (!r.ran) continue;
    int32_t sum = 0;
    for (const ScheduledSeq& w : h.engine.last_work()) {
      sum += w.n_tokens;
      if (w.prefill) {
        EXPECT_LE(w.n_tokens, 32);
      }
    }
    EXPECT_LE(sum, 64);
    EXPECT_EQ(r.tokens, sum);
    EXPECT_LE(h.sched.num_running(), 8);
    full_steps += sum == 64;
    ExpectDecodeFirst(h.engine);
    ASSERT_LT(h.steps, 10000);
  }
  EXPECT_GT(full_steps, 10);  // the budget is used, not just respected
  for (RequestId id = 0; id < 20; ++id) h.ExpectFinishedNormally(id, specs[id]);
  EXPECT_EQ(h.engine.UsedBlocks(), 0);
}

TEST(Scheduler, LongPromptIsChunked) {
  Harness h(Config(AdmissionMode::kReserve, 64, 512, 256), 1000);
  ASSERT_TRUE(h.Add(1, Full(1000, 3, 3)).ok());
  const std::vector<int32_t> chunks = {256, 256, 256, 232};
  int32_t done = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    h.Step();
    ASSERT_EQ(h.engine.last_work().size(), 1u);
    EXPECT_TRUE(h.engine.last_work()[0].prefill);
    EXPECT_EQ(h.engine.last_work()[0].n_tokens, chunks[i]) << "step " << i;
    done += chunks[i];
    ASSERT_NE(h.sched.Find(1), nullptr);
    EXPECT_EQ(h.sched.Find(1)->prefill_done, done);
    EXPECT_EQ(h.sched.Find(1)->generated, i + 1 == chunks.size() ? 1 : 0);
  }
  h.Step();  // now it decodes
  EXPECT_FALSE(h.engine.last_work()[0].prefill);
  EXPECT_EQ(h.sched.Find(1)->generated, 2);
  h.RunUntilIdle();
  h.ExpectFinishedNormally(1, Full(1000, 3, 3));
}

TEST(Scheduler, MaxRunningCap) {
  Harness h(Config(AdmissionMode::kReserve, 3, 64, 64), 1000);
  for (RequestId id = 0; id < 10; ++id) ASSERT_TRUE(h.Add(id, Full(20, 10, 10)).ok());
  while (h.sched.HasWork()) {
    h.Step();
    EXPECT_LE(h.sched.num_running(), 3);
    EXPECT_LE(h.engine.running(), 3);
  }
  EXPECT_EQ(h.engine.peak_running(), 3);
  std::vector<RequestId> order(10);
  std::iota(order.begin(), order.end(), 0);
  EXPECT_EQ(h.engine.first_run_order(), order);
  for (RequestId id = 0; id < 10; ++id) h.ExpectFinishedNormally(id, Full(20, 10, 10));
}

// Reserve mode: a head request that does not fit blocks smaller ones behind
// it, which would fit; they run in arrival order.
TEST(Scheduler, FcfsHeadBlocksSmallerRequests) {
  Harness h(Config(AdmissionMode::kReserve), 64);   // 64 blocks of 16
  ASSERT_TRUE(h.Add(1, Full(100, 400, 400)).ok());  // 500 slots: 32 blocks
  h.Step();
  ASSERT_TRUE(h.Add(2, Full(100, 700, 700)).ok());  // 800 slots: 50 blocks, does not fit beside 1
  ASSERT_TRUE(h.Add(3, Full(10, 6, 6)).ok());       // 1 block: would fit
  EXPECT_EQ(h.sched.BlocksFor(500), 32);
  EXPECT_EQ(h.sched.BlocksFor(800), 50);
  while (h.sched.Find(1) != nullptr) {
    h.Step();
    if (h.sched.Find(1) == nullptr) break;
    EXPECT_EQ(h.sched.Find(2)->state, RequestState::kWaiting);
    ASSERT_NE(h.sched.Find(3), nullptr);
    EXPECT_EQ(h.sched.Find(3)->state, RequestState::kWaiting) << "step " << h.steps;
    EXPECT_EQ(h.sched.reserved_blocks(), 32);
  }
  h.RunUntilIdle();
  EXPECT_EQ(h.engine.first_run_order(), (std::vector<RequestId>{1, 2, 3}));
  h.ExpectFinishedNormally(1, Full(100, 400, 400));
  h.ExpectFinishedNormally(2, Full(100, 700, 700));
  h.ExpectFinishedNormally(3, Full(10, 6, 6));
}

TEST(Scheduler, AddRejectsFootprintLargerThanThePool) {
  for (AdmissionMode mode : {AdmissionMode::kReserve, AdmissionMode::kOptimistic}) {
    SCOPED_TRACE(std::string(AdmissionModeName(mode)));
    Harness h(Config(mode), 64);                             // 1024 slots
    const absl::Status st = h.Add(1, Full(1000, 100, 100));  // 1100 slots
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_TRUE(h.Add(2, Full(1000, 24, 24)).ok());         // exactly the pool
    EXPECT_TRUE(h.Add(3, Beacon(500, 10000, 10000)).ok());  // 580 slots under beacon
    EXPECT_EQ(h.sched.Find(1), nullptr);
    EXPECT_EQ(h.sched.num_waiting(), 2);
    EXPECT_TRUE(h.RunUntilIdle(100000));
    EXPECT_FALSE(h.engine.records().contains(1));  // a rejected request is never removed
    h.ExpectFinishedNormally(2, Full(1000, 24, 24));
    h.ExpectFinishedNormally(3, Beacon(500, 10000, 10000));
    EXPECT_LE(h.engine.records().at(3).max_slots, 580);
    EXPECT_EQ(h.engine.UsedBlocks(), 0);
  }
}

// Add accepted it, so it must run, in either mode: a request whose prompt
// alone needs the whole pool.
TEST(Scheduler, RequestThatFillsThePoolRuns) {
  for (AdmissionMode mode : {AdmissionMode::kReserve, AdmissionMode::kOptimistic}) {
    SCOPED_TRACE(std::string(AdmissionModeName(mode)));
    Harness h(Config(mode), 64);
    ASSERT_TRUE(h.Add(1, Full(1020, 4, 4)).ok());  // 1024 slots: all 64 blocks
    ASSERT_TRUE(h.Add(2, Full(10, 4, 4)).ok());
    EXPECT_TRUE(h.RunUntilIdle(1000)) << "request 1 never admitted: " << h.sched.num_waiting() << " waiting";
    h.ExpectFinishedNormally(1, Full(1020, 4, 4));
    h.ExpectFinishedNormally(2, Full(10, 4, 4));
  }
}

TEST(Scheduler, FullWaitingQueue) {
  SchedulerConfig c = Config();
  c.max_waiting = 2;
  Harness h(c, 100);
  ASSERT_TRUE(h.Add(1, Full(10, 5, 5)).ok());
  ASSERT_TRUE(h.Add(2, Full(10, 5, 5)).ok());
  EXPECT_EQ(h.Add(3, Full(10, 5, 5)).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(h.sched.Find(3), nullptr);
  h.Step();  // both admitted: the queue has room again
  EXPECT_EQ(h.sched.num_waiting(), 0);
  EXPECT_TRUE(h.Add(4, Full(10, 5, 5)).ok());
  h.RunUntilIdle();
  EXPECT_FALSE(h.engine.records().contains(3));
  EXPECT_EQ(h.engine.unknown_removes(), 0);
  for (RequestId id : {1, 2, 4}) h.ExpectFinishedNormally(id, Full(10, 5, 5));
}

TEST(Scheduler, AbortFreesKvAtOnce) {
  Harness h(Config(AdmissionMode::kReserve, 2), 100);
  ASSERT_TRUE(h.Add(1, Full(50, 100, 100)).ok());
  ASSERT_TRUE(h.Add(2, Full(600, 100, 100)).ok());  // mid-prefill after two steps (chunk 256)
  ASSERT_TRUE(h.Add(3, Full(10, 100, 100)).ok());   // waits: max_running 2
  for (int i = 0; i < 2; ++i) h.Step();
  ASSERT_EQ(h.sched.Find(2)->state, RequestState::kRunning);
  ASSERT_TRUE(h.sched.Find(2)->prefilling());
  ASSERT_EQ(h.sched.Find(3)->state, RequestState::kWaiting);
  EXPECT_GT(h.engine.UsedBlocks(), 0);

  EXPECT_TRUE(h.sched.Abort(3, RequestState::kFinishedCancelled));
  EXPECT_EQ(h.engine.records().at(3).state, RequestState::kFinishedCancelled);
  EXPECT_EQ(h.sched.num_waiting(), 0);
  EXPECT_TRUE(h.sched.Abort(2, RequestState::kFinishedCancelled));
  EXPECT_EQ(h.engine.UsedBlocks(), h.engine.kv(1)->num_blocks());
  EXPECT_EQ(h.sched.reserved_blocks(), h.sched.BlocksFor(150));
  const int32_t generated = h.engine.generated(1);
  EXPECT_TRUE(h.sched.Abort(1, RequestState::kFinishedCancelled));
  EXPECT_EQ(h.engine.UsedBlocks(), 0);  // before the next step
  EXPECT_EQ(h.sched.reserved_blocks(), 0);
  EXPECT_FALSE(h.sched.HasWork());
  EXPECT_FALSE(h.sched.Abort(1, RequestState::kFinishedCancelled));  // already over
  EXPECT_FALSE(h.sched.Abort(42, RequestState::kFinishedCancelled));
  for (RequestId id : {1, 2, 3}) {
    EXPECT_EQ(h.engine.records().at(id).remove_calls, 1) << id;
    EXPECT_EQ(h.engine.records().at(id).state, RequestState::kFinishedCancelled) << id;
  }
  EXPECT_EQ(h.engine.records().at(1).sched_generated, generated);
  EXPECT_EQ(h.engine.first_run_order(), (std::vector<RequestId>{1, 2}));
  EXPECT_FALSE(h.Step().ran);
}

TEST(Scheduler, DeadlineExpiry) {
  Harness h(Config(AdmissionMode::kReserve, 1), 100);
  ASSERT_TRUE(h.Add(1, Full(50, 1000, 1000), 55ms).ok());  // running when it expires
  ASSERT_TRUE(h.Add(2, Full(10, 5, 5), 25ms).ok());        // waiting when it expires
  ASSERT_TRUE(h.Add(3, Full(10, 5, 5)).ok());              // no deadline
  StepReport r;
  for (int i = 0; i < 3; ++i) {  // t0, +10, +20 ms
    r = h.Step();
    EXPECT_EQ(r.finished, 0);
  }
  EXPECT_EQ(h.sched.Find(2)->state, RequestState::kWaiting);
  r = h.Step();  // +30 ms: 2 expires
  EXPECT_EQ(r.finished, 1);
  EXPECT_EQ(h.sched.Find(2), nullptr);
  EXPECT_EQ(h.engine.records().at(2).state, RequestState::kFinishedTimeLimit);
  h.Step();
  h.Step();  // +50 ms: 1 still runs
  ASSERT_NE(h.sched.Find(1), nullptr);
  EXPECT_GT(h.engine.UsedBlocks(), 0);
  r = h.Step();  // +60 ms: 1 expires; 3 is admitted
  EXPECT_GE(r.finished, 1);
  EXPECT_EQ(h.sched.Find(1), nullptr);
  EXPECT_EQ(h.engine.records().at(1).state, RequestState::kFinishedTimeLimit);
  EXPECT_EQ(h.engine.records().at(1).generated, 6);
  EXPECT_EQ(h.engine.kv(1), nullptr);
  h.RunUntilIdle();
  h.ExpectFinishedNormally(3, Full(10, 5, 5));
  EXPECT_EQ(h.engine.first_run_order(), (std::vector<RequestId>{1, 3}));
  EXPECT_EQ(h.engine.UsedBlocks(), 0);
  for (RequestId id : {1, 2, 3}) EXPECT_EQ(h.engine.records().at(id).remove_calls, 1);
}

TEST(Scheduler, AbortAllAndDestructorDrain) {
  {
    Harness h(Config(AdmissionMode::kReserve, 2), 100);
    for (RequestId id = 0; id < 5; ++id) ASSERT_TRUE(h.Add(id, Full(30, 100, 100)).ok());
    for (int i = 0; i < 4; ++i) h.Step();
    EXPECT_EQ(h.sched.num_running(), 2);
    EXPECT_EQ(h.sched.num_waiting(), 3);
    h.sched.AbortAll(RequestState::kFinishedCancelled);
    EXPECT_FALSE(h.sched.HasWork());
    EXPECT_EQ(h.engine.UsedBlocks(), 0);
    EXPECT_EQ(h.sched.reserved_blocks(), 0);
    for (RequestId id = 0; id < 5; ++id) {
      EXPECT_EQ(h.engine.records().at(id).state, RequestState::kFinishedCancelled);
      EXPECT_EQ(h.engine.records().at(id).remove_calls, 1);
    }
  }
  SimEngine engine(100, 16);
  {
    Scheduler sched(Config(AdmissionMode::kReserve, 2), engine.mutable_cache(), &engine);
    for (RequestId id = 0; id < 5; ++id) ASSERT_TRUE(AddSimRequest(sched, engine, id, Full(30, 100, 100)).ok());
    for (int i = 0; i < 4; ++i) sched.Step(SchedClock::now());
    EXPECT_GT(engine.UsedBlocks(), 0);
  }
  EXPECT_EQ(engine.UsedBlocks(), 0);
  EXPECT_EQ(engine.cache().pool().num_free(), 100);
  for (RequestId id = 0; id < 5; ++id) {
    EXPECT_EQ(engine.records().at(id).state, RequestState::kFinishedCancelled);
    EXPECT_EQ(engine.records().at(id).remove_calls, 1);
  }
}

TEST(Scheduler, EngineFailsOneSequence) {
  Harness h(Config(), 100);
  for (RequestId id = 0; id < 3; ++id) ASSERT_TRUE(h.Add(id, Full(30, 20, 20)).ok());
  h.Step();
  h.engine.InjectError(1);
  const StepReport r = h.Step();
  EXPECT_EQ(r.finished, 1);
  EXPECT_EQ(h.sched.Find(1), nullptr);
  EXPECT_EQ(h.engine.records().at(1).state, RequestState::kFinishedError);
  h.RunUntilIdle();
  h.ExpectFinishedNormally(0, Full(30, 20, 20));
  h.ExpectFinishedNormally(2, Full(30, 20, 20));
  EXPECT_EQ(h.engine.UsedBlocks(), 0);
}

// A SimEngine whose next Run, when armed, breaks the outcome contract.
class BrokenOutcomes : public StepEngine {
 public:
  enum class Break { kNone, kDropLast, kWrongId, kSchedulersState };
  explicit BrokenOutcomes(SimEngine* engine) : e_(engine) {}

  absl::Status Run(std::span<const ScheduledSeq> work, std::vector<SeqResult>* outcomes) override {
    absl::Status s = e_->Run(work, outcomes);
    if (!s.ok() || outcomes->empty()) return s;
    switch (armed) {
      case Break::kNone: break;
      case Break::kDropLast: outcomes->pop_back(); break;
      case Break::kWrongId: outcomes->back().id += 1000; break;
      case Break::kSchedulersState: outcomes->back().state = RequestState::kFinishedCancelled; break;
    }
    armed = Break::kNone;
    return s;
  }
  int32_t Preempt(RequestId id) override { return e_->Preempt(id); }
  void Remove(const SchedRequest& request) override { e_->Remove(request); }

  Break armed = Break::kNone;

 private:
  SimEngine* e_;
};

// Outcomes the scheduler cannot pair with its work (too few, another id, a
// state only the scheduler sets) fail the step, as an engine error does:
// nothing is skipped silently.
TEST(Scheduler, OutcomesThatDoNotMatchTheWorkFailTheStep) {
  using Break = BrokenOutcomes::Break;
  for (Break b : {Break::kDropLast, Break::kWrongId, Break::kSchedulersState}) {
    SCOPED_TRACE(static_cast<int>(b));
    SimEngine engine(100, 16);
    BrokenOutcomes broken(&engine);
    {
      Scheduler sched(Config(), engine.mutable_cache(), &broken);
      const SchedClock::time_point t0 = SchedClock::time_point{} + std::chrono::seconds(1000);
      for (RequestId id = 0; id < 3; ++id) ASSERT_TRUE(AddSimRequest(sched, engine, id, Full(30, 20, 20)).ok());
      ASSERT_TRUE(sched.Step(t0).engine_status.ok());
      broken.armed = b;
      const StepReport r = sched.Step(t0 + std::chrono::milliseconds(10));
      EXPECT_EQ(r.engine_status.code(), absl::StatusCode::kInternal) << r.engine_status;
      EXPECT_EQ(r.finished, 3);
      EXPECT_FALSE(sched.HasWork());
    }
    for (RequestId id = 0; id < 3; ++id) {
      EXPECT_EQ(engine.records().at(id).state, RequestState::kFinishedError) << id;
      EXPECT_EQ(engine.records().at(id).remove_calls, 1) << id;
    }
    EXPECT_EQ(engine.UsedBlocks(), 0);
  }
}

}  // namespace
}  // namespace beacon
