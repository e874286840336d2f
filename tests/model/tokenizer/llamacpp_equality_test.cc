// The tokenizer built from the real GGUF (SmolLM2-135M-Instruct) against
// llama.cpp's own tokenization of the corpus (tests/fixtures/llamacpp/, from
// tools/make_llamacpp_fixtures.py). Skipped when the model is absent.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf_loader.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/model/tokenizer/tokenizer_test_util.h"

namespace beacon {
namespace {

using testing::FixturePath;
using testing::Ids;
using testing::ReadJsonl;

class LlamaCppEqualityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(BEACON_MODEL_PATH)) return;
    absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(BEACON_MODEL_PATH);
    ASSERT_TRUE(file.ok()) << file.status();
    absl::StatusOr<TokenizerData> data = ReadGgufTokenizer(**file);
    ASSERT_TRUE(data.ok()) << data.status();
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(*std::move(data));
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = tok->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) GTEST_SKIP() << "model not found: " << BEACON_MODEL_PATH;
  }

  static const Tokenizer* tokenizer_;
};
const Tokenizer* LlamaCppEqualityTest::tokenizer_ = nullptr;

TEST_F(LlamaCppEqualityTest, VocabularyBasics) {
  EXPECT_EQ(tokenizer_->vocab_size(), 49152);
  EXPECT_EQ(tokenizer_->TokenId("<|im_start|>"), 1);
  EXPECT_EQ(tokenizer_->TokenId("<|im_end|>"), 2);
  EXPECT_TRUE(tokenizer_->IsEndOfGeneration(2));
  EXPECT_TRUE(tokenizer_->IsEndOfGeneration(0));  // <|endoftext|>
  EXPECT_FALSE(tokenizer_->IsEndOfGeneration(1));
  EXPECT_TRUE(tokenizer_->IsSpecial(1));
  // SmolLM2 does not ask for BOS.
  EXPECT_EQ(tokenizer_->Encode("Hello", true, true), tokenizer_->Encode("Hello", true, false));
}

TEST_F(LlamaCppEqualityTest, EveryCorpusEntryInBothSpecialModes) {
  const auto rows = ReadJsonl(FixturePath("llamacpp/tokenize.jsonl"));
  ASSERT_GE(rows.size(), 100u) << "missing fixture; run tools/make_llamacpp_fixtures.py";
  int equal = 0;
  for (const auto& row : rows) {
    const std::string name = row.at("name").get<std::string>();
    const std::string text = row.at("text").get<std::string>();
    const std::vector<int32_t> special = tokenizer_->Encode(text, /*parse_special=*/true, /*add_bos=*/false);
    const std::vector<int32_t> plain = tokenizer_->Encode(text, /*parse_special=*/false, /*add_bos=*/false);
    EXPECT_EQ(special, Ids(row.at("ids_special"))) << name << " (special=true)";
    EXPECT_EQ(plain, Ids(row.at("ids_plain"))) << name << " (special=false)";
    equal += special == Ids(row.at("ids_special")) && plain == Ids(row.at("ids_plain"));
  }
  RecordProperty("entries", static_cast<int>(rows.size()));
  RecordProperty("equal", equal);
  EXPECT_EQ(equal, static_cast<int>(rows.size()));
}

TEST_F(LlamaCppEqualityTest, DecodeInvertsEncodeAndStreamingAgrees) {
  for (const auto& row : ReadJsonl(FixturePath("llamacpp/tokenize.jsonl"))) {
    const std::string name = row.at("name").get<std::string>();
    const std::string text = row.at("text").get<std::string>();
    const std::vector<int32_t> ids = tokenizer_->Encode(text, false, false);
    EXPECT_EQ(tokenizer_->Decode(ids), text) << name;
    IncrementalDetokenizer detok(tokenizer_);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.Push(id);
    streamed += detok.Flush();
    EXPECT_EQ(streamed, text) << name;
  }
}

TEST_F(LlamaCppEqualityTest, GreedyFixturePromptsTokenizeAlike) {
  const auto rows = ReadJsonl(FixturePath("llamacpp/greedy.jsonl"));
  ASSERT_EQ(rows.size(), 6u);
  for (const auto& row : rows) {
    EXPECT_EQ(tokenizer_->Encode(row.at("prompt").get<std::string>(), true, false), Ids(row.at("prompt_ids")))
        << row.at("name");
  }
}

TEST_F(LlamaCppEqualityTest, ChatTemplateFromTheGgufMatchesJinja2) {
  int checked = 0;
  for (const auto& row : ReadJsonl(FixturePath("chat_template.jsonl"))) {
    if (row.at("family") != "smollm2") continue;
    std::vector<ChatMessage> messages;
    for (const auto& m : row.at("messages")) messages.push_back({m.at("role"), m.at("content")});
    absl::StatusOr<std::string> text =
        tokenizer_->ApplyChatTemplate(messages, row.at("add_generation_prompt").get<bool>());
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, row.at("rendered").get<std::string>()) << row.at("name");
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

// Records (does not assert) the time to encode the ~10 KB corpus entry; the
// tests assert only results.
TEST_F(LlamaCppEqualityTest, LongTextEncodeTime) {
  for (const auto& row : ReadJsonl(FixturePath("llamacpp/tokenize.jsonl"))) {
    if (row.at("name") != "long_10kb") continue;
    const std::string text = row.at("text").get<std::string>();
    const auto start = std::chrono::steady_clock::now();
    constexpr int kRepeats = 20;
    size_t n = 0;
    for (int i = 0; i < kRepeats; ++i) n += tokenizer_->Encode(text, true, false).size();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / kRepeats;
    RecordProperty("encode_10kb_ms", std::to_string(ms));
    std::printf("encode of %zu bytes -> %zu ids: %.3f ms\n", text.size(), n / kRepeats, ms);
    EXPECT_EQ(tokenizer_->Encode(text, true, false), Ids(row.at("ids_special")));
  }
}

}  // namespace
}  // namespace beacon
