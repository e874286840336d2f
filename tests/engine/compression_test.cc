// KV compression on the real default model: with a budget that holds the
// whole sequence every policy is token-identical to `full`; under a tight
// budget the cache never exceeds the policy's peak bound, evictions happen,
// and every block is returned at the end.
#include "engine/batch_runner.h"
#include "engine/generation.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

class CompressionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = testing::DefaultModel();
    if (rt_ == nullptr) GTEST_SKIP() << "default model not present at " << BEACON_MODEL_PATH;
  }

  struct Run {
    std::vector<int32_t> ids;
    int32_t max_slots = 0;
    int32_t peak_bound = 0;
    int64_t evictions = 0;
  };

  // Greedy generation of `n` tokens; checks the slot bound after every step.
  Run Generate(const KvPolicyOptions& kv, int n, bool keep_prompt = true) {
    auto prompt = rt_->EncodePrompt("Write a detailed plan for a vegetable garden, then explain each step.", true, "");
    EXPECT_TRUE(prompt.ok());
    GenerationOptions o;
    o.max_tokens = n;
    o.ignore_eos = true;
    o.kv = kv;
    o.kv.keep_prompt = keep_prompt;
    const int32_t n_prompt = static_cast<int32_t>(prompt->size());
    Run run;
    run.peak_bound = static_cast<int32_t>(SequenceCompressor::PeakSlots(o.kv, n_prompt, n));
    std::unique_ptr<KvCache> cache = *rt_->MakeKvCache(run.peak_bound, 16);
    auto g = Generation::Create(rt_->tokenizer(), cache.get(), rt_->config(), *prompt, o);
    EXPECT_TRUE(g.ok()) << g.status();
    Generation* gens[] = {g->get()};
    for (;;) {
      auto more = RunStep(rt_->backend(), gens, {}, [&](size_t, const TokenEvent& ev) { run.ids.push_back(ev.id); });
      EXPECT_TRUE(more.ok()) << more.status();
      if (!more.ok() || !*more) break;
      run.max_slots = std::max(run.max_slots, (*g)->kv()->num_slots());
      EXPECT_LE((*g)->kv()->num_slots(), run.peak_bound);
      EXPECT_LE(cache->pool().num_used() * 16, run.peak_bound + 15);
    }
    if ((*g)->compressor() != nullptr) run.evictions = (*g)->compressor()->evictions();
    run.max_slots = (*g)->kv()->peak_slots();  // the true peak, just before each eviction
    EXPECT_EQ(cache->pool().num_free(), cache->pool().num_blocks()) << "blocks kept after the end";
    return run;
  }

  Runtime* rt_ = nullptr;
};

TEST_F(CompressionTest, AmpleBudgetIsTokenIdenticalToFull) {
  const Run full = Generate(KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull), 40);
  ASSERT_EQ(full.ids.size(), 40u);
  for (KvPolicyKind policy : KvPolicyKinds()) {
    const std::string_view name = KvPolicyName(policy);
    KvPolicyOptions o = KvPolicyOptions::DefaultsFor(policy);
    o.budget = 4096;  // more than the whole sequence: never evicts
    o.interval = 8;
    const Run r = Generate(o, 40);
    EXPECT_EQ(r.ids, full.ids) << name;
    EXPECT_EQ(r.evictions, 0) << name;
  }
}

TEST_F(CompressionTest, TightBudgetStaysWithinTheBound) {
  for (KvPolicyKind policy : KvPolicyKinds()) {
    if (policy == KvPolicyKind::kFull) continue;
    const std::string_view name = KvPolicyName(policy);
    for (bool keep_prompt : {true, false}) {
      KvPolicyOptions o = KvPolicyOptions::DefaultsFor(policy);
      o.budget = 64;
      o.interval = 32;
      const Run r = Generate(o, 240, keep_prompt);
      EXPECT_EQ(r.ids.size(), 240u) << name;
      EXPECT_GT(r.evictions, 0) << name;
      EXPECT_LE(r.max_slots, r.peak_bound) << name;
      // The bound is tight: the cache really grows to it between evictions.
      EXPECT_EQ(r.max_slots, r.peak_bound) << name << " keep_prompt " << keep_prompt;
    }
  }
}

}  // namespace
}  // namespace beacon
