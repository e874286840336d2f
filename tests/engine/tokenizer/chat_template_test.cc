// Chat template rendering against jinja2's rendering of the real templates
// (tests/fixtures/chat_template.jsonl, written by
// tools/make_llamacpp_fixtures.py --chat), plus detection and errors.
#include "engine/tokenizer/chat_template.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace beacon {
namespace {

using ::testing::HasSubstr;

constexpr char kSmolLmTemplate[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

std::vector<ChatMessage> Messages(const nlohmann::json& array) {
  std::vector<ChatMessage> out;
  for (const auto& m : array) out.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  return out;
}

TEST(ChatTemplateFixture, RendersLikeJinja2) {
  const auto rows = testing::ReadJsonl(testing::FixturePath("chat_template.jsonl"));
  ASSERT_GE(rows.size(), 16u) << "missing fixture; run tools/make_llamacpp_fixtures.py --chat";
  int smollm = 0;
  for (const auto& row : rows) {
    SCOPED_TRACE(row.at("name").get<std::string>());
    absl::StatusOr<ChatTemplate> t =
        ChatTemplate::FromSource(row.at("template").get<std::string>(), row.at("bos").get<std::string>());
    ASSERT_TRUE(t.ok()) << t.status();
    absl::StatusOr<std::string> text =
        t->Render(Messages(row.at("messages")), row.at("add_generation_prompt").get<bool>());
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, row.at("rendered").get<std::string>());
    smollm += row.at("family") == "smollm2";
  }
  EXPECT_GE(smollm, 8);
}

TEST(ChatTemplate, SmolLmDefaultSystemPromptIsReadFromTheTemplate) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(kSmolLmTemplate, "<|im_start|>");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->family(), ChatTemplate::Family::kChatMl);
  ASSERT_TRUE(t->default_system_prompt().has_value());
  EXPECT_EQ(*t->default_system_prompt(), "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_EQ(*t->Render({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(*t->Render({{"system", "S"}, {"user", "Hi"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, ChatMlWithoutLiteralSystemPromptHasNone) {
  // The system text here is an expression, not a literal.
  constexpr char kQwen3Like[] =
      "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + "
      "'<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}...{%- endfor %}";
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(kQwen3Like, "");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->default_system_prompt().has_value());
  EXPECT_EQ(*t->Render({{"user", "Hi"}}, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, EscapedNewlinesInTheSourceAreUnderstood) {
  constexpr char kQwen25Like[] =
      "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
      "assistant.<|im_end|>\\n' }}{%- endif %}";
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(kQwen25Like, "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->default_system_prompt().value_or(""),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
}

TEST(ChatTemplate, EmptyTemplateIsPlainChatMl) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource("", "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->family(), ChatTemplate::Family::kChatMl);
  EXPECT_EQ(*t->Render({{"user", "a"}, {"assistant", "b"}}, false),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n");
  EXPECT_EQ(*t->Render({}, true), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama31SystemBlockWithDates) {
  constexpr char kLlama31Like[] =
      "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}"
      "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}"
      "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}";
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(kLlama31Like, "<|begin_of_text|>");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->family(), ChatTemplate::Family::kLlama3);
  EXPECT_EQ(*t->Render({{"system", " Be brief. "}, {"user", "Hi"}}, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, BadRoleIsInvalidArgumentNamingIt) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(kSmolLmTemplate, "");
  ASSERT_TRUE(t.ok());
  absl::StatusOr<std::string> text = t->Render({{"user", "hi"}, {"tool", "{}"}}, true);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("messages[1].role"));
  EXPECT_THAT(text.status().message(), HasSubstr("'tool'"));
}

TEST(ChatTemplate, UnknownFamilyIsUnimplemented) {
  constexpr char kGemmaLike[] =
      "{% for message in messages %}<start_of_turn>{{ message['role'] }}\n{{ message['content'] }}"
      "<end_of_turn>\n{% endfor %}";
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(kGemmaLike, "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(), HasSubstr("unsupported chat template"));
  EXPECT_THAT(t.status().message(), HasSubstr("<start_of_turn>"));
}

}  // namespace
}  // namespace beacon
