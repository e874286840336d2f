// The capacity planner and the scheduler tests trust the SimEngine to hold
// exactly the KV slots the real engine holds. This drives the real
// GenerationEngine (Generations on the default model, BeaconKV compression)
// and the SimEngine through the same trace of steps (chunked prefill, decode,
// a preemption with its recompute, more decode) and compares the slot counts
// after every step. Both ask one EvictionSchedule (kv/policy/eviction_schedule.h);
// this test is what keeps them from drifting apart if either changes.
#include <memory>
#include <string>
#include <vector>

#include "engine/serving/generation_engine.h"
#include "gtest/gtest.h"
#include "scheduler/sim_engine.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

class NullSink : public RequestSink {
 public:
  void OnTokens(std::span<const int32_t>, std::string_view, TextPart, std::span<const PositionLogprobs>) override {}
  void OnFinish(const StreamFinal&) override {}
  void OnRejected(const absl::Status&) override {}
};

struct Case {
  const char* name;
  bool keep_prompt;
  int32_t budget;
  int32_t interval;
};

class GenerationEngineSimTest : public ::testing::TestWithParam<Case> {};

TEST_P(GenerationEngineSimTest, SameSlotCountsAtEveryStep) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "models/default.gguf missing";
  const Case& c = GetParam();
  constexpr int32_t kMaxTokens = 90;
  constexpr int32_t kChunk = 16;
  constexpr RequestId kId = 7;

  KvPolicyOptions kv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  kv.budget = c.budget;
  kv.interval = c.interval;
  kv.keep_prompt = c.keep_prompt;
  kv.sinks = 2;
  kv.window = 4;
  ASSERT_TRUE(kv.Validate().ok()) << kv.Validate();

  std::vector<int32_t> prompt =
      rt->tokenizer()->Encode("A plan: first gather the facts, then weigh them, then decide and act.",
                              /*parse_special=*/false, /*add_bos=*/true);
  ASSERT_GT(prompt.size(), static_cast<size_t>(kChunk));
  const int32_t n_prompt = static_cast<int32_t>(prompt.size());

  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(4096, 16);
  GenerationEngine real(rt->backend(), cache.get(), rt->tokenizer(), rt->config());
  PreparedRequest p;
  p.request_id = "trace";
  p.prompt = prompt;
  p.options.max_tokens = kMaxTokens;
  p.options.ignore_eos = true;
  p.options.kv = kv;
  // Each engine writes the KV its own manager holds (as a scheduler's would).
  KvCacheManager real_kv(cache.get());
  ASSERT_TRUE(real_kv.Add(kId, KvSeqSpecFor(p, /*with_prompt=*/false)).ok());
  ASSERT_TRUE(real.Add(kId, p, std::make_shared<NullSink>(), real_kv.kv(kId)).ok());

  SimEngine sim(cache->pool().num_blocks(), 16);
  const SimSequenceSpec spec{n_prompt, kMaxTokens, kMaxTokens, kv};
  ASSERT_TRUE(sim.AddSequence(kId, spec).ok());
  KvCacheManager sim_kv(sim.mutable_cache());
  ASSERT_TRUE(sim_kv.Add(kId, MakeSimKvSpec(kId, spec, /*with_prompt=*/false)).ok());

  auto real_slots = [&] { return real_kv.HeldSlots(); };
  int step = 0;
  auto run_both = [&](ScheduledSeq w) {
    std::vector<SeqResult> ro, so;
    w.kv = real_kv.kv(kId);
    ASSERT_TRUE(real.Run({&w, 1}, &ro).ok()) << "step " << step;
    w.kv = sim_kv.kv(kId);
    ASSERT_TRUE(sim.Run({&w, 1}, &so).ok()) << "step " << step;
    ASSERT_EQ(ro.size(), 1u);
    ASSERT_EQ(so.size(), 1u);
    EXPECT_EQ(ro[0].sampled, so[0].sampled) << "step " << step;
    ASSERT_EQ(real_slots(), sim.kv(kId)->num_slots()) << c.name << ": slot counts differ after step " << step;
    ++step;
  };
  auto prefill = [&](int32_t total) {
    for (int32_t done = 0; done < total;) {
      const int32_t n = std::min(kChunk, total - done);
      run_both(ScheduledSeq{kId, n, /*prefill=*/true, /*computed=*/done});
      done += n;
    }
  };

  prefill(n_prompt);
  for (int i = 0; i < 50; ++i) run_both(ScheduledSeq{kId, 1, false});
  // Preempted mid-generation: both give the KV back and ask for the same
  // recompute, which evicts as it goes past the prompt.
  real_kv.Release(kId);
  const int32_t target_real = real.Preempt(kId);
  sim_kv.Release(kId);
  const int32_t target_sim = sim.Preempt(kId);
  ASSERT_EQ(target_real, target_sim);
  ASSERT_EQ(real_slots(), 0);
  prefill(target_real);
  for (int i = 0; i < 30; ++i) run_both(ScheduledSeq{kId, 1, false});
  EXPECT_GT(real.totals().evictions, 0) << "the trace never evicted: it tests nothing";
  SchedRequest r;
  r.id = kId;
  r.state = RequestState::kFinishedLength;
  real.Remove(r);
  real_kv.Remove(kId);
  sim.Remove(r);
  sim_kv.Remove(kId);
  EXPECT_EQ(sim.UsedBlocks(), 0);
}

// The engine checks the scheduler's count of computed tokens against its
// generation's and fails the step on a mismatch (INTERNAL), rather than
// running a chunk from the wrong place; a step naming another KV fails too.
TEST(GenerationEngineProtocol, DisagreeingCountsFailTheStep) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "models/default.gguf missing";
  std::unique_ptr<KvCache> cache = *rt->MakeKvCache(512, 16);
  GenerationEngine engine(rt->backend(), cache.get(), rt->tokenizer(), rt->config());
  KvCacheManager kv(cache.get());
  PreparedRequest p;
  p.prompt = {100, 200, 300, 400, 500, 600, 700, 800};
  p.options.max_tokens = 4;
  ASSERT_TRUE(kv.Add(1, KvSeqSpecFor(p, false)).ok());
  ASSERT_TRUE(kv.Add(2, KvSeqSpecFor(p, false)).ok());
  ASSERT_TRUE(engine.Add(1, p, std::make_shared<NullSink>(), kv.kv(1)).ok());
  std::vector<SeqResult> out;
  const ScheduledSeq first{1, 4, true, 0, kv.kv(1)};
  ASSERT_TRUE(engine.Run({&first, 1}, &out).ok());
  const ScheduledSeq wrong_count{1, 4, true, 3, kv.kv(1)};
  EXPECT_EQ(engine.Run({&wrong_count, 1}, &out).code(), absl::StatusCode::kInternal);
  const ScheduledSeq adopted_nothing{1, 4, true, 0, kv.kv(1)};
  EXPECT_EQ(engine.Run({&adopted_nothing, 1}, &out).code(), absl::StatusCode::kInternal);
  const ScheduledSeq other_kv{1, 4, true, 4, kv.kv(2)};
  EXPECT_EQ(engine.Run({&other_kv, 1}, &out).code(), absl::StatusCode::kInternal);
  const ScheduledSeq right{1, 4, true, 4, kv.kv(1)};
  EXPECT_TRUE(engine.Run({&right, 1}, &out).ok());
  EXPECT_EQ(out.size(), 2u);
  EXPECT_TRUE(out.back().sampled);
  SchedRequest r;
  r.id = 1;
  r.state = RequestState::kFinishedCancelled;
  engine.Remove(r);
}

INSTANTIATE_TEST_SUITE_P(Policies, GenerationEngineSimTest,
                         ::testing::Values(Case{"keep_prompt", true, 24, 8}, Case{"drop_prompt", false, 32, 8},
                                           Case{"interval_1", true, 16, 1}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace beacon
