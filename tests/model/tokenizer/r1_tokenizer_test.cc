// DeepSeek-R1-Distill-Qwen-7B's tokenizer (pre-tokenizer deepseek-r1-qwen)
// from a vocab-only GGUF (zero tensors, as llama.cpp ships its
// ggml-vocab-*.gguf files) against llama.cpp's token ids on the same file:
// the R1 template's renderings of the chat fixtures' conversations (special
// tokens parsed) and tricky plain texts. Fixtures:
// tests/fixtures/tokenizers/, written by tools/make_tokenizer_fixtures.py
// (make tokenizer-fixtures).
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf_loader.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/model/tokenizer/tokenizer_test_util.h"

namespace beacon {
namespace {

class R1Tokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<GgufFile>> file =
        GgufFile::Open(testing::FixturePath("tokenizers/r1-distill-qwen-7b-vocab.gguf"));
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ((*file)->tensor_infos().size(), 0u);
    absl::StatusOr<TokenizerData> data = ReadGgufTokenizer(**file);
    ASSERT_TRUE(data.ok()) << data.status();
    types_ = new std::vector<TokenType>(data->token_types);
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::Create(*std::move(data));
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = t->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete types_;
  }
  static Tokenizer* tokenizer_;
  static std::vector<TokenType>* types_;
};

Tokenizer* R1Tokenizer::tokenizer_ = nullptr;
std::vector<TokenType>* R1Tokenizer::types_ = nullptr;

TEST_F(R1Tokenizer, IdsEqualLlamaCpp) {
  ASSERT_NE(tokenizer_, nullptr);
  const auto rows = testing::ReadJsonl(testing::FixturePath("tokenizers/r1-distill-qwen-7b.jsonl"));
  ASSERT_GE(rows.size(), 70u) << "missing fixture; run make tokenizer-fixtures";
  int chats = 0, plain = 0;
  for (const auto& row : rows) {
    SCOPED_TRACE(row.at("name").get<std::string>());
    const std::string text = row.at("text").get<std::string>();
    const bool special = row.at("special").get<bool>();
    const bool add_bos = row.at("add_bos").get<bool>();
    const std::vector<int32_t> want = row.at("ids").get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tokenizer_->Encode(text, special, add_bos);
    EXPECT_EQ(got, want);
    // Decoding gives the text back (BOS, when added, is not part of it).
    std::vector<int32_t> body = got;
    if (add_bos && !body.empty() && body.front() == tokenizer_->bos_id()) body.erase(body.begin());
    EXPECT_EQ(tokenizer_->Decode(body, /*render_special=*/true), text);
    (special ? chats : plain)++;
  }
  EXPECT_GE(chats, 50);
  EXPECT_GE(plain, 20);
}

// R1's reasoning markers are single added (user-defined) tokens, matched
// whether or not special tokens are parsed, and never end generation.
TEST_F(R1Tokenizer, ThinkTagsAreSingleTokens) {
  ASSERT_NE(tokenizer_, nullptr);
  const int32_t open = tokenizer_->TokenId("<think>");
  const int32_t close = tokenizer_->TokenId("</think>");
  EXPECT_EQ(open, 151648);
  EXPECT_EQ(close, 151649);
  for (bool special : {false, true}) {
    EXPECT_EQ(tokenizer_->Encode("<think>", special, false), std::vector<int32_t>{open});
    EXPECT_EQ(tokenizer_->Encode("</think>", special, false), std::vector<int32_t>{close});
  }
  EXPECT_EQ((*types_)[open], TokenType::kUserDefined);
  EXPECT_EQ((*types_)[close], TokenType::kUserDefined);
  EXPECT_FALSE(tokenizer_->IsEndOfGeneration(open));
  EXPECT_FALSE(tokenizer_->IsEndOfGeneration(close));
  EXPECT_EQ(tokenizer_->Decode({open, close}), "<think></think>");
}

// The server's front-end threads share one tokenizer (PrepareRequest runs on
// whichever thread took the request): encoding, decoding, streaming and the
// chat template from several threads at once give what one thread alone
// gives. Under ThreadSanitizer (tools/sanitize.sh) this is also the race
// check of the tokenizer and the Jinja renderer.
TEST_F(R1Tokenizer, ConcurrentUseGivesWhatOneThreadGives) {
  ASSERT_NE(tokenizer_, nullptr);
  const auto rows = testing::ReadJsonl(testing::FixturePath("tokenizers/r1-distill-qwen-7b.jsonl"));
  ASSERT_FALSE(rows.empty());
  const std::vector<ChatMessage> chat = {{"system", "Be brief."}, {"user", "What is 2 + 2?"}};
  auto work = [&](std::vector<std::string>* out) {
    for (const auto& row : rows) {
      const std::string text = row.at("text").get<std::string>();
      const std::vector<int32_t> ids = tokenizer_->Encode(text, row.at("special").get<bool>(), false);
      IncrementalDetokenizer detok(tokenizer_, /*render_special=*/true);
      std::string streamed;
      for (int32_t id : ids) streamed += detok.Push(id);
      out->push_back(streamed + detok.Flush());
      absl::StatusOr<std::string> rendered = tokenizer_->ApplyChatTemplate(chat, true);
      out->push_back(rendered.ok() ? *rendered : rendered.status().ToString());
    }
  };
  std::vector<std::string> alone;
  work(&alone);
  std::vector<std::vector<std::string>> got(4);
  std::vector<std::thread> threads;
  for (auto& g : got) threads.emplace_back(work, &g);
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, alone);
}

}  // namespace
}  // namespace beacon
