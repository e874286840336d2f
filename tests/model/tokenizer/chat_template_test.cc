// Chat template rendering against jinja2's rendering of the real templates
// (tests/fixtures/chat_template.jsonl, written by
// tools/make_llamacpp_fixtures.py --chat), plus detection and errors.
#include "model/tokenizer/chat_template.h"

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model/tokenizer/tokenizer_test_util.h"

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

// The real templates' jinja2 renderings (tests/fixtures/chat_templates/,
// tools/make_chat_template_fixtures.py) through ChatTemplate: it must pass
// HF's variables (tools and documents none unless given, bos/eos tokens) and
// return raise_exception's message. Rows whose rendering called strftime_now
// need the oracle's fixed clock, which only jinja::Template::Render takes
// (tests/model/tokenizer/jinja/real_templates_test.cc checks them); here
// they are skipped.
TEST(ChatTemplateFixture, RealTemplatesThroughChatTemplate) {
  const std::string dir = testing::FixturePath("chat_templates/");
  std::ifstream in(dir + "cases.jsonl");
  ASSERT_TRUE(in) << "missing fixture; run make chat-template-fixtures";
  int checked = 0, raised = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::ordered_json row = nlohmann::ordered_json::parse(line);
    if (row.contains("now")) continue;
    if (row.contains("error") && row.at("error_kind") != "raise_exception") continue;
    SCOPED_TRACE(row.at("name").get<std::string>());
    std::ifstream src(dir + row.at("template").get<std::string>() + ".jinja", std::ios::binary);
    const std::string source((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
    const nlohmann::ordered_json& vars = row.at("vars");
    absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(source, vars.value("bos_token", std::string()),
                                                              vars.value("eos_token", std::string()));
    ASSERT_TRUE(t.ok()) << t.status();
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    for (auto it = vars.begin(); it != vars.end(); ++it) {
      if (it.key() != "messages" && it.key() != "add_generation_prompt" && !it.value().is_null()) {
        extra[it.key()] = it.value();
      }
    }
    absl::StatusOr<std::string> text =
        t->RenderJson(vars.at("messages"), vars.at("add_generation_prompt").get<bool>(), extra);
    if (row.contains("error")) {
      ASSERT_FALSE(text.ok());
      EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(text.status().message(), HasSubstr(row.at("error").get<std::string>()));
      ++raised;
      continue;
    }
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, row.at("rendered").get<std::string>());
    ++checked;
  }
  EXPECT_GE(checked, 900);
  EXPECT_GE(raised, 30);
}

TEST(ChatTemplate, SmolLmDefaultSystemPromptComesFromTheTemplate) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(kSmolLmTemplate, "<|im_start|>");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->Render({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(*t->Render({{"system", "S"}, {"user", "Hi"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, EmptyTemplateIsPlainChatMl) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource("", "");
  ASSERT_TRUE(t.ok());
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
  EXPECT_EQ(*t->Render({{"user", "Hi"}}, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
  // Extra variables reach the template (chat_template_kwargs).
  EXPECT_THAT(*t->RenderJson(nlohmann::ordered_json::array(), false, {{"date_string", "01 Dec 2026"}}),
              HasSubstr("Today Date: 01 Dec 2026"));
}

TEST(ChatTemplate, AnyTemplateRendersNowGemmaLike) {
  constexpr char kGemmaLike[] =
      "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ 'model' if message['role'] == 'assistant' "
      "else message['role'] }}\n{{ message['content'] | trim }}<end_of_turn>\n{% endfor %}"
      "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(kGemmaLike, "<bos>", "<eos>");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render({{"user", " hi "}, {"assistant", "yo"}}, true),
            "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\nyo<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatTemplate, BadRoleIsInvalidArgumentNamingIt) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(kSmolLmTemplate, "");
  ASSERT_TRUE(t.ok());
  absl::StatusOr<std::string> text = t->Render({{"user", "hi"}, {"function", "{}"}}, true);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("messages[1].role"));
  EXPECT_THAT(text.status().message(), HasSubstr("'function'"));
}

TEST(ChatTemplate, TemplateThatDoesNotParseNamesTheLine) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource("{% for m in messages %}\n{{ m.content }\n", "");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("chat template: template line 2"));
}

TEST(ChatTemplate, RaiseExceptionIsInvalidArgumentWithTheTemplatesMessage) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(
      "{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
      "{% endif %}{{ m['content'] }}{% endfor %}",
      "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->Render({{"user", "a"}, {"assistant", "b"}}, false), "ab");
  absl::StatusOr<std::string> text = t->Render({{"user", "a"}, {"user", "b"}}, false);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(text.status().message(), "Conversation roles must alternate user/assistant/user/assistant/...");
}

}  // namespace
}  // namespace beacon
