// The output options of a Generation on the real default model: logprobs of
// sampled and prompt tokens (against LogprobsAt of the backend's own rows),
// min_tokens, include_stop_str_in_output, skip_special_tokens, logit_bias.
#include <algorithm>
#include <cmath>

#include "engine/batch_runner.h"
#include "engine/generation.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

class GenerationOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = testing::DefaultModel();
    if (rt_ == nullptr) GTEST_SKIP() << "default model not present at " << BEACON_MODEL_PATH;
    cache_ = *rt_->MakeKvCache(2048);
    prompt_ = *rt_->EncodePrompt("Name three colours of the rainbow.", /*chat=*/true, "");
  }

  struct Out {
    std::vector<TokenEvent> events;
    std::string text;
    FinishReason finish = FinishReason::kNone;
    std::vector<PositionLogprobs> prompt_logprobs;
  };
  Out Run(const GenerationOptions& o, int32_t chunk = 512) {
    auto g = Generation::Create(rt_->tokenizer(), cache_.get(), rt_->config(), prompt_, o);
    EXPECT_TRUE(g.ok()) << g.status();
    Generation* gens[] = {g->get()};
    Out out;
    BatchRunnerOptions bo;
    bo.prefill_chunk = chunk;
    EXPECT_TRUE(RunToCompletion(rt_->backend(), gens, bo, [&](size_t, const TokenEvent& ev) {
                  out.events.push_back(ev);
                  out.text += ev.text;
                }).ok());
    out.finish = (*g)->finish_reason();
    out.prompt_logprobs = (*g)->prompt_logprobs();
    EXPECT_EQ(cache_->pool().num_free(), cache_->pool().num_blocks());
    return out;
  }
  // The backend's logits of every position of `tokens`, in one pass.
  std::vector<float> AllLogits(const std::vector<int32_t>& tokens) {
    auto cache = *rt_->MakeKvCache(2048);
    SequenceKv kv(cache.get());
    ForwardEntry e;
    e.kv = &kv;
    e.tokens = tokens;
    e.all_logits = true;
    std::vector<float> logits;
    EXPECT_TRUE(rt_->backend()->Forward(std::span<const ForwardEntry>(&e, 1), &logits).ok());
    return logits;
  }

  Runtime* rt_ = nullptr;
  std::unique_ptr<KvCache> cache_;
  std::vector<int32_t> prompt_;
};

TEST_F(GenerationOutputTest, SampledAndPromptLogprobsAreTheRowsLogSoftmax) {
  GenerationOptions o;
  o.max_tokens = 6;
  o.logprobs = 5;
  o.prompt_logprobs = 3;
  for (int32_t chunk : {512, 7}) {  // whole prompt, and chunks that split it
    const Out out = Run(o, chunk);
    ASSERT_EQ(out.events.size(), 6u);
    std::vector<int32_t> all = prompt_;
    for (const TokenEvent& ev : out.events) all.push_back(ev.id);
    const std::vector<float> logits = AllLogits(all);
    const size_t vocab = static_cast<size_t>(rt_->config().vocab_size);
    auto row = [&](size_t pos) { return std::span<const float>(logits.data() + pos * vocab, vocab); };
    ASSERT_EQ(out.prompt_logprobs.size(), prompt_.size() - 1);
    for (size_t i = 1; i < prompt_.size(); ++i) {
      const PositionLogprobs want = LogprobsAt(row(i - 1), 1.0f, prompt_[i], 3);
      const PositionLogprobs& got = out.prompt_logprobs[i - 1];
      EXPECT_EQ(got.id, prompt_[i]);
      EXPECT_NEAR(got.logprob, want.logprob, 2e-3) << "prompt position " << i << " chunk " << chunk;
      ASSERT_EQ(got.top.size(), 3u);
      EXPECT_EQ(got.top[0].id, want.top[0].id);
    }
    for (size_t k = 0; k < out.events.size(); ++k) {
      ASSERT_TRUE(out.events[k].logprobs.has_value());
      const PositionLogprobs& got = *out.events[k].logprobs;
      const PositionLogprobs want = LogprobsAt(row(prompt_.size() - 1 + k), 1.0f, all[prompt_.size() + k], 5);
      EXPECT_EQ(got.id, out.events[k].id);
      EXPECT_NEAR(got.logprob, want.logprob, 2e-3) << "generated token " << k;
      EXPECT_EQ(got.rank, 1);  // greedy picks the most likely
      ASSERT_EQ(got.top.size(), 5u);
      EXPECT_EQ(got.top[0].id, got.id);
    }
  }
}

TEST_F(GenerationOutputTest, ProcessedLogprobsAreAtTheSamplersTemperature) {
  GenerationOptions o;
  o.max_tokens = 3;
  o.logprobs = 2;
  o.sampling.temperature = 0.5f;
  o.sampling.seed = 11;
  o.logprobs_mode = LogprobsMode::kProcessed;
  const Out processed = Run(o);
  o.logprobs_mode = LogprobsMode::kRaw;
  const Out raw = Run(o);
  ASSERT_EQ(processed.events.size(), 3u);
  std::vector<int32_t> all = prompt_;
  for (const TokenEvent& ev : raw.events) all.push_back(ev.id);
  const std::vector<float> logits = AllLogits(all);
  const size_t vocab = static_cast<size_t>(rt_->config().vocab_size);
  for (size_t k = 0; k < raw.events.size(); ++k) {
    EXPECT_EQ(processed.events[k].id, raw.events[k].id);  // same seed, same draws
    const std::span<const float> row(logits.data() + (prompt_.size() - 1 + k) * vocab, vocab);
    const int32_t id = raw.events[k].id;
    EXPECT_NEAR(raw.events[k].logprobs->logprob, LogprobsAt(row, 1.0f, id, 0).logprob, 2e-3);
    EXPECT_NEAR(processed.events[k].logprobs->logprob, LogprobsAt(row, 2.0f, id, 0).logprob, 4e-3);
  }
}

TEST_F(GenerationOutputTest, MinTokensBansTheStopIdsUntilReached) {
  GenerationOptions o;
  o.max_tokens = 12;
  const Out first = Run(o);
  ASSERT_FALSE(first.events.empty());
  o.stop_token_ids = {first.events[0].id};
  const Out stopped = Run(o);
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  EXPECT_EQ(stopped.events.size(), 1u);
  o.min_tokens = 4;
  const Out held = Run(o);
  ASSERT_GE(held.events.size(), 4u);
  for (size_t k = 0; k < 3; ++k) EXPECT_NE(held.events[k].id, first.events[0].id) << k;
}

TEST_F(GenerationOutputTest, IncludeStopStrKeepsTheStopString) {
  GenerationOptions o;
  o.max_tokens = 24;
  const Out plain = Run(o);
  ASSERT_GT(plain.text.size(), 12u) << plain.text;
  const std::string stop = plain.text.substr(6, 4);
  o.stop = {stop};
  const Out cut = Run(o);
  EXPECT_EQ(cut.finish, FinishReason::kStopSequence);
  EXPECT_EQ(cut.text.find(stop), std::string::npos) << cut.text;
  o.include_stop_str_in_output = true;
  const Out kept = Run(o);
  EXPECT_EQ(kept.finish, FinishReason::kStopSequence);
  EXPECT_EQ(kept.text, cut.text + stop);
}

TEST_F(GenerationOutputTest, SkipSpecialTokensFalseShowsASpecialTokensText) {
  // <|im_start|> is special but does not end generation: biased +100 it is
  // drawn first, and its text shows only with skip_special_tokens false.
  const int32_t im_start = rt_->tokenizer()->TokenId("<|im_start|>");
  ASSERT_GE(im_start, 0);
  ASSERT_FALSE(rt_->tokenizer()->IsEndOfGeneration(im_start));
  GenerationOptions o;
  o.max_tokens = 2;
  o.sampling.logit_bias = {{im_start, 100.0f}};
  const Out skipped = Run(o);
  ASSERT_EQ(skipped.events.size(), 2u);
  EXPECT_EQ(skipped.events[0].id, im_start);
  EXPECT_EQ(skipped.text.find("<|im_start|>"), std::string::npos) << skipped.text;
  o.skip_special_tokens = false;
  const Out shown = Run(o);
  EXPECT_NE(shown.text.find("<|im_start|>"), std::string::npos) << shown.text;
}

// A device that samples (CUDA's ForwardSample) returns only ids: whatever
// needs the logits on the host keeps the sequence there (the CUDA side:
// tests/cuda/cuda_logprobs_test.cc).
TEST_F(GenerationOutputTest, WhatNeedsLogitsOnTheHostIsNotDeviceSampled) {
  auto samplable = [&](const GenerationOptions& o) {
    auto g = Generation::Create(rt_->tokenizer(), cache_.get(), rt_->config(), prompt_, o);
    EXPECT_TRUE(g.ok()) << g.status();
    return (*g)->device_samplable();
  };
  GenerationOptions o;
  EXPECT_TRUE(samplable(o));
  o.logprobs = 0;
  EXPECT_FALSE(samplable(o));
  o = GenerationOptions();
  o.sampling.logit_bias = {{3, 1.0f}};
  EXPECT_FALSE(samplable(o));
  o = GenerationOptions();
  o.min_tokens = 2;
  EXPECT_FALSE(samplable(o));  // until two tokens are out
  o = GenerationOptions();
  o.prompt_logprobs = 1;  // the prompt's rows; decode steps may sample on the device
  EXPECT_TRUE(samplable(o));
}

TEST_F(GenerationOutputTest, OptionsOutOfRangeAreRefusedByName) {
  GenerationOptions o;
  o.max_tokens = 4;
  o.min_tokens = 5;
  EXPECT_NE(o.Validate(100).message().find("min_tokens"), std::string::npos);
  o.min_tokens = 0;
  o.logprobs = 21;
  EXPECT_NE(o.Validate(100).message().find("logprobs"), std::string::npos);
  o.logprobs = -1;
  o.sampling.logit_bias = {{100, 1.0f}};
  EXPECT_NE(o.Validate(100).message().find("logit_bias: token 100"), std::string::npos);
}

}  // namespace
}  // namespace beacon
