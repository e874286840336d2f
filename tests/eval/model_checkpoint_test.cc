// Per-prompt checkpoints: a summary survives the round trip (NaN "post"
// metrics included), a checkpoint under another key is ignored, a damaged
// one is a named error, and RunModelEval with `resume` reuses saved prompts
// on the real model and gives the same results.
#include "eval/model_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/runtime.h"
#include "gtest/gtest.h"

namespace beacon::eval {
namespace {

std::string TempDir(const char* name) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(d);
  return d.string();
}

PromptSummary Sample() {
  PromptSummary p;
  p.id = "plan";
  p.prompt_tokens = 42;
  p.trace_seconds = 1.5;
  p.replay_seconds = 2.5;
  p.reference_mismatches = 0;
  p.agreement_mismatches = 1;
  p.distinct_4grams = 0.75;
  p.text = "a \"quoted\"\ntrace";
  p.results.push_back(ModelResult{"beacon", 128, 0.01, 0.98, 0.97, 0.02, 0.96, 0.95, 300, 336, 15, 1900});
  p.results.push_back(ModelResult{"h2o", 1024, 0, 1, 1, std::nan(""), std::nan(""), std::nan(""), 2048, 1100, 0, 0});
  return p;
}

TEST(ModelCheckpointTest, RoundTripKeepsEveryFieldAndNaN) {
  absl::StatusOr<PromptSummary> back = PromptSummaryFromJson(PromptSummaryToJson(Sample()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->id, "plan");
  EXPECT_EQ(back->prompt_tokens, 42);
  EXPECT_EQ(back->agreement_mismatches, 1);
  EXPECT_EQ(back->text, Sample().text);
  ASSERT_EQ(back->results.size(), 2u);
  EXPECT_EQ(back->results[0].policy, "beacon");
  EXPECT_EQ(back->results[0].budget, 128);
  EXPECT_DOUBLE_EQ(back->results[0].kl_post, 0.02);
  EXPECT_DOUBLE_EQ(back->results[0].post_steps, 1900);
  EXPECT_TRUE(std::isnan(back->results[1].kl_post));
  EXPECT_TRUE(std::isnan(back->results[1].recall_post));
  EXPECT_DOUBLE_EQ(back->results[1].agreement, 2048);
}

TEST(ModelCheckpointTest, MissingFieldIsNamed) {
  nlohmann::json j = PromptSummaryToJson(Sample());
  j["results"][0].erase("recall_post");
  absl::StatusOr<PromptSummary> p = PromptSummaryFromJson(j);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("recall_post"), absl::string_view::npos) << p.status();
}

TEST(ModelCheckpointTest, ReusedOnlyUnderTheSameKey) {
  const std::string dir = TempDir("beacon_checkpoint_key");
  const nlohmann::json key = {{"model", "m.gguf"}, {"tokens", 2048}};
  ASSERT_TRUE(SaveCheckpoint(dir, key, Sample()).ok());
  absl::StatusOr<std::optional<PromptSummary>> same = LoadCheckpoint(dir, "plan", key);
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_TRUE(same->has_value());
  EXPECT_EQ((*same)->results.size(), 2u);

  nlohmann::json other = key;
  other["tokens"] = 1024;
  absl::StatusOr<std::optional<PromptSummary>> miss = LoadCheckpoint(dir, "plan", other);
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  absl::StatusOr<std::optional<PromptSummary>> none = LoadCheckpoint(dir, "absent", key);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(std::filesystem::exists(dir + "/plan.json.tmp"));
}

TEST(ModelCheckpointTest, DamagedFileIsANamedError) {
  const std::string dir = TempDir("beacon_checkpoint_damaged");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plan.json") << "{\"key\": {";
  absl::StatusOr<std::optional<PromptSummary>> p = LoadCheckpoint(dir, "plan", nlohmann::json::object());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("plan.json"), absl::string_view::npos) << p.status();
}

TEST(ModelCheckpointTest, ResumeReusesSavedPromptsOnTheDefaultModel) {
  if (!std::filesystem::exists(BEACON_MODEL_PATH)) GTEST_SKIP() << "no model at " << BEACON_MODEL_PATH;
  RuntimeOptions ro;
  ro.model = BEACON_MODEL_PATH;
  ro.threads = 2;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(ro);
  ASSERT_TRUE(rt.ok()) << rt.status();
  const std::vector<EvalPrompt> prompts = {{"a", "Write a numbered plan for a picnic, then follow it.", ""},
                                           {"b", "List five colours and describe each one.", ""}};
  ModelEvalOptions o;
  o.policies = {"streaming", "beacon"};
  o.budgets = {32};
  o.interval = 8;
  o.tokens = 48;
  o.checkpoint_dir = TempDir("beacon_checkpoint_resume");
  o.checkpoint_key = {{"model", BEACON_MODEL_PATH}};
  // The first run saves only prompt "a"; the second computes "b" and reuses "a".
  absl::StatusOr<ModelEvalReport> first = RunModelEval(rt->get(), {prompts[0]}, o, stderr);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->prompts[0].reused);
  o.resume = true;
  absl::StatusOr<ModelEvalReport> second = RunModelEval(rt->get(), prompts, o, stderr);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->prompts.size(), 2u);
  EXPECT_TRUE(second->prompts[0].reused);
  EXPECT_FALSE(second->prompts[1].reused);
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(second->prompts[0].results[c].kl_post, first->prompts[0].results[c].kl_post);
    EXPECT_EQ(second->prompts[0].results[c].agreement, first->prompts[0].results[c].agreement);
  }
  // Another interval is another key: nothing is reused.
  o.interval = 16;
  absl::StatusOr<ModelEvalReport> third = RunModelEval(rt->get(), {prompts[0]}, o, stderr);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_FALSE(third->prompts[0].reused);
}

}  // namespace
}  // namespace beacon::eval
