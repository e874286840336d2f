// Runtime::Create with RuntimeOptions.tokenizer / chat_template (the
// --tokenizer and --chat-template flags): a tokenizer from another file than
// the weights, a template from a file of its own, and every start-up refusal
// (code and what it names). Weights are dummy; no forward pass runs.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace beacon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Src(const std::string& rel) { return std::string(BEACON_SOURCE_DIR) + "/" + rel; }

const std::string kR1Model = "dummy:" + Src("tests/data/tiny-r1-qwen2.json");  // vocab 152064
const std::string kSmallModel = "dummy:" + Src("tests/data/tiny-qwen2.json");  // vocab 256
const std::string kR1Vocab = Src("tests/fixtures/tokenizers/r1-distill-qwen-7b-vocab.gguf");

class RuntimeTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::path(::testing::TempDir()) / ("beacon_runtime_tokenizer_" + std::to_string(::getpid())))
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteFile(const std::string& name, const std::string& text) const {
    const std::string p = dir_ + "/" + name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p;
  }

  static absl::StatusOr<std::unique_ptr<Runtime>> Create(const std::string& model, const std::string& tokenizer,
                                                         const std::string& chat_template = "") {
    RuntimeOptions o;
    o.model = model;
    o.tokenizer = tokenizer;
    o.chat_template = chat_template;
    o.threads = 1;
    return Runtime::Create(o);
  }

  static void ExpectError(const absl::Status& s, absl::StatusCode code, const std::vector<std::string>& needles) {
    ASSERT_FALSE(s.ok()) << "created; expected an error";
    EXPECT_EQ(s.code(), code) << s;
    for (const std::string& n : needles) EXPECT_THAT(std::string(s.message()), HasSubstr(n));
  }

  std::string dir_;
};

TEST_F(RuntimeTokenizerTest, DummyWeightsWithoutTokenizerHaveNone) {
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Create(kR1Model, "");
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_EQ((*rt)->tokenizer(), nullptr);
  EXPECT_EQ((*rt)->config().vocab_size, 152064);
}

TEST_F(RuntimeTokenizerTest, R1VocabGgufGivesTheR1TokenizerAndTemplate) {
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Create(kR1Model, kR1Vocab);
  ASSERT_TRUE(rt.ok()) << rt.status();
  const Tokenizer* tok = (*rt)->tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 152064);
  EXPECT_EQ(tok->TokenId("<think>"), 151648);
  EXPECT_EQ(tok->TokenId("</think>"), 151649);
  EXPECT_EQ(tok->bos_id(), 151646);
  EXPECT_THAT(std::string(tok->chat_template_source()), HasSubstr("<｜Assistant｜>"));

  // The R1 template as llama.cpp renders it (tests/fixtures/tokenizers/
  // r1-distill-qwen-7b.jsonl, r1/user_only/gen) less the leading BOS: the
  // vocabulary prepends BOS itself (add_bos), so the template's bos_token
  // renders as "" and Encode(add_bos) adds it once.
  absl::StatusOr<std::string> rendered = tok->ApplyChatTemplate({{"user", "Hi"}}, true);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(*rendered, "<｜User｜>Hi<｜Assistant｜>");
  rendered = tok->ApplyChatTemplate({{"user", "Hi"}}, false);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(*rendered, "<｜User｜>Hi");
  rendered = tok->ApplyChatTemplate({{"system", "Be terse."}, {"user", "Hi"}}, true);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(*rendered, "Be terse.<｜User｜>Hi<｜Assistant｜>");

  // EncodePrompt: BOS once, then <｜User｜> Hi <｜Assistant｜> (ids as llama.cpp's).
  absl::StatusOr<std::vector<int32_t>> ids = (*rt)->EncodePrompt("Hi", /*chat=*/true, "");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(151646, 151644, 13048, 151645));
}

TEST_F(RuntimeTokenizerTest, ChatTemplateFileReplacesTheTokenizers) {
  const std::string path = WriteFile("plain.jinja",
                                     "{% for m in messages %}[{{ m.role }}]{{ m.content }}\n{% endfor %}"
                                     "{% if add_generation_prompt %}[assistant]{% endif %}");
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Create(kR1Model, kR1Vocab, path);
  ASSERT_TRUE(rt.ok()) << rt.status();
  const Tokenizer* tok = (*rt)->tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 152064);
  EXPECT_THAT(std::string(tok->chat_template_source()), ::testing::Not(HasSubstr("<｜Assistant｜>")));
  absl::StatusOr<std::string> rendered = tok->ApplyChatTemplate({{"system", "S"}, {"user", "Hi"}}, true);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(*rendered, "[system]S\n[user]Hi\n[assistant]");
}

TEST_F(RuntimeTokenizerTest, ChatTemplateFileReplacesTheModelsOwnTemplate) {
  // Over the R1 template that the --tokenizer brought, a second template
  // from the Qwen3 collection's file takes over (enable_thinking included).
  const std::string qwen3 = Src("tests/fixtures/chat_templates/Qwen-Qwen3-0.6B.jinja");
  if (!std::filesystem::exists(qwen3)) GTEST_SKIP() << qwen3 << " missing";
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Create(kR1Model, kR1Vocab, qwen3);
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_THAT(std::string((*rt)->tokenizer()->chat_template_source()), HasSubstr("enable_thinking"));
  absl::StatusOr<std::string> rendered = (*rt)->tokenizer()->ApplyChatTemplate({{"user", "Hi"}}, true);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(*rendered, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_F(RuntimeTokenizerTest, TokenizerLargerThanTheModelVocabularyIsRefused) {
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Create(kSmallModel, kR1Vocab);
  ExpectError(rt.status(), absl::StatusCode::kInvalidArgument,
              {"tokenizer " + kR1Vocab + " has 152064 tokens", "the model " + kSmallModel + " has vocab_size 256",
               "do not belong together"});
}

TEST_F(RuntimeTokenizerTest, ChatTemplateThatDoesNotParseIsAStartUpError) {
  const std::string path = WriteFile("broken.jinja", "Hello\n{% for m in messages %}{{ m.content }}");
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Create(kR1Model, kR1Vocab, path);
  ExpectError(rt.status(), absl::StatusCode::kInvalidArgument, {path, "chat template", "line"});
  const std::string bad_expr = WriteFile("bad_expr.jinja", "{{ messages[ }}");
  rt = Create(kR1Model, kR1Vocab, bad_expr);
  ExpectError(rt.status(), absl::StatusCode::kInvalidArgument, {bad_expr, "chat template", "line 1"});
}

TEST_F(RuntimeTokenizerTest, ChatTemplateWithoutAnyTokenizerIsRefused) {
  const std::string path = WriteFile("ok.jinja", "{{ messages }}");
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Create(kR1Model, "", path);
  ExpectError(rt.status(), absl::StatusCode::kInvalidArgument,
              {"chat template " + path, "the model " + kR1Model + " has no tokenizer", "give --tokenizer too"});
}

TEST_F(RuntimeTokenizerTest, ChatTemplateFileErrorsAreReadChatTemplateFiles) {
  const std::string missing = dir_ + "/missing.jinja";
  ExpectError(Create(kR1Model, kR1Vocab, missing).status(), absl::StatusCode::kNotFound,
              {"chat template " + missing + " cannot be read"});
  const std::string empty = WriteFile("empty.jinja", "");
  ExpectError(Create(kR1Model, kR1Vocab, empty).status(), absl::StatusCode::kInvalidArgument,
              {"chat template " + empty + " is empty"});
}

TEST_F(RuntimeTokenizerTest, TokenizerPathErrors) {
  const std::string missing = dir_ + "/missing-vocab.gguf";
  ExpectError(Create(kR1Model, missing).status(), absl::StatusCode::kNotFound,
              {"tokenizer " + missing + " does not exist"});
  const std::string text = WriteFile("notes.txt", "not a tokenizer");
  ExpectError(Create(kR1Model, text).status(), absl::StatusCode::kInvalidArgument,
              {"tokenizer " + text + " is neither a GGUF file nor a directory with tokenizer.json"});
  ExpectError(Create(kR1Model, dir_).status(), absl::StatusCode::kNotFound,
              {"tokenizer " + dir_ + ": the directory has no tokenizer.json"});
}

}  // namespace
}  // namespace beacon
