// Result tables render to CSV, markdown and JSON as documented; the bundled
// prompt file loads and malformed prompt files are named errors; the policy
// grid refuses what cannot be compared.
#include "eval/report.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "eval/policy_grid.h"
#include "eval/prompt_set.h"
#include "gtest/gtest.h"

namespace beacon::eval {
namespace {

ResultTable SampleTable() {
  ResultTable t({{"policy", "policy", 0}, {"budget", "budget", 0}, {"kl", "KL", 3}});
  t.AddRow({std::string("h2o"), 128.0, 0.12345});
  t.AddRow({std::string("h2o"), 256.0, NumberOrNone(std::nan(""))});
  t.AddRow({std::string("a,b"), 128.0, 1.5});
  return t;
}

TEST(ResultTableTest, CsvQuotesAndLeavesMissingValuesEmpty) {
  EXPECT_EQ(SampleTable().ToCsv(), "policy,budget,kl\nh2o,128,0.12345\nh2o,256,\n\"a,b\",128,1.5\n");
}

TEST(ResultTableTest, MarkdownUsesColumnPrecision) {
  EXPECT_EQ(SampleTable().ToMarkdown(),
            "| policy | budget | KL |\n| --- | ---: | ---: |\n| h2o | 128 | 0.123 |\n| h2o | 256 | - |\n"
            "| a,b | 128 | 1.500 |\n");
}

TEST(ResultTableTest, PivotPutsBudgetsAcross) {
  EXPECT_EQ(SampleTable().PivotMarkdown("policy", "budget", "kl"),
            "| policy \\ budget | 128 | 256 |\n| --- | ---: | ---: |\n| h2o | 0.123 | - |\n| a,b | 1.500 | - |\n");
}

TEST(ResultTableTest, JsonHasNullForMissing) {
  const nlohmann::json j = SampleTable().ToJson();
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["policy"], "h2o");
  EXPECT_DOUBLE_EQ(j[0]["kl"].get<double>(), 0.12345);
  EXPECT_TRUE(j[1]["kl"].is_null());
}

TEST(PromptSetTest, LoadsTheBundledPrompts) {
  absl::StatusOr<std::vector<EvalPrompt>> p =
      LoadPrompts(std::string(BEACON_SOURCE_DIR) + "/eval/prompts/long_prompts.jsonl");
  ASSERT_TRUE(p.ok()) << p.status();
  // Issue 19: the fidelity tables need at least 20 prompts.
  EXPECT_GE(p->size(), 20u);
  for (const EvalPrompt& e : *p) {
    EXPECT_FALSE(e.id.empty());
    EXPECT_GT(e.prompt.size(), 100u) << e.id;
  }
}

TEST(PromptSetTest, MalformedFilesAreNamedErrors) {
  const std::string path = (std::filesystem::temp_directory_path() / "beacon_eval_prompts_test.jsonl").string();
  auto load = [&](const std::string& text) {
    std::ofstream(path) << text;
    return LoadPrompts(path).status();
  };
  EXPECT_TRUE(load("# comment\n\n{\"id\": \"a\", \"prompt\": \"x\"}\n").ok());
  absl::Status s = load("{\"id\": \"a\", \"prompt\": \"x\"}\n{\"id\": \"a\", \"prompt\": \"y\"}\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(":2: duplicate id"), absl::string_view::npos) << s;
  EXPECT_NE(load("{\"id\": \"a\"}\n").message().find("missing \"prompt\""), absl::string_view::npos);
  EXPECT_NE(load("not json\n").message().find(":1: not a JSON object"), absl::string_view::npos);
  EXPECT_EQ(load("").code(), absl::StatusCode::kInvalidArgument);
  std::filesystem::remove(path);
  EXPECT_EQ(LoadPrompts(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(PolicyGridTest, PublishedDefaultsWithOnlyBudgetAndInterval) {
  absl::StatusOr<std::vector<PolicySpec>> g = MakePolicyGrid({"snapkv", "beacon"}, {64, 128}, 100);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->size(), 4u);
  EXPECT_EQ((*g)[1].policy, "snapkv");
  EXPECT_EQ((*g)[1].budget, 128);
  KvPolicyOptions want = KvPolicyOptions::DefaultsFor(KvPolicyKind::kSnapKv);
  EXPECT_EQ((*g)[1].options.pool_kernel, want.pool_kernel);
  EXPECT_EQ((*g)[1].options.recent_queries, want.recent_queries);
  EXPECT_EQ((*g)[1].options.budget, 128);
  EXPECT_EQ((*g)[1].options.interval, 100);
  EXPECT_TRUE((*g)[3].options.keep_prompt);
}

TEST(PolicyGridTest, RefusesTheReferenceDuplicatesAndTooSmallBudgets) {
  EXPECT_FALSE(MakePolicyGrid({"full"}, {128}, 128).ok());
  EXPECT_FALSE(MakePolicyGrid({"h2o", "h2o"}, {128}, 128).ok());
  EXPECT_FALSE(MakePolicyGrid({"h2o"}, {128, 128}, 128).ok());
  EXPECT_FALSE(MakePolicyGrid({"nope"}, {128}, 128).ok());
  absl::Status s = MakePolicyGrid({"h2o"}, {16}, 128).status();  // below the 32-token window
  EXPECT_NE(s.message().find("budget 16"), absl::string_view::npos) << s;
}

// beacon-eval --kv-beacon-prompt-queries on,off: beacon twice, labelled;
// the other policies once, untouched.
TEST(PolicyGridTest, BeaconPromptQueriesVariants) {
  absl::StatusOr<std::vector<PolicySpec>> g = MakePolicyGrid({"snapkv", "beacon"}, {64, 128}, 100, {true, false});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->size(), 6u);
  EXPECT_EQ((*g)[0].policy, "snapkv");
  EXPECT_EQ((*g)[2].policy, "beacon/pq=on");
  EXPECT_TRUE((*g)[2].options.beacon_prompt_queries);
  EXPECT_EQ((*g)[5].policy, "beacon/pq=off");
  EXPECT_EQ((*g)[5].budget, 128);
  EXPECT_FALSE((*g)[5].options.beacon_prompt_queries);
  absl::StatusOr<std::vector<PolicySpec>> plain = MakePolicyGrid({"beacon"}, {64}, 100);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)[0].policy, "beacon");
  EXPECT_EQ((*plain)[0].options.beacon_prompt_queries, KvPolicyOptions().beacon_prompt_queries);
  EXPECT_FALSE(MakePolicyGrid({"beacon"}, {64}, 100, {false, false}).ok());
}

}  // namespace
}  // namespace beacon::eval
