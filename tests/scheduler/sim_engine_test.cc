// SimEngine: real block accounting, prefill / first sample / decode, the stop
// and length ends, preemption and recompute, protocol errors, and its
// compression emulation checked step by step against the real
// SequenceCompressor driving a real sequence.
#include "scheduler/sim_engine.h"

#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kv/policy/sequence_compressor.h"
#include "tests/kv/policy_test_util.h"

namespace beacon {
namespace {

SimSequenceSpec Spec(int32_t prompt, int32_t output, int32_t max_new, const std::string& policy = "full") {
  SimSequenceSpec s;
  s.prompt_tokens = prompt;
  s.output_tokens = output;
  s.max_new_tokens = max_new;
  s.kv = *KvPolicyOptions::DefaultsForName(policy);
  return s;
}

// The SimEngine alone, with the KV manager a scheduler would own over it:
// sequences registered with both, each prefill run's tokens counted as the
// scheduler counts them (ScheduledSeq::computed), the KV released before Preempt
// and freed after Remove, as the scheduler does.
struct Sim {
  Sim(int32_t blocks, int32_t block_size) : e(blocks, block_size), kv(e.mutable_cache()) {}
  absl::Status Add(RequestId id, const SimSequenceSpec& spec) {
    if (absl::Status s = e.AddSequence(id, spec); !s.ok()) return s;
    return kv.Add(id, MakeSimKvSpec(id, spec, /*with_prompt=*/false));
  }
  ScheduledSeq Work(RequestId id, int32_t n, bool prefill) {
    return {id, n, prefill, prefill ? computed[id] : 0, kv.kv(id)};
  }
  absl::Status Run(std::span<const ScheduledSeq> work, std::vector<SeqResult>* out) {
    absl::Status s = e.Run(work, out);
    if (s.ok()) {
      for (const ScheduledSeq& w : work) computed[w.id] += w.prefill ? w.n_tokens : 0;
    }
    return s;
  }
  int32_t Preempt(RequestId id) {
    kv.Release(id);
    computed[id] = 0;
    return e.Preempt(id);
  }
  void Remove(const SchedRequest& r) {
    e.Remove(r);
    kv.Remove(r.id);
  }

  SimEngine e;
  KvCacheManager kv;  // after e: over its cache
  std::map<RequestId, int32_t> computed;
};

// Runs one ScheduledSeq and returns its outcome; fails the test on a step error.
SeqResult RunOne(Sim& sim, RequestId id, int32_t n, bool prefill) {
  const ScheduledSeq w = sim.Work(id, n, prefill);
  std::vector<SeqResult> out;
  const absl::Status st = sim.Run({&w, 1}, &out);
  EXPECT_TRUE(st.ok()) << st;
  return out.empty() ? SeqResult{} : out[0];
}

SchedRequest Final(RequestId id, RequestState state, int32_t generated) {
  SchedRequest r;
  r.id = id;
  r.state = state;
  r.generated = generated;
  return r;
}

TEST(SimEngine, PrefillSamplesFirstTokenDecodeAppendsAndStops) {
  Sim sim(10, 16);
  SimEngine& e = sim.e;
  ASSERT_TRUE(sim.Add(1, Spec(40, 5, 10)).ok());
  EXPECT_EQ(sim.kv.BlocksToAppend(1, 40), 3);
  SeqResult o = RunOne(sim, 1, 16, true);
  EXPECT_FALSE(o.sampled);
  EXPECT_EQ(o.state, RequestState::kRunning);
  EXPECT_EQ(e.UsedBlocks(), 1);
  o = RunOne(sim, 1, 24, true);  // completes the prompt: the first token
  EXPECT_TRUE(o.sampled);
  EXPECT_EQ(o.state, RequestState::kRunning);
  EXPECT_EQ(e.kv(1)->num_slots(), 40);
  EXPECT_EQ(e.UsedBlocks(), 3);
  EXPECT_EQ(sim.kv.BlocksToAppend(1, 8), 0);
  EXPECT_EQ(sim.kv.BlocksToAppend(1, 9), 1);
  for (int i = 0; i < 3; ++i) {
    o = RunOne(sim, 1, 1, false);
    EXPECT_TRUE(o.sampled);
    EXPECT_EQ(o.state, RequestState::kRunning);
  }
  EXPECT_EQ(e.kv(1)->num_slots(), 43);
  o = RunOne(sim, 1, 1, false);  // the 5th token: simulated EOS
  EXPECT_EQ(o.state, RequestState::kFinishedStopped);
  EXPECT_EQ(e.generated(1), 5);
  EXPECT_EQ(e.kv(1)->num_slots(), 44);  // prompt + generated - 1
  EXPECT_EQ(e.running(), 1);
  EXPECT_EQ(e.steps(), 6);
  EXPECT_EQ(e.tokens(), 44);
  // Running a finished sequence again is a protocol error.
  const ScheduledSeq again = sim.Work(1, 1, false);
  std::vector<SeqResult> out;
  EXPECT_FALSE(sim.Run({&again, 1}, &out).ok());

  sim.Remove(Final(1, RequestState::kFinishedStopped, 5));
  EXPECT_EQ(e.UsedBlocks(), 0);
  EXPECT_EQ(e.running(), 0);
  EXPECT_EQ(e.peak_running(), 1);
  const SimEngine::Record& r = e.records().at(1);
  EXPECT_EQ(r.state, RequestState::kFinishedStopped);
  EXPECT_EQ(r.generated, 5);
  EXPECT_EQ(r.sched_generated, 5);
  EXPECT_EQ(r.max_slots, 44);
  EXPECT_EQ(r.remove_calls, 1);
  EXPECT_EQ(e.kv(1), nullptr);
  sim.Remove(Final(1, RequestState::kFinishedStopped, 5));  // a second Remove is counted
  EXPECT_EQ(e.records().at(1).remove_calls, 2);
  sim.Remove(Final(99, RequestState::kFinishedCancelled, 0));
  EXPECT_EQ(e.unknown_removes(), 1);
  EXPECT_EQ(sim.Add(1, Spec(4, 1, 1)).code(), absl::StatusCode::kAlreadyExists);
}

TEST(SimEngine, LengthAndStopEnds) {
  Sim sim(100, 16);
  SimEngine& e = sim.e;
  ASSERT_TRUE(sim.Add(1, Spec(8, 10, 10)).ok());  // output == max: ends by length
  ASSERT_TRUE(sim.Add(2, Spec(8, 1, 1)).ok());    // ends on the prefill's sample
  ASSERT_TRUE(sim.Add(3, Spec(8, 1, 5)).ok());    // EOS on the first token
  ASSERT_TRUE(sim.Add(4, Spec(8, 50, 3)).ok());   // EOS beyond max: length
  EXPECT_EQ(RunOne(sim, 2, 8, true).state, RequestState::kFinishedLength);
  EXPECT_EQ(RunOne(sim, 3, 8, true).state, RequestState::kFinishedStopped);
  EXPECT_EQ(RunOne(sim, 1, 8, true).state, RequestState::kRunning);
  for (int i = 2; i <= 9; ++i) EXPECT_EQ(RunOne(sim, 1, 1, false).state, RequestState::kRunning) << i;
  EXPECT_EQ(RunOne(sim, 1, 1, false).state, RequestState::kFinishedLength);
  RunOne(sim, 4, 8, true);
  RunOne(sim, 4, 1, false);
  EXPECT_EQ(RunOne(sim, 4, 1, false).state, RequestState::kFinishedLength);
  EXPECT_EQ(e.generated(4), 3);
  EXPECT_EQ(e.peak_running(), 4);
}

TEST(SimEngine, PoolExhaustionFailsTheStepAllOrNothing) {
  Sim sim(2, 16);
  SimEngine& e = sim.e;
  ASSERT_TRUE(sim.Add(1, Spec(40, 5, 5)).ok());
  const ScheduledSeq w = sim.Work(1, 40, true);
  std::vector<SeqResult> out;
  const absl::Status st = sim.Run({&w, 1}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_EQ(e.exhausted(), 1);
  EXPECT_EQ(e.UsedBlocks(), 0);
  EXPECT_EQ(e.steps(), 0);
}

TEST(SimEngine, PreemptReleasesAndRecomputeSamplesNothing) {
  Sim sim(10, 16);
  SimEngine& e = sim.e;
  ASSERT_TRUE(sim.Add(1, Spec(20, 100, 100)).ok());
  RunOne(sim, 1, 20, true);
  for (int i = 0; i < 5; ++i) RunOne(sim, 1, 1, false);
  EXPECT_EQ(e.generated(1), 6);
  EXPECT_EQ(e.kv(1)->num_slots(), 25);
  EXPECT_EQ(sim.Preempt(1), 25);  // prompt + generated - 1
  EXPECT_EQ(e.UsedBlocks(), 0);
  EXPECT_EQ(e.running(), 0);
  EXPECT_EQ(sim.kv.BlocksToAppend(1, 25), 2);
  const ScheduledSeq decode = sim.Work(1, 1, false);
  std::vector<SeqResult> out;
  EXPECT_FALSE(sim.Run({&decode, 1}, &out).ok());  // must recompute first
  EXPECT_EQ(e.protocol_errors(), 1);
  SeqResult o = RunOne(sim, 1, 16, true);
  EXPECT_FALSE(o.sampled);
  o = RunOne(sim, 1, 9, true);  // recompute done: no sample
  EXPECT_FALSE(o.sampled);
  EXPECT_EQ(o.state, RequestState::kRunning);
  EXPECT_EQ(e.generated(1), 6);
  o = RunOne(sim, 1, 1, false);
  EXPECT_TRUE(o.sampled);
  EXPECT_EQ(e.generated(1), 7);
  EXPECT_EQ(e.kv(1)->num_slots(), 26);

  // Preempted mid first prefill: the prompt again, and its end samples.
  ASSERT_TRUE(sim.Add(2, Spec(30, 100, 100)).ok());
  RunOne(sim, 2, 10, true);
  EXPECT_EQ(sim.Preempt(2), 30);
  EXPECT_TRUE(RunOne(sim, 2, 30, true).sampled);
  EXPECT_EQ(e.generated(2), 1);
  sim.Remove(Final(1, RequestState::kFinishedCancelled, 7));
  sim.Remove(Final(2, RequestState::kFinishedCancelled, 1));
  EXPECT_EQ(e.UsedBlocks(), 0);
  EXPECT_EQ(e.records().at(1).preemptions, 1);
  EXPECT_EQ(sim.Preempt(77), 0);
  EXPECT_EQ(e.unknown_removes(), 1);
}

// A compressing sequence evicts after every recompute chunk past the prompt
// (as engine/generation.cc): at most max(prompt, bound) + one chunk, whatever
// it had generated.
TEST(SimEngine, CompressingRecomputeStaysWithinPeakPlusChunk) {
  Sim sim(100, 16);
  SimEngine& e = sim.e;
  SimSequenceSpec spec = Spec(20, 1000, 1000, "beacon");
  spec.kv.budget = 64;
  spec.kv.interval = 16;
  spec.kv.keep_prompt = true;  // bound 84, peak 100
  ASSERT_TRUE(sim.Add(1, spec).ok());
  RunOne(sim, 1, 20, true);
  for (int i = 0; i < 300; ++i) RunOne(sim, 1, 1, false);
  EXPECT_EQ(sim.Preempt(1), 320);
  for (int32_t chunk : {128, 128, 64}) {
    const SeqResult o = RunOne(sim, 1, chunk, true);
    EXPECT_FALSE(o.sampled);
    EXPECT_EQ(e.kv(1)->num_slots(), 84);  // bound
  }
  EXPECT_EQ(e.kv(1)->num_slots(), 84);
  EXPECT_EQ(e.generated(1), 301);
  EXPECT_TRUE(RunOne(sim, 1, 1, false).sampled);
  sim.Remove(Final(1, RequestState::kFinishedCancelled, 302));
  EXPECT_EQ(e.records().at(1).max_slots, 84 + 128);
  EXPECT_EQ(e.UsedBlocks(), 0);

  // Without keep_prompt a long prompt is not evicted mid-prompt.
  spec = Spec(200, 1000, 1000, "streaming");
  spec.kv.budget = 64;
  spec.kv.interval = 16;
  spec.kv.keep_prompt = false;
  ASSERT_TRUE(sim.Add(2, spec).ok());
  RunOne(sim, 2, 200, true);
  for (int i = 0; i < 100; ++i) RunOne(sim, 2, 1, false);
  EXPECT_EQ(sim.Preempt(2), 300);
  RunOne(sim, 2, 128, true);
  EXPECT_EQ(e.kv(2)->num_slots(), 128);  // inside the prompt: kept
  RunOne(sim, 2, 128, true);
  EXPECT_EQ(e.kv(2)->num_slots(), 64);  // past it: evicted to the bound
  RunOne(sim, 2, 44, true);
  EXPECT_EQ(e.kv(2)->num_slots(), 64);
}

TEST(SimEngine, ProtocolErrorsChangeNothing) {
  Sim sim(10, 16);
  SimEngine& e = sim.e;
  ASSERT_TRUE(sim.Add(1, Spec(20, 5, 5)).ok());
  std::vector<SeqResult> out;
  ScheduledSeq other_count = sim.Work(1, 4, true);
  other_count.computed = 3;
  ScheduledSeq no_kv = sim.Work(1, 4, true);
  no_kv.kv = nullptr;
  const std::vector<std::vector<ScheduledSeq>> bad = {
      {sim.Work(2, 4, true)},                        // unknown id
      {sim.Work(1, 21, true)},                       // past the prefill target
      {sim.Work(1, 0, true)},                        // empty chunk
      {sim.Work(1, 1, false)},                       // decode while prefilling
      {sim.Work(1, 4, true), sim.Work(1, 4, true)},  // twice in a step
      {other_count},                                 // the scheduler counts other tokens as computed
      {no_kv},                                       // no KV to write
  };
  for (const auto& w : bad) EXPECT_FALSE(sim.Run(w, &out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(e.protocol_errors(), 7);
  EXPECT_EQ(e.UsedBlocks(), 0);
  EXPECT_EQ(e.steps(), 0);
  EXPECT_EQ(sim.Add(3, Spec(0, 1, 1)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SimEngine, InjectedErrorReleasesTheSequence) {
  Sim sim(10, 16);
  SimEngine& e = sim.e;
  ASSERT_TRUE(sim.Add(1, Spec(20, 5, 5)).ok());
  ASSERT_TRUE(sim.Add(2, Spec(20, 5, 5)).ok());
  const std::vector<ScheduledSeq> w = {sim.Work(1, 20, true), sim.Work(2, 20, true)};
  std::vector<SeqResult> out;
  ASSERT_TRUE(sim.Run(w, &out).ok());
  e.InjectError(2);
  out.clear();
  const std::vector<ScheduledSeq> d = {sim.Work(1, 1, false), sim.Work(2, 1, false)};
  ASSERT_TRUE(sim.Run(d, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].state, RequestState::kRunning);
  EXPECT_EQ(out[1].state, RequestState::kFinishedError);
  EXPECT_FALSE(out[1].sampled);
  EXPECT_EQ(e.UsedBlocks(), 2);
  EXPECT_EQ(e.running(), 1);
}

TEST(SimEngine, MakeSimRequestUsesPeakSlots) {
  SimSequenceSpec s = Spec(200, 2000, 2000, "beacon");
  s.kv.budget = 64;
  s.kv.interval = 16;
  s.kv.keep_prompt = true;
  SchedRequest r = MakeSimRequest(7, s);
  EXPECT_EQ(r.id, 7u);
  EXPECT_EQ(r.prompt_tokens, 200);
  EXPECT_EQ(r.max_new_tokens, 2000);
  EXPECT_EQ(r.peak_slots, 280);
  EXPECT_EQ(MakeSimRequest(8, Spec(200, 5, 300)).peak_slots, 500);
}

// The emulation against the real compressor: same slot count after every
// decode step, and the most slots held never exceeds PeakSlots (and reaches
// it on a long run).
TEST(SimEngine, CompressionMatchesSequenceCompressor) {
  struct Case {
    std::string policy;
    int32_t budget, interval;
    bool keep_prompt;
    int32_t prompt;
  };
  const std::vector<Case> cases = {
      {"streaming", 64, 16, true, 10},  {"streaming", 64, 16, true, 100}, {"streaming", 32, 7, false, 10},
      {"streaming", 32, 7, false, 200}, {"random", 48, 1, true, 33},      {"streaming", 20, 64, false, 5},
      {"full", 64, 16, true, 50},
  };
  const int steps = 400;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.policy + " budget " + std::to_string(c.budget) + " interval " + std::to_string(c.interval) +
                 " keep_prompt " + std::to_string(c.keep_prompt) + " prompt " + std::to_string(c.prompt));
    KvPolicyOptions o = *KvPolicyOptions::DefaultsForName(c.policy);
    o.budget = c.budget;
    o.interval = c.interval;
    o.keep_prompt = c.keep_prompt;
    o.sinks = 2;
    o.window = 4;
    SimSequenceSpec spec{c.prompt, steps + 1, steps + 1, o};
    Sim sim(200, 4);
    SimEngine& e = sim.e;
    ASSERT_TRUE(sim.Add(1, spec).ok());

    const PolicyModelInfo m = kvtest::SmallModel();
    auto comp = SequenceCompressor::Create(o, m, c.prompt);
    ASSERT_TRUE(comp.ok()) << comp.status();
    kvtest::TestSequence seq(m, 4, 200);
    std::mt19937 rng(3);
    std::vector<int32_t> pos(c.prompt);
    for (int32_t i = 0; i < c.prompt; ++i) pos[i] = i;
    seq.Append(pos, rng);
    RunOne(sim, 1, c.prompt, true);
    for (int t = 1; t <= steps; ++t) {
      const std::vector<int32_t> one = {c.prompt + t - 1};
      seq.Append(one, rng);
      (*comp)->AfterDecodeStep(&seq.kv(), c.prompt + t);
      RunOne(sim, 1, 1, false);
      ASSERT_EQ(e.kv(1)->num_slots(), seq.kv().num_slots()) << "decode step " << t;
      ASSERT_EQ(e.kv(1)->num_blocks(), seq.kv().num_blocks()) << "decode step " << t;
      ASSERT_EQ(e.kv(1)->peak_slots(), seq.kv().peak_slots()) << "decode step " << t;
    }
    const int32_t max_slots = e.kv(1)->peak_slots();  // counted before an eviction
    const int64_t peak = SequenceCompressor::PeakSlots(o, c.prompt, steps + 1);
    EXPECT_LE(max_slots, peak);
    EXPECT_GE(max_slots, o.compresses() ? peak : peak - 1);  // full: the last token is never fed
  }
}

}  // namespace
}  // namespace beacon
