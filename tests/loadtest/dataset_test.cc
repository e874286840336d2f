// Dataset readers: ShareGPT (system turns skipped, the reply as reference,
// unusable entries skipped), vLLM's custom JSONL, errors that name the file,
// the line or entry and the field, and reproducible sampling.
#include "loadtest/dataset.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

namespace beacon::loadtest {
namespace {

std::string WriteFile(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << content;
  return path;
}

TEST(DatasetSpecTest, ParsesKinds) {
  absl::StatusOr<DatasetSpec> s = ParseDatasetSpec("sharegpt:/data/sg.json");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, DatasetKind::kShareGpt);
  EXPECT_EQ(s->path, "/data/sg.json");
  EXPECT_EQ(ParseDatasetSpec("custom:a:b.jsonl")->path, "a:b.jsonl");
  EXPECT_EQ(ParseDatasetSpec("jsonl:x")->kind, DatasetKind::kJsonl);
  for (const char* bad : {"sharegpt", "sharegpt:", "alpaca:x.json"}) {
    absl::StatusOr<DatasetSpec> b = ParseDatasetSpec(bad);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(b.status().message().find("--dataset"), absl::string_view::npos);
  }
}

TEST(ShareGptTest, TakesTheFirstHumanTurnAfterSystemAndItsReply) {
  const std::string path = WriteFile("sg.json", R"([
    {"id": "a", "conversations": [{"from": "system", "value": "be brief"},
                                  {"from": "human", "value": "What is 2+2?"},
                                  {"from": "gpt", "value": "4."},
                                  {"from": "human", "value": "And 3+3?"}]},
    {"id": "b", "conversations": [{"from": "human", "value": "only a question"}]},
    {"id": "c", "conversations": [{"from": "gpt", "value": "starts with the model"}, {"from": "human", "value": "x"}]},
    {"id": "d", "conversation": [{"from": "user", "value": "Hi"}, {"from": "assistant", "value": "Hello!"}]}
  ])");
  absl::StatusOr<std::vector<PromptEntry>> e = LoadShareGpt(path);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->size(), 2u);  // b has no answer, c no leading human turn
  EXPECT_EQ((*e)[0].text, "What is 2+2?");
  EXPECT_EQ((*e)[0].reference, "4.");
  EXPECT_EQ((*e)[0].max_tokens, 0);  // --output-len, or --reference-output-len
  EXPECT_TRUE((*e)[0].chat.empty());
  EXPECT_EQ((*e)[1].text, "Hi");
  EXPECT_EQ((*e)[1].reference, "Hello!");
}

TEST(ShareGptTest, ErrorsNameFileEntryAndField) {
  struct Case {
    const char* content;
    const char* needle;
  };
  for (const Case& c : {Case{"{\"conversations\": []}", "a JSON list"}, Case{"[1", "is not JSON"},
                        Case{"[{\"id\": 1}]", "entry 0: \"conversations\" is missing"},
                        Case{R"([{"conversations": []}, {"conversations": [{"from": "human", "value": 3}]}])",
                             "entry 1: conversations[0].value must be a string"},
                        Case{R"([{"conversations": [{"value": "x"}]}])", "entry 0: conversations[0].from"},
                        Case{R"([{"conversations": [{"from": "human", "value": "q"}]}])", "no conversation"}}) {
    const std::string path = WriteFile("bad_sg.json", c.content);
    absl::StatusOr<std::vector<PromptEntry>> e = LoadShareGpt(path);
    ASSERT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << c.content;
    EXPECT_NE(e.status().message().find(path), absl::string_view::npos) << e.status();
    EXPECT_NE(e.status().message().find(c.needle), absl::string_view::npos) << e.status();
  }
  EXPECT_EQ(LoadShareGpt("/nonexistent/sg.json").status().code(), absl::StatusCode::kNotFound);
}

TEST(CustomJsonlTest, ReadsPromptsAndOutputTokens) {
  const std::string path =
      WriteFile("custom.jsonl", "{\"prompt\": \"one\", \"output_tokens\": 12}\n\n{\"prompt\": \"two\"}\n");
  absl::StatusOr<std::vector<PromptEntry>> e = LoadCustomJsonl(path);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->size(), 2u);
  EXPECT_EQ((*e)[0].text, "one");
  EXPECT_EQ((*e)[0].max_tokens, 12);
  EXPECT_EQ((*e)[1].max_tokens, 0);
  struct Case {
    const char* content;
    const char* needle;
  };
  for (const Case& c : {Case{"{\"prompt\": \"a\"}\n{\"prompt\": 5}\n", ":2: \"prompt\" must be a string"},
                        Case{"{\"prompt\": \"a\", \"output_tokens\": 0}\n", ":1: \"output_tokens\" must be a positive"},
                        Case{"not json\n", ":1: not a JSON object"}, Case{"\n\n", " has no prompts"}}) {
    const std::string bad = WriteFile("bad_custom.jsonl", c.content);
    absl::StatusOr<std::vector<PromptEntry>> b = LoadCustomJsonl(bad);
    ASSERT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << c.content;
    EXPECT_NE(b.status().message().find(bad + c.needle), absl::string_view::npos) << b.status();
  }
}

TEST(SampleTest, SameSeedSameSubsetAndBounds) {
  std::vector<PromptEntry> all(50);
  for (size_t i = 0; i < all.size(); ++i) all[i].text = std::to_string(i);
  auto texts = [](const std::vector<PromptEntry>& v) {
    std::vector<std::string> t;
    for (const PromptEntry& e : v) t.push_back(e.text);
    return t;
  };
  absl::StatusOr<std::vector<PromptEntry>> a = SampleDataset(all, 10, 7), b = SampleDataset(all, 10, 7),
                                           c = SampleDataset(all, 10, 8);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(texts(*a), texts(*b));
  EXPECT_NE(texts(*a), texts(*c));
  const std::vector<std::string> picked = texts(*a);
  EXPECT_EQ(std::set<std::string>(picked.begin(), picked.end()).size(), 10u);  // without replacement
  EXPECT_EQ(texts(*SampleDataset(all, 0, 7)), texts(all));                     // 0: all, in order
  absl::StatusOr<std::vector<PromptEntry>> big = SampleDataset(all, 51, 7);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("50 usable entries"), absl::string_view::npos);
}

}  // namespace
}  // namespace beacon::loadtest
