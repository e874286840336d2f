// Generation on the real default model: coherent greedy text, seeded
// sampling, and every stop criterion (max_tokens, EOS, ignore_eos, stop
// strings never streamed, stop token ids), with the KV returned at the end.
#include "engine/generation.h"

#include <cmath>

#include "engine/batch_runner.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"
#include "tests/engine/default_model.h"

namespace beacon {
namespace {

class GenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = testing::DefaultModel();
    if (rt_ == nullptr) GTEST_SKIP() << "default model not present at " << BEACON_MODEL_PATH;
    cache_ = *rt_->MakeKvCache(2048);
  }

  struct Out {
    std::vector<int32_t> ids;
    std::string text;
    FinishReason finish;
  };
  Out Run(const std::string& prompt, const GenerationOptions& opts, bool chat = true) {
    auto ids = rt_->EncodePrompt(prompt, chat, "");
    EXPECT_TRUE(ids.ok()) << ids.status();
    auto created = Generation::Create(rt_->tokenizer(), cache_.get(), rt_->config(), *ids, opts);
    EXPECT_TRUE(created.ok()) << created.status();
    Generation& g = **created;
    Generation* gens[] = {&g};
    Out out;
    absl::Status s = RunToCompletion(rt_->backend(), gens, {}, [&](size_t, const TokenEvent& ev) {
      out.ids.push_back(ev.id);
      out.text += ev.text;
    });
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(cache_->pool().num_free(), cache_->pool().num_blocks()) << "finished sequence kept KV blocks";
    out.finish = g.finish_reason();
    return out;
  }

  Runtime* rt_ = nullptr;
  std::unique_ptr<KvCache> cache_;
};

TEST_F(GenerationTest, GreedyAnswerIsCoherent) {
  GenerationOptions o;
  o.max_tokens = 40;
  Out out = Run("What is the capital of France? Answer in one sentence.", o);
  EXPECT_NE(out.text.find("Paris"), std::string::npos) << out.text;
  EXPECT_EQ(out.finish, FinishReason::kEos) << out.text;
}

TEST_F(GenerationTest, MaxTokensEndsWithLength) {
  GenerationOptions o;
  o.max_tokens = 5;
  Out out = Run("Write a long story about a dragon.", o);
  EXPECT_EQ(out.ids.size(), 5u);
  EXPECT_EQ(out.finish, FinishReason::kLength);
}

TEST_F(GenerationTest, IgnoreEosGoesPastTheEnd) {
  GenerationOptions o;
  o.max_tokens = 60;
  Out normal = Run("Say hi.", o);
  ASSERT_EQ(normal.finish, FinishReason::kEos);
  o.ignore_eos = true;
  Out forced = Run("Say hi.", o);
  EXPECT_EQ(forced.finish, FinishReason::kLength);
  EXPECT_EQ(forced.ids.size(), 60u);
  // Same greedy prefix up to where the first run stopped.
  ASSERT_GT(forced.ids.size(), normal.ids.size());
  EXPECT_TRUE(std::equal(normal.ids.begin(), normal.ids.end() - 1, forced.ids.begin()));
}

TEST_F(GenerationTest, SeededSamplingIsReproducible) {
  GenerationOptions o;
  o.max_tokens = 30;
  o.sampling.temperature = 0.9f;
  o.sampling.top_p = 0.95f;
  o.sampling.seed = 1234;
  Out a = Run("Tell me a story about a robot.", o), b = Run("Tell me a story about a robot.", o);
  EXPECT_EQ(a.ids, b.ids);
  o.sampling.seed = 99;
  Out c = Run("Tell me a story about a robot.", o);
  EXPECT_NE(a.ids, c.ids);
}

TEST_F(GenerationTest, StopStringIsNeverStreamed) {
  GenerationOptions o;
  o.max_tokens = 48;
  o.ignore_eos = true;
  Out full = Run("Explain how a bicycle works.", o);
  ASSERT_GT(full.text.size(), 40u) << full.text;
  // A stop string from the middle of the unconstrained output, spanning
  // several tokens.
  const std::string stop = full.text.substr(full.text.size() / 2, 7);
  o.stop = {stop};
  Out stopped = Run("Explain how a bicycle works.", o);
  EXPECT_EQ(stopped.finish, FinishReason::kStopSequence);
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find(stop))) << "stop: '" << stop << "'";
  EXPECT_EQ(stopped.text.find(stop), std::string::npos);
}

TEST_F(GenerationTest, StopTokenIdEndsWithoutItsText) {
  GenerationOptions o;
  o.max_tokens = 30;
  o.ignore_eos = true;
  Out full = Run("List three fruits.", o);
  ASSERT_GE(full.ids.size(), 10u);
  const int32_t stop_id = full.ids[6];
  const size_t first = std::find(full.ids.begin(), full.ids.end(), stop_id) - full.ids.begin();
  o.stop_token_ids = {stop_id};
  Out stopped = Run("List three fruits.", o);
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  EXPECT_EQ(stopped.ids.size(), first + 1);
  EXPECT_EQ(stopped.ids.back(), stop_id);
}

TEST_F(GenerationTest, OptionsValidateNamesTheField) {
  GenerationOptions o;
  o.max_tokens = 0;
  absl::Status s = o.Validate(100);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_tokens"), std::string::npos);
  o.max_tokens = 1;
  o.stop_token_ids = {100};
  EXPECT_NE(o.Validate(100).message().find("stop_token_ids"), std::string::npos);
  o.stop_token_ids = {};
  o.stop = {""};
  EXPECT_NE(o.Validate(100).message().find("stop"), std::string::npos);
  o.stop = {};
  o.sampling.top_p = 0;
  EXPECT_NE(o.Validate(100).message().find("top_p"), std::string::npos);
  o.sampling.top_p = 1;
  o.forced_tokens = {1, 2};
  EXPECT_NE(o.Validate(100).message().find("forced_tokens: 2 tokens, more than max_tokens = 1"), std::string::npos);
  o.max_tokens = 2;
  EXPECT_TRUE(o.Validate(100).ok());
  o.forced_tokens = {1, 100};
  EXPECT_NE(o.Validate(100).message().find("forced_tokens: 100 is outside"), std::string::npos);
}

// Teacher forcing (the evaluation's replays): the forced tokens come out
// whatever the logits say, stop criteria still apply to them, and past them
// the greedy draw resumes exactly as it would from that history.
TEST_F(GenerationTest, ForcedTokensComeOutThenTheDrawResumes) {
  GenerationOptions o;
  o.max_tokens = 12;
  o.ignore_eos = true;
  Out free = Run("Write a long story about a dragon.", o);
  ASSERT_EQ(free.ids.size(), 12u);
  // Force a different start; then what greedy continues from it.
  o.forced_tokens = {free.ids[1], free.ids[0], free.ids[2]};
  Out forced = Run("Write a long story about a dragon.", o);
  ASSERT_EQ(forced.ids.size(), 12u);
  EXPECT_EQ(std::vector<int32_t>(forced.ids.begin(), forced.ids.begin() + 3), o.forced_tokens);
  // Forcing exactly what greedy drew changes nothing.
  o.forced_tokens.assign(free.ids.begin(), free.ids.begin() + 5);
  EXPECT_EQ(Run("Write a long story about a dragon.", o).ids, free.ids);
  // A forced token that is a stop id ends the generation like a drawn one.
  o.forced_tokens = {free.ids[0], free.ids[1]};
  o.stop_token_ids = {free.ids[1]};
  Out stopped = Run("Write a long story about a dragon.", o);
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  EXPECT_EQ(stopped.ids.size(), 2u);
}

}  // namespace
}  // namespace beacon

namespace beacon {
namespace {

// The KV policies rotate stored queries with the model's own (scaled) RoPE
// table: the one the forward pass uses.
TEST(PolicyInfoForTest, CarriesTheModelsRopeTable) {
  ModelConfig c;
  c.n_layers = 2, c.hidden = 64, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 16;
  c.ffn_hidden = 128, c.vocab_size = 256, c.context_length = 256, c.rope_theta = 1e4f;
  c.rope_scaling = {.type = RopeScalingType::kYarn, .factor = 4.0f, .original_context = 64};
  ASSERT_TRUE(c.Validate().ok());
  const PolicyModelInfo m = PolicyInfoFor(c);
  const RopeTable want = c.RopeFrequencies();
  EXPECT_EQ(m.rope.inv_freq, want.inv_freq);
  EXPECT_EQ(m.rope.attention_factor, want.attention_factor);
  EXPECT_NEAR(m.rope.attention_factor, 1.1386294, 1e-6);
  EXPECT_FLOAT_EQ(m.rope.inv_freq[7], static_cast<float>(std::pow(1e4, -14.0 / 16) / 4));  // interpolated
}

}  // namespace
}  // namespace beacon
