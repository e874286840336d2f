// The step executor on the real default model (CPU backend): a sequence
// that asks for every prompt row (prompt logprobs) in a batch with others
// gets its own rows and the others theirs, so each generates, token for
// token, what it generates alone, with the same prompt logprobs; a
// compressing sequence's evictions are reported in the step that made them;
// and a chunk cap is honoured.
#include "engine/step_executor.h"

#include <memory>
#include <vector>

#include "engine/generation.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

class StepExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = testing::DefaultModel();
    if (rt_ == nullptr) GTEST_SKIP() << "default model not present at " << BEACON_MODEL_PATH;
    cache_ = *rt_->MakeKvCache(4096);
  }
  std::unique_ptr<Generation> Make(const char* text, const GenerationOptions& o) {
    std::vector<int32_t> prompt = *rt_->EncodePrompt(text, /*chat=*/true, "");
    auto g = Generation::Create(rt_->tokenizer(), cache_.get(), rt_->config(), std::move(prompt), o);
    EXPECT_TRUE(g.ok()) << g.status();
    return std::move(*g);
  }
  // Steps `gens` to completion, `chunk` prompt tokens at a time; per
  // generation the sampled ids; per step the evictions reported.
  std::vector<std::vector<int32_t>> RunAll(std::span<Generation* const> gens, int32_t chunk,
                                           std::vector<int64_t>* evictions = nullptr) {
    std::vector<std::vector<int32_t>> ids(gens.size());
    if (evictions != nullptr) evictions->assign(gens.size(), 0);
    StepExecutor ex(rt_->backend());
    std::vector<ExecItem> items;
    std::vector<size_t> owner;
    std::vector<ExecResult> results;
    for (;;) {
      items.clear();
      owner.clear();
      for (size_t i = 0; i < gens.size(); ++i) {
        if (gens[i]->finished()) continue;
        items.push_back({gens[i], chunk});
        owner.push_back(i);
      }
      if (items.empty()) break;
      EXPECT_TRUE(ex.Run(items, &results).ok());
      EXPECT_FALSE(ex.last_on_device());  // the CPU backend draws on the host
      EXPECT_EQ(results.size(), items.size());
      for (size_t j = 0; j < results.size(); ++j) {
        EXPECT_LE(results[j].fed, chunk);
        if (results[j].event.id >= 0) ids[owner[j]].push_back(results[j].event.id);
        if (evictions != nullptr) (*evictions)[owner[j]] += results[j].evictions;
      }
    }
    return ids;
  }

  Runtime* rt_ = nullptr;
  std::unique_ptr<KvCache> cache_;
};

TEST_F(StepExecutorTest, PromptRowsInABatchGoToTheirOwnerAndOutputsMatchAlone) {
  GenerationOptions plain;
  plain.max_tokens = 12;
  plain.ignore_eos = true;
  plain.sampling.temperature = 0.0f;
  GenerationOptions rows = plain;
  rows.prompt_logprobs = 2;  // every prompt row computed and read
  const char* a = "Name three colours of the rainbow.";
  const char* b = "Write one sentence about the sea.";

  std::unique_ptr<Generation> alone_a = Make(a, plain), alone_b = Make(b, rows);
  Generation* one_a[] = {alone_a.get()};
  Generation* one_b[] = {alone_b.get()};
  const std::vector<int32_t> want_a = RunAll(one_a, 512)[0];
  const std::vector<int32_t> want_b = RunAll(one_b, 512)[0];
  ASSERT_EQ(want_a.size(), 12u);
  ASSERT_EQ(want_b.size(), 12u);

  // Together, in both orders, and with the prompts in chunks of 7.
  for (int32_t chunk : {512, 7}) {
    for (bool b_first : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "chunk " << chunk << (b_first ? ", b first" : ", a first"));
      std::unique_ptr<Generation> ga = Make(a, plain), gb = Make(b, rows);
      Generation* both[] = {b_first ? gb.get() : ga.get(), b_first ? ga.get() : gb.get()};
      const std::vector<std::vector<int32_t>> got = RunAll(both, chunk);
      EXPECT_EQ(got[b_first ? 1 : 0], want_a);
      EXPECT_EQ(got[b_first ? 0 : 1], want_b);
      ASSERT_EQ(gb->prompt_logprobs().size(), alone_b->prompt_logprobs().size());
      for (size_t p = 0; p < gb->prompt_logprobs().size(); ++p) {
        EXPECT_NEAR(gb->prompt_logprobs()[p].logprob, alone_b->prompt_logprobs()[p].logprob, 1e-4) << p;
      }
    }
  }
  EXPECT_EQ(cache_->pool().num_free(), cache_->pool().num_blocks());
}

TEST_F(StepExecutorTest, EvictionsAreReportedInTheStepThatMadeThem) {
  GenerationOptions o;
  o.max_tokens = 80;
  o.ignore_eos = true;
  o.sampling.temperature = 0.0f;
  o.kv = KvPolicyOptions::DefaultsFor(KvPolicyKind::kBeacon);
  o.kv.budget = 32;
  o.kv.interval = 8;
  o.kv.window = 8;
  std::unique_ptr<Generation> g = Make("Count from one to fifty in words.", o);
  Generation* gens[] = {g.get()};
  std::vector<int64_t> reported;
  RunAll(gens, 512, &reported);
  ASSERT_NE(g->compressor(), nullptr);
  EXPECT_GT(g->compressor()->evictions(), 0);
  EXPECT_EQ(reported[0], g->compressor()->evictions());
}

}  // namespace
}  // namespace beacon
