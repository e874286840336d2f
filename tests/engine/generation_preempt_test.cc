// Preemption by recompute (Generation::Preempt): a sequence that gives its KV
// back mid-prompt or mid-output and recomputes continues with exactly the
// tokens it would have produced (batch-invariant kernels make the recomputed
// cache bit-identical), streams no token twice, and under a compressing
// policy stays near its bound while it recomputes.
#include "engine/batch_runner.h"
#include "engine/generation.h"
#include "gtest/gtest.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

class PreemptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = testing::DefaultModel();
    if (rt_ == nullptr) GTEST_SKIP() << "default model not present at " << BEACON_MODEL_PATH;
    cache_ = *rt_->MakeKvCache(4096);
    prompt_ = *rt_->EncodePrompt("Write a short story about a lighthouse keeper.", true, "");
  }

  std::unique_ptr<Generation> Make(const GenerationOptions& o) {
    auto g = Generation::Create(rt_->tokenizer(), cache_.get(), rt_->config(), prompt_, o);
    EXPECT_TRUE(g.ok()) << g.status();
    return std::move(*g);
  }

  // Runs to completion; preempts once after `preempt_after_steps` steps.
  std::vector<int32_t> Run(const GenerationOptions& o, int preempt_after_steps, int32_t chunk,
                           int32_t* max_slots_in_recompute = nullptr) {
    std::unique_ptr<Generation> g = Make(o);
    Generation* gens[] = {g.get()};
    BatchRunnerOptions bro;
    bro.prefill_chunk = chunk;
    std::vector<int32_t> ids;
    auto on_token = [&](size_t, const TokenEvent& ev) { ids.push_back(ev.id); };
    for (int step = 0;; ++step) {
      if (step == preempt_after_steps && !g->finished()) {
        const int32_t redo = g->Preempt();
        EXPECT_EQ(g->kv()->num_slots(), 0);
        EXPECT_EQ(redo, ids.empty() ? static_cast<int32_t>(prompt_.size())
                                    : static_cast<int32_t>(prompt_.size() + ids.size()) - 1);
        EXPECT_TRUE(g->prefilling());
        // Preempted mid-prompt, the prefill simply starts over (its last
        // chunk samples the first token); otherwise the recompute samples
        // nothing.
        const bool mid_prompt = ids.empty();
        while (g->prefilling()) {
          const size_t before = ids.size();
          absl::StatusOr<bool> more = RunStep(rt_->backend(), gens, bro, on_token);
          EXPECT_TRUE(more.ok() && *more);
          if (!mid_prompt) {
            EXPECT_EQ(ids.size(), before) << "a recompute chunk streamed a token";
          }
          if (max_slots_in_recompute != nullptr) {
            *max_slots_in_recompute = std::max(*max_slots_in_recompute, g->kv()->num_slots());
          }
        }
      }
      absl::StatusOr<bool> more = RunStep(rt_->backend(), gens, bro, on_token);
      EXPECT_TRUE(more.ok()) << more.status();
      if (!*more) break;
    }
    EXPECT_EQ(cache_->pool().num_free(), cache_->pool().num_blocks());
    return ids;
  }

  Runtime* rt_ = nullptr;
  std::unique_ptr<KvCache> cache_;
  std::vector<int32_t> prompt_;
};

TEST_F(PreemptTest, FullCacheContinuesExactly) {
  GenerationOptions o;
  o.max_tokens = 48;
  o.ignore_eos = true;
  const std::vector<int32_t> ref = Run(o, -1, 512);
  ASSERT_EQ(ref.size(), 48u);
  // Mid-output (recomputed in chunks of 16), right after the first token,
  // and mid-prompt.
  EXPECT_EQ(Run(o, 20, 16), ref);
  EXPECT_EQ(Run(o, 1, 512), ref);
  EXPECT_EQ(Run(o, 1, 8), ref);  // preempted after the first 8-token prompt chunk
}

TEST_F(PreemptTest, SeededSamplingContinuesExactly) {
  GenerationOptions o;
  o.max_tokens = 40;
  o.ignore_eos = true;
  o.sampling.temperature = 0.8f;
  o.sampling.top_p = 0.95f;
  o.sampling.seed = 7;
  const std::vector<int32_t> ref = Run(o, -1, 512);
  EXPECT_EQ(Run(o, 25, 32), ref);
}

TEST_F(PreemptTest, CompressingSequenceStaysNearItsBound) {
  GenerationOptions o;
  o.max_tokens = 200;
  o.ignore_eos = true;
  o.kv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  o.kv.budget = 32;
  o.kv.interval = 16;
  int32_t max_slots = 0;
  const std::vector<int32_t> ids = Run(o, 150, 16, &max_slots);
  EXPECT_EQ(ids.size(), 200u);
  // keep_prompt: bound = prompt + budget; one 16-token chunk on top at most.
  EXPECT_LE(max_slots, static_cast<int32_t>(prompt_.size()) + 32 + 16);
  EXPECT_GT(max_slots, static_cast<int32_t>(prompt_.size()));
}

}  // namespace
}  // namespace beacon
