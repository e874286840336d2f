// LoadTokenizerData (--tokenizer: a GGUF, vocab-only or whole, or an HF
// directory), ReadChatTemplateFile (--chat-template) and
// UseChatTemplateJinja: what each form yields, exactly, and every refusal
// with its code and the path it names.
#include "model/tokenizer_loader.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model/safetensors_writer.h"
#include "tests/model/tiny_gguf_model.h"

namespace beacon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;
using testing_util::WriteText;

constexpr char kR1Vocab[] = "/tests/fixtures/tokenizers/r1-distill-qwen-7b-vocab.gguf";

std::string R1VocabPath() { return std::string(BEACON_SOURCE_DIR) + kR1Vocab; }

class TokenizerLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing_util::MakeTempDir("tokenizer_loader"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A small byte-level BPE tokenizer.json: vocab {a, b, c, ab, abc}, two
  // merges and two special tokens.
  static json TokenizerJson() {
    return {{"model",
             {{"type", "BPE"},
              {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}}},
              {"merges", json::array({"a b", "ab c"})}}},
            {"added_tokens",
             {{{"id", 5}, {"content", "<|begin|>"}, {"special", true}},
              {{"id", 6}, {"content", "<|end|>"}, {"special", true}}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}}},
            {"decoder", {{"type", "ByteLevel"}}}};
  }

  // An HF directory under the temp dir holding tokenizer.json.
  std::string HfDir(const std::string& name) const {
    const std::string d = dir_ + "/" + name;
    std::filesystem::create_directories(d);
    WriteText(d + "/tokenizer.json", TokenizerJson().dump());
    return d;
  }

  std::string WriteFile(const std::string& name, const std::string& bytes) const {
    const std::string p = dir_ + "/" + name;
    WriteText(p, bytes);
    return p;
  }

  static void ExpectError(const absl::Status& s, absl::StatusCode code, const std::string& needle) {
    ASSERT_FALSE(s.ok()) << "accepted; expected an error containing " << needle;
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(needle));
  }

  std::string dir_;
};

TEST_F(TokenizerLoaderTest, VocabOnlyR1GgufHasTheWholeVocabularyAndTemplate) {
  absl::StatusOr<TokenizerData> d = LoadTokenizerData(R1VocabPath());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->model, "gpt2");
  EXPECT_EQ(d->pre, "deepseek-r1-qwen");
  ASSERT_EQ(d->tokens.size(), 152064u);
  EXPECT_EQ(d->token_types.size(), 152064u);
  EXPECT_EQ(d->tokens[151648], "<think>");
  EXPECT_EQ(d->tokens[151649], "</think>");
  EXPECT_EQ(d->tokens[151646], "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(d->tokens[151644], "<｜User｜>");
  EXPECT_EQ(d->tokens[151645], "<｜Assistant｜>");
  EXPECT_EQ(d->bos_id, 151646);
  EXPECT_EQ(d->eos_id, 151643);
  EXPECT_TRUE(d->add_bos);
  EXPECT_THAT(d->chat_template, HasSubstr("<｜Assistant｜>"));
  EXPECT_THAT(d->chat_template, HasSubstr("</think>"));

  // The markers are user-defined (added) tokens, as in llama.cpp's file.
  EXPECT_EQ(d->token_types[151648], TokenType::kUserDefined);
  EXPECT_EQ(d->token_types[151649], TokenType::kUserDefined);
  // (Tokenizer::Create over these data: tests/engine/runtime_tokenizer_test.cc;
  // model_tests does not link the tokenizer.)
}

TEST_F(TokenizerLoaderTest, WholeModelGgufGivesOnlyItsTokenizer) {
  const std::string path = WriteFile("tiny.gguf", test::TinyModelBuilder({}).Build());
  absl::StatusOr<TokenizerData> d = LoadTokenizerData(path);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->pre, "smollm");
  EXPECT_EQ(d->tokens, test::TinyTokens(40));
  EXPECT_THAT(d->merges, ElementsAre("a b", "c d"));
  EXPECT_EQ(d->bos_id, 1);
  EXPECT_EQ(d->eos_id, 2);
  EXPECT_EQ(d->chat_template, "{{ '<|im_start|>' }}");
}

TEST_F(TokenizerLoaderTest, GgufWithoutTokenizerIsNotFoundNamingThePath) {
  test::TinyModelSpec spec;
  spec.tokenizer = false;
  const std::string path = WriteFile("no_tokenizer.gguf", test::TinyModelBuilder(spec).Build());
  absl::StatusOr<TokenizerData> d = LoadTokenizerData(path);
  ExpectError(d.status(), absl::StatusCode::kNotFound, "tokenizer " + path + ": ");
}

TEST_F(TokenizerLoaderTest, MissingPathsAreNotFound) {
  const std::string missing = dir_ + "/nope.gguf";
  ExpectError(LoadTokenizerData(missing).status(), absl::StatusCode::kNotFound,
              "tokenizer " + missing + " does not exist");
  // A component that is a file, not a directory (ENOTDIR).
  const std::string file = WriteFile("plain.txt", "x");
  ExpectError(LoadTokenizerData(file + "/tokenizer.json").status(), absl::StatusCode::kNotFound,
              "tokenizer " + file + "/tokenizer.json does not exist");
  ExpectError(LoadTokenizerData("").status(), absl::StatusCode::kInvalidArgument, "tokenizer: empty path");
}

TEST_F(TokenizerLoaderTest, FilesOfAnotherKindAreInvalid) {
  const std::string kind = " is neither a GGUF file nor a directory with tokenizer.json";
  // A tokenizer.json given directly (not its directory) is not accepted.
  const std::string json_file = WriteFile("tokenizer.json", TokenizerJson().dump());
  ExpectError(LoadTokenizerData(json_file).status(), absl::StatusCode::kInvalidArgument,
              "tokenizer " + json_file + kind);
  // Shorter than the magic, and empty.
  const std::string short_file = WriteFile("short.gguf", "GGU");
  ExpectError(LoadTokenizerData(short_file).status(), absl::StatusCode::kInvalidArgument,
              "tokenizer " + short_file + kind);
  const std::string empty = WriteFile("empty.gguf", "");
  ExpectError(LoadTokenizerData(empty).status(), absl::StatusCode::kInvalidArgument, "tokenizer " + empty + kind);
  // The magic and then nothing GGUF: the GGUF reader's own error (DATA_LOSS
  // for a truncated file), naming the path, not "neither".
  const std::string truncated = WriteFile("truncated.gguf", "GGUF\x03");
  ExpectError(LoadTokenizerData(truncated).status(), absl::StatusCode::kDataLoss,
              truncated + ": truncated at the version field");
}

TEST_F(TokenizerLoaderTest, HfDirectoryReadsTokenizerJson) {
  const std::string d = HfDir("hf");
  absl::StatusOr<TokenizerData> t = LoadTokenizerData(d);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->model, "gpt2");
  EXPECT_THAT(t->tokens, ElementsAre("a", "b", "c", "ab", "abc", "<|begin|>", "<|end|>"));
  EXPECT_THAT(t->merges, ElementsAre("a b", "ab c"));
  EXPECT_EQ(t->chat_template, "");
  // A trailing slash is the same directory.
  absl::StatusOr<TokenizerData> slash = LoadTokenizerData(d + "/");
  ASSERT_TRUE(slash.ok()) << slash.status();
  EXPECT_EQ(slash->tokens, t->tokens);
}

TEST_F(TokenizerLoaderTest, HfDirectoryWithoutTokenizerJsonIsNotFound) {
  const std::string d = dir_ + "/empty_dir";
  std::filesystem::create_directories(d);
  WriteText(d + "/tokenizer_config.json", R"({"chat_template": "x"})");
  ExpectError(LoadTokenizerData(d).status(), absl::StatusCode::kNotFound,
              "tokenizer " + d + ": the directory has no tokenizer.json");
}

TEST_F(TokenizerLoaderTest, HfDirectoryWithBrokenTokenizerJsonIsInvalid) {
  const std::string d = dir_ + "/broken";
  std::filesystem::create_directories(d);
  WriteText(d + "/tokenizer.json", "{\"model\": ");
  absl::StatusOr<TokenizerData> t = LoadTokenizerData(d);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
}

TEST_F(TokenizerLoaderTest, ChatTemplateJinjaWinsOverTokenizerConfig) {
  const std::string d = HfDir("hf_template");
  WriteText(d + "/tokenizer_config.json",
            R"({"bos_token": "<|begin|>", "eos_token": "<|end|>", "chat_template": "from config"})");
  absl::StatusOr<TokenizerData> t = LoadTokenizerData(d);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->chat_template, "from config");
  EXPECT_EQ(t->bos_id, 5);
  EXPECT_EQ(t->eos_id, 6);

  // Byte for byte, trailing newline included.
  WriteText(d + "/chat_template.jinja", "{{ bos_token }}from jinja\r\n");
  t = LoadTokenizerData(d);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->chat_template, "{{ bos_token }}from jinja\r\n");
  EXPECT_EQ(t->bos_id, 5);  // the rest still from tokenizer_config.json

  // Also with no tokenizer_config.json at all.
  std::filesystem::remove(d + "/tokenizer_config.json");
  t = LoadTokenizerData(d);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->chat_template, "{{ bos_token }}from jinja\r\n");
  EXPECT_EQ(t->bos_id, -1);
}

TEST_F(TokenizerLoaderTest, BadChatTemplateJinjaFailsTheDirectory) {
  const std::string d = HfDir("hf_bad_template");
  const std::string jinja = d + "/chat_template.jinja";
  WriteText(jinja, " \n\t\r\n");
  ExpectError(LoadTokenizerData(d).status(), absl::StatusCode::kInvalidArgument,
              "chat template " + jinja + " is empty");
  WriteText(jinja, std::string("a\0b", 3));
  ExpectError(LoadTokenizerData(d).status(), absl::StatusCode::kInvalidArgument,
              "chat template " + jinja + " holds NUL bytes");
  std::filesystem::remove(jinja);
  std::filesystem::create_directories(jinja);
  ExpectError(LoadTokenizerData(d).status(), absl::StatusCode::kInvalidArgument,
              "chat template " + jinja + " is a directory, not a file");
}

TEST_F(TokenizerLoaderTest, ReadChatTemplateFileReturnsTheBytes) {
  const std::string text = "{% for m in messages %}{{ m.content }}{% endfor %}\n";
  absl::StatusOr<std::string> t = ReadChatTemplateFile(WriteFile("t.jinja", text));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, text);
  // Non-ASCII text passes through.
  const std::string r1 = "<｜Assistant｜>{{ x }}";
  t = ReadChatTemplateFile(WriteFile("r1.jinja", r1));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, r1);
}

TEST_F(TokenizerLoaderTest, ReadChatTemplateFileRefusals) {
  const std::string missing = dir_ + "/missing.jinja";
  ExpectError(ReadChatTemplateFile(missing).status(), absl::StatusCode::kNotFound,
              "chat template " + missing + " cannot be read");
  const std::string empty = WriteFile("empty.jinja", "");
  ExpectError(ReadChatTemplateFile(empty).status(), absl::StatusCode::kInvalidArgument,
              "chat template " + empty + " is empty");
  const std::string blank = WriteFile("blank.jinja", "\n  \n");
  ExpectError(ReadChatTemplateFile(blank).status(), absl::StatusCode::kInvalidArgument,
              "chat template " + blank + " is empty");
  const std::string nul = WriteFile("nul.jinja", std::string("{{ x }}\0", 8));
  ExpectError(ReadChatTemplateFile(nul).status(), absl::StatusCode::kInvalidArgument,
              "chat template " + nul + " holds NUL bytes: not a text file");
  ExpectError(ReadChatTemplateFile(dir_).status(), absl::StatusCode::kInvalidArgument,
              "chat template " + dir_ + " is a directory, not a file");
  const std::string latin1 = WriteFile("latin1.jinja", "{{ 'caf\xe9' }}");
  ExpectError(ReadChatTemplateFile(latin1).status(), absl::StatusCode::kInvalidArgument,
              "chat template " + latin1 + " is not valid UTF-8");
}

TEST_F(TokenizerLoaderTest, ReadChatTemplateFileSizeLimitIsOneMiB) {
  constexpr size_t kMiB = size_t{1} << 20;
  const std::string at_limit = WriteFile("at_limit.jinja", std::string(kMiB, 'x'));
  absl::StatusOr<std::string> t = ReadChatTemplateFile(at_limit);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), kMiB);
  const std::string over = WriteFile("over.jinja", std::string(kMiB + 1, 'x'));
  ExpectError(ReadChatTemplateFile(over).status(), absl::StatusCode::kInvalidArgument,
              "chat template " + over + " is 1048577 bytes; at most 1048576");
}

TEST_F(TokenizerLoaderTest, UseChatTemplateJinjaReplacesOnlyWhenPresent) {
  const std::string d = dir_ + "/use";
  std::filesystem::create_directories(d);
  TokenizerData data;
  data.chat_template = "original";
  ASSERT_TRUE(UseChatTemplateJinja(d, &data).ok());
  EXPECT_EQ(data.chat_template, "original");
  WriteText(d + "/chat_template.jinja", "replacement");
  absl::Status s = UseChatTemplateJinja(d, &data);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(data.chat_template, "replacement");
  WriteText(d + "/chat_template.jinja", "");
  ExpectError(UseChatTemplateJinja(d, &data), absl::StatusCode::kInvalidArgument, "is empty");
  EXPECT_EQ(data.chat_template, "replacement");  // untouched on error
}

}  // namespace
}  // namespace beacon
