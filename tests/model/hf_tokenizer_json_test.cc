#include "model/hf_tokenizer_json.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model/safetensors_writer.h"

namespace beacon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;
using testing_util::WriteText;

// The Split regexes of real tokenizer.json files, as they read after JSON
// decoding (Llama 3 and Qwen2 spell CR/LF as regex escapes).
constexpr char kLlama3Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kQwen2Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class HfTokenizerJsonTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing_util::MakeTempDir("hf_tokenizer"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A tokenizer.json with vocab {a:0, b:1, c:2, ab:3, abc:4}, merges given as
  // `merges`, two added tokens and the given pre_tokenizer.
  json Base(const json& pre_tokenizer, const json& merges = json::array({"a b", "ab c"})) const {
    return {{"model",
             {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}}}, {"merges", merges}}},
            {"added_tokens",
             {{{"id", 5}, {"content", "<|begin|>"}, {"special", true}},
              {{"id", 6}, {"content", "<think>"}, {"special", false}},
              {{"id", 8}, {"content", "<|end|>"}, {"special", true}}}},
            {"pre_tokenizer", pre_tokenizer},
            {"decoder", {{"type", "ByteLevel"}}}};
  }

  absl::StatusOr<TokenizerData> Read(const json& tok, const std::string& config = "") {
    WriteText(dir_ + "/tokenizer.json", tok.dump());
    std::filesystem::remove(dir_ + "/tokenizer_config.json");
    if (!config.empty()) WriteText(dir_ + "/tokenizer_config.json", config);
    return ReadHfTokenizerJson(dir_ + "/tokenizer.json");
  }

  static json SplitThenByteLevel(const std::string& regex) {
    return {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}},
              {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  }

  std::string dir_;
};

TEST_F(HfTokenizerJsonTest, VocabMergesAndAddedTokens) {
  auto t = Read(Base({{"type", "ByteLevel"}}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->model, "gpt2");
  EXPECT_EQ(t->pre, "gpt2");  // ByteLevel's own (GPT-2) regex
  EXPECT_THAT(t->tokens, ElementsAre("a", "b", "c", "ab", "abc", "<|begin|>", "<think>", "<unused_7>", "<|end|>"));
  EXPECT_THAT(t->token_types, ElementsAre(TokenType::kNormal, TokenType::kNormal, TokenType::kNormal,
                                          TokenType::kNormal, TokenType::kNormal, TokenType::kControl,
                                          TokenType::kUserDefined, TokenType::kUnused, TokenType::kControl));
  EXPECT_THAT(t->merges, ElementsAre("a b", "ab c"));
  EXPECT_EQ(t->bos_id, -1);
  EXPECT_EQ(t->eos_id, -1);
  EXPECT_FALSE(t->add_bos);
}

TEST_F(HfTokenizerJsonTest, MergesAsPairs) {
  auto t = Read(Base({{"type", "ByteLevel"}}, json::array({json::array({"a", "b"}), json::array({"ab", "c"})})));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->merges, ElementsAre("a b", "ab c"));
  t = Read(Base({{"type", "ByteLevel"}}, json::array({json::array({"a"})})));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("model.merges entry 0"));
}

TEST_F(HfTokenizerJsonTest, PreTokenizerNames) {
  EXPECT_EQ(Read(Base(SplitThenByteLevel(kLlama3Regex)))->pre, "llama3");
  EXPECT_EQ(Read(Base(SplitThenByteLevel(kQwen2Regex)))->pre, "qwen2");
  // Some files write CR/LF as JSON control-character escapes instead.
  std::string raw_crlf = kQwen2Regex;
  for (size_t p; (p = raw_crlf.find("\\r\\n")) != std::string::npos;) raw_crlf.replace(p, 4, "\r\n");
  EXPECT_EQ(Read(Base(SplitThenByteLevel(raw_crlf)))->pre, "qwen2");
  // DeepSeek-V3: digit groups, a CJK split, then its own regex. Not one the
  // tokenizer implements, so refused rather than split like Llama 3.
  json seq = SplitThenByteLevel("\\p{N}{1,3}");
  seq["pretokenizers"].insert(seq["pretokenizers"].begin() + 1,
                              json({{"type", "Split"}, {"pattern", {{"Regex", "[一-龥぀-ゟ゠-ヿ]+"}}}}));
  auto v3 = Read(Base(seq));
  EXPECT_EQ(v3.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v3.status().message()), HasSubstr("unsupported pre_tokenizer Split regex"));
  // ByteLevel without its regex and no Split: nothing splits the text.
  auto bare = Read(Base({{"type", "ByteLevel"}, {"use_regex", false}}));
  EXPECT_THAT(std::string(bare.status().message()), HasSubstr("neither splits"));
  // SmolLM2: individual digits, then GPT-2 byte-level.
  const json smol = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Digits"}, {"individual_digits", true}}, {{"type", "ByteLevel"}, {"use_regex", true}}}}};
  EXPECT_EQ(Read(Base(smol))->pre, "smollm");
}

TEST_F(HfTokenizerJsonTest, TokenizerConfigSpecialTokensAndTemplate) {
  auto t = Read(Base({{"type", "ByteLevel"}}),
                R"({"bos_token": "<|begin|>", "eos_token": {"content": "<|end|>", "special": true},
                    "pad_token": "<|end|>", "add_bos_token": true, "chat_template": "{{ messages }}"})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->bos_id, 5);
  EXPECT_EQ(t->eos_id, 8);
  EXPECT_EQ(t->pad_id, 8);
  EXPECT_TRUE(t->add_bos);
  EXPECT_EQ(t->chat_template, "{{ messages }}");

  t = Read(Base({{"type", "ByteLevel"}}),
           R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->chat_template, "D");

  t = Read(Base({{"type", "ByteLevel"}}), R"({"eos_token": "<|nope|>"})");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("eos_token '<|nope|>' is not in the vocabulary"));
  t = Read(Base({{"type", "ByteLevel"}}), R"({"add_bos_token": "yes"})");
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("'add_bos_token' must be a boolean"));
}

// Llama 3 says "prepend BOS" only through its post-processor.
TEST_F(HfTokenizerJsonTest, AddBosFromTemplatePostProcessor) {
  json tok = Base(SplitThenByteLevel(kLlama3Regex));
  tok["post_processor"] = {{"type", "Sequence"},
                           {"processors",
                            {{{"type", "ByteLevel"}},
                             {{"type", "TemplateProcessing"},
                              {"single",
                               {{{"SpecialToken", {{"id", "<|begin|>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}}}}};
  auto t = Read(tok, R"({"eos_token": "<|end|>"})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->add_bos);
  EXPECT_EQ(t->bos_id, 5);
  EXPECT_EQ(t->eos_id, 8);
}

TEST_F(HfTokenizerJsonTest, UnsupportedAndMalformedFiles) {
  json tok = Base({{"type", "ByteLevel"}});
  tok["model"]["type"] = "Unigram";
  EXPECT_THAT(std::string(Read(tok).status().message()), HasSubstr("model.type is 'Unigram'"));

  tok = Base({{"type", "Metaspace"}});
  tok["decoder"] = {{"type", "Metaspace"}};
  EXPECT_THAT(std::string(Read(tok).status().message()), HasSubstr("only byte-level BPE"));

  tok = Base({{"type", "ByteLevel"}});
  tok["model"]["byte_fallback"] = true;
  EXPECT_THAT(std::string(Read(tok).status().message()), HasSubstr("byte_fallback"));

  tok = Base({{"type", "ByteLevel"}});
  tok["model"]["vocab"]["dup"] = 1;
  EXPECT_THAT(std::string(Read(tok).status().message()), HasSubstr("gives id 1 to both"));

  tok = Base({{"type", "ByteLevel"}});
  tok["model"]["vocab"]["huge"] = 1u << 30;
  EXPECT_THAT(std::string(Read(tok).status().message()), HasSubstr("invalid id"));

  tok = Base({{"type", "ByteLevel"}});
  tok["added_tokens"] = {{{"content", "x"}}};
  EXPECT_THAT(std::string(Read(tok).status().message()), HasSubstr("needs an 'id'"));

  // Ids are dense: one far past the entries (8 here) would make a vocabulary
  // of millions of <unused_i> fillers from a file of a few bytes (issue 46).
  tok = Base({{"type", "ByteLevel"}});
  tok["model"]["vocab"]["far"] = (1u << 24) - 1;
  EXPECT_THAT(std::string(Read(tok).status().message()), HasSubstr("ids are 0 to 4104"));
  tok = Base({{"type", "ByteLevel"}});
  tok["added_tokens"].push_back({{"id", 4104}, {"content", "<|last|>"}});  // 9 entries + the gap of 4096
  ASSERT_TRUE(Read(tok).ok()) << Read(tok).status();
  EXPECT_EQ(Read(tok)->tokens.size(), 4105u);
  tok["added_tokens"].push_back({{"id", 4106}, {"content", "<|past|>"}});  // 10 entries: at most 4105
  EXPECT_THAT(std::string(Read(tok).status().message()), HasSubstr("needs an 'id' below 4106"));

  // A file of nested brackets is refused before it is parsed, naming the file.
  WriteText(dir_ + "/tokenizer.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_THAT(std::string(ReadHfTokenizerJson(dir_ + "/tokenizer.json").status().message()),
              HasSubstr("tokenizer.json nests deeper than 128 levels"));

  WriteText(dir_ + "/tokenizer.json", "{");
  auto t = ReadHfTokenizerJson(dir_ + "/tokenizer.json");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadHfTokenizerJson(dir_ + "/absent.json").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace beacon
