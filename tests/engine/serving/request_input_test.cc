// The request's chat input and its reasoning split (engine/serving/
// request_input.cc), through PrepareRequest: the DeepSeek-R1 and Qwen3
// templates start the answer inside the think block or not, template
// variables reach the template (reserved ones are refused), earlier turns'
// reasoning_content is rendered by templates that know it, and
// max_reasoning_tokens is bounded, chat-only and needs a reasoning parser.
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime.h"
#include "engine/serving/serve_request.h"
#include "gtest/gtest.h"
#include "tests/engine/r1_runtime.h"

namespace beacon {
namespace {

// Reasoning requests: the DeepSeek-R1 tokenizer over dummy weights (and the
// same vocabulary with Qwen3's template), so <think> = 151648 and </think> =
// 151649 are real single tokens. (The vocabulary has no ChatML tokens:
// Qwen3's <|im_start|> is plain text here.)
constexpr int32_t kThinkOpen = 151648;
constexpr int32_t kThinkClose = 151649;
// The R1 vocabulary prepends BOS itself (add_bos), whatever the template.
constexpr char kR1Bos[] = "<｜begin▁of▁sentence｜>";

using testing::R1Runtime;
using testing::SourcePath;

class ReasoningRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    r1_ = R1Runtime().release();
    qwen3_ = R1Runtime(SourcePath("tests/fixtures/chat_templates/Qwen-Qwen3-0.6B.jinja")).release();
  }
  static void TearDownTestSuite() {
    delete r1_;
    delete qwen3_;
    r1_ = qwen3_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(r1_, nullptr);
    ASSERT_NE(qwen3_, nullptr);
    limits_.context_length = r1_->config().context_length;
    limits_.default_max_tokens = 100;
    limits_.kv_default = KvPolicyOptions::DefaultsFor(KvPolicyKind::kFull);
    absl::StatusOr<ReasoningSyntax> s = ResolveReasoningParser("auto", *r1_->tokenizer());
    ASSERT_TRUE(s.ok()) << s.status();
    limits_.reasoning = *s;
  }
  static ServeRequest Chat(std::vector<ChatMessage> messages) {
    ServeRequest r;
    r.input = ServeRequest::Input::kChat;
    r.messages = std::move(messages);
    return r;
  }
  absl::StatusOr<PreparedRequest> Prepare(const ServeRequest& r, const Runtime* rt = nullptr) const {
    return PrepareRequest(r, *(rt != nullptr ? rt : r1_)->tokenizer(), limits_);
  }
  // INVALID_ARGUMENT with exactly this message.
  void ExpectMessage(const ServeRequest& r, const std::string& message, const Runtime* rt = nullptr) const {
    absl::StatusOr<PreparedRequest> p = Prepare(r, rt);
    ASSERT_FALSE(p.ok()) << "accepted; expected: " << message;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
    EXPECT_EQ(std::string(p.status().message()), message);
  }

  static Runtime* r1_;
  static Runtime* qwen3_;
  ServeLimits limits_;
};

Runtime* ReasoningRequestTest::r1_ = nullptr;
Runtime* ReasoningRequestTest::qwen3_ = nullptr;

TEST_F(ReasoningRequestTest, R1ChatStartsInsideTheThinkBlock) {
  ASSERT_EQ(limits_.reasoning.parser, ReasoningParser::kDeepSeekR1);
  absl::StatusOr<PreparedRequest> p = Prepare(Chat({{"user", "Hi"}}));
  ASSERT_TRUE(p.ok()) << p.status();
  // BOS <｜User｜> Hi <｜Assistant｜>, as llama.cpp tokenises it.
  EXPECT_EQ(p->prompt, (std::vector<int32_t>{151646, 151644, 13048, 151645}));
  const ReasoningOptions& o = p->options.reasoning;
  EXPECT_EQ(o.syntax.parser, ReasoningParser::kDeepSeekR1);
  EXPECT_EQ(o.syntax.open_id, kThinkOpen);
  EXPECT_EQ(o.syntax.close_id, kThinkClose);
  EXPECT_TRUE(o.starts_inside);  // R1 reasons first, the prompt has no marker
  EXPECT_EQ(o.max_reasoning_tokens, 0);

  ServeRequest r = Chat({{"user", "Hi"}});
  r.max_reasoning_tokens = 7;
  p = Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.reasoning.max_reasoning_tokens, 7);
  r.max_reasoning_tokens = std::numeric_limits<int32_t>::max();
  p = Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.reasoning.max_reasoning_tokens, std::numeric_limits<int32_t>::max());
  r.max_reasoning_tokens = 0;  // explicit 0: no limit
  p = Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.reasoning.max_reasoning_tokens, 0);
}

TEST_F(ReasoningRequestTest, Qwen3ParserStartsInsideOnlyWhenThePromptOpensABlock) {
  limits_.reasoning.parser = ReasoningParser::kQwen3;
  absl::StatusOr<PreparedRequest> p = Prepare(Chat({{"user", "Hi"}}));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.reasoning.syntax.parser, ReasoningParser::kQwen3);
  EXPECT_FALSE(p->options.reasoning.starts_inside);  // no marker in the R1 prompt
}

TEST_F(ReasoningRequestTest, ChatTemplateKwargsReachTheTemplate) {
  ServeRequest r = Chat({{"user", "Hi"}});
  absl::StatusOr<PreparedRequest> on = Prepare(r, qwen3_);
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(qwen3_->tokenizer()->Decode(on->prompt, /*render_special=*/true),
            std::string(kR1Bos) + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_TRUE(on->options.reasoning.starts_inside);  // deepseek_r1: no marker yet

  // enable_thinking=false: Qwen3's template writes an empty, closed block,
  // so generation starts in the answer.
  r.chat_template_kwargs = jinja::Json::parse(R"({"enable_thinking": false})");
  absl::StatusOr<PreparedRequest> off = Prepare(r, qwen3_);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(qwen3_->tokenizer()->Decode(off->prompt, /*render_special=*/true),
            std::string(kR1Bos) + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  ASSERT_GE(off->prompt.size(), 4u);
  EXPECT_EQ(std::vector<int32_t>(off->prompt.end() - 4, off->prompt.end()),
            (std::vector<int32_t>{kThinkOpen, 271, kThinkClose, 271}));
  EXPECT_FALSE(off->options.reasoning.starts_inside);

  // An empty object and null change nothing.
  r.chat_template_kwargs = jinja::Json::object();
  absl::StatusOr<PreparedRequest> empty = Prepare(r, qwen3_);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->prompt, on->prompt);
  r.chat_template_kwargs = nullptr;
  absl::StatusOr<PreparedRequest> null = Prepare(r, qwen3_);
  ASSERT_TRUE(null.ok()) << null.status();
  EXPECT_EQ(null->prompt, on->prompt);
}

TEST_F(ReasoningRequestTest, ReasoningContentIsRenderedByTemplatesThatKnowIt) {
  ServeRequest r = Chat({{"user", "2+2?"}, {"assistant", "4", std::string("Add them.")}});
  r.add_generation_prompt = false;
  absl::StatusOr<PreparedRequest> p = Prepare(r, qwen3_);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(
      qwen3_->tokenizer()->Decode(p->prompt, /*render_special=*/true),
      std::string(kR1Bos) +
          "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nAdd them.\n</think>\n\n4<|im_end|>\n");
  // R1's template drops it.
  p = Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(r1_->tokenizer()->Decode(p->prompt, /*render_special=*/true),
            "<｜begin▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜>4<｜end▁of▁sentence｜>");

  r.messages[1].reasoning_content = std::string("bad \xFF byte");
  ExpectMessage(r, "messages[1].reasoning_content: is not valid UTF-8");
}

TEST_F(ReasoningRequestTest, ReservedAndNonObjectKwargsAreRefused) {
  for (const char* name : {"messages", "add_generation_prompt", "bos_token", "eos_token"}) {
    ServeRequest r = Chat({{"user", "Hi"}});
    r.chat_template_kwargs = jinja::Json::object();
    r.chat_template_kwargs["enable_thinking"] = false;
    r.chat_template_kwargs[name] = "x";
    ExpectMessage(r, absl::StrCat("chat_template_kwargs: '", name,
                                  "' is set by the server from the request; it cannot be passed here"));
  }
  for (const char* value : {"[1, 2]", "\"enable_thinking\"", "5", "true"}) {
    ServeRequest r = Chat({{"user", "Hi"}});
    r.chat_template_kwargs = jinja::Json::parse(value);
    ExpectMessage(r, "chat_template_kwargs: must be an object");
  }
  // Other names are the template's business.
  ServeRequest r = Chat({{"user", "Hi"}});
  r.chat_template_kwargs = jinja::Json::parse(R"({"tools": null, "custom": {"a": [1, 2]}})");
  EXPECT_TRUE(Prepare(r).ok());
}

TEST_F(ReasoningRequestTest, MaxReasoningTokensRange) {
  ServeRequest r = Chat({{"user", "Hi"}});
  r.max_reasoning_tokens = -1;
  ExpectMessage(r, "max_reasoning_tokens: -1 is outside [0, 2147483647] (0 = no limit)");
  r.max_reasoning_tokens = int64_t{2147483648};
  ExpectMessage(r, "max_reasoning_tokens: 2147483648 is outside [0, 2147483647] (0 = no limit)");
  // Past int64 (JSON): the digits as sent.
  r.max_reasoning_tokens = std::numeric_limits<int64_t>::max();
  r.oversized_ints["max_reasoning_tokens"] = "99999999999999999999";
  ExpectMessage(r, "max_reasoning_tokens: 99999999999999999999 is outside [0, 2147483647] (0 = no limit)");
}

TEST_F(ReasoningRequestTest, MaxReasoningTokensAppliesToChatOnly) {
  ServeRequest text;
  text.input = ServeRequest::Input::kText;
  text.text = "Hi";
  text.max_reasoning_tokens = 5;
  ExpectMessage(text, "max_reasoning_tokens: applies to chat input only");
  ServeRequest toks;
  toks.input = ServeRequest::Input::kTokens;
  toks.token_ids = {151646, 13048};
  toks.max_reasoning_tokens = 5;
  ExpectMessage(toks, "max_reasoning_tokens: applies to chat input only");
  // The range is checked first, whatever the input.
  text.max_reasoning_tokens = -3;
  ExpectMessage(text, "max_reasoning_tokens: -3 is outside [0, 2147483647] (0 = no limit)");

  // Without a limit, non-chat input is accepted and never split, even
  // though the tokens hold an open block.
  text.max_reasoning_tokens = 0;
  absl::StatusOr<PreparedRequest> p = Prepare(text);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.reasoning.syntax.parser, ReasoningParser::kNone);
  EXPECT_FALSE(p->options.reasoning.starts_inside);
  toks.max_reasoning_tokens.reset();
  toks.token_ids = {13048, kThinkOpen};
  p = Prepare(toks);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.reasoning.syntax.parser, ReasoningParser::kNone);
  EXPECT_FALSE(p->options.reasoning.starts_inside);
  EXPECT_EQ(p->options.reasoning.max_reasoning_tokens, 0);
}

TEST_F(ReasoningRequestTest, MaxReasoningTokensNeedsAReasoningParser) {
  limits_.reasoning = ReasoningSyntax();  // --reasoning-parser none
  ServeRequest r = Chat({{"user", "Hi"}});
  r.max_reasoning_tokens = 5;
  ExpectMessage(r,
                "max_reasoning_tokens: this server splits no reasoning (--reasoning-parser none, or the model has no "
                "<think> markers)");
  r.max_reasoning_tokens = 0;
  absl::StatusOr<PreparedRequest> p = Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->options.reasoning.syntax.parser, ReasoningParser::kNone);
  EXPECT_FALSE(p->options.reasoning.starts_inside);
}

}  // namespace
}  // namespace beacon
