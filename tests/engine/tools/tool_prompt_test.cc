// Tools and tool history through real chat templates (tests/fixtures): Qwen2.5
// lists the tools itself and renders calls with object arguments; the R1
// distill's concatenates the arguments string; SmolLM2 has no tool support
// and gets the tools in its system message and the history written out.
#include "engine/tools/tool_prompt.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "model/tokenizer/chat_template.h"

namespace beacon {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(BEACON_SOURCE_DIR) + "/tests/fixtures/chat_templates/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<ChatMessage> History() {
  ChatMessage call("assistant", "");
  call.tool_calls = {{"call_1", "get_weather", R"({"city": "Paris"})"}};
  ChatMessage result("tool", R"({"temp": 21})");
  result.tool_call_id = "call_1";
  return {ChatMessage("user", "Weather in Paris?"), call, result};
}

ToolRequest Tools() {
  ToolRequest t;
  t.tools = {{"get_weather", "Current weather", R"({"type": "object", "properties": {"city": {"type": "string"}}})"}};
  return t;
}

std::string Render(const std::string& source, const ToolChat& chat) {
  auto t = ChatTemplate::FromSource(source, "", "");
  EXPECT_TRUE(t.ok()) << t.status();
  auto out = t->Render(chat.messages, true, chat.vars);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

TEST(ToolPrompt, QwenListsToolsAndRendersObjectArguments) {
  const std::string src = Fixture("Qwen-Qwen2.5-7B-Instruct.jinja");
  auto syntax = ResolveToolSyntax("auto", src);
  ASSERT_TRUE(syntax.ok());
  EXPECT_EQ(syntax->format, ToolCallFormat::kHermes);
  EXPECT_TRUE(syntax->traits.renders_tools);
  const std::string out = Render(src, ToolChatInput(History(), nullptr, Tools(), *syntax));
  EXPECT_NE(out.find(R"(<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Current weather")"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("<tool_response>\n{\"temp\": 21}\n</tool_response>"), std::string::npos) << out;
  // tool_choice none: the tools are not shown; the history still renders.
  ToolRequest none = Tools();
  none.choice.mode = ToolChoice::Mode::kNone;
  const std::string hidden = Render(src, ToolChatInput(History(), nullptr, none, *syntax));
  EXPECT_EQ(hidden.find("<tools>"), std::string::npos) << hidden;
  EXPECT_NE(hidden.find("<tool_response>"), std::string::npos) << hidden;
}

TEST(ToolPrompt, R1ConcatenatesTheArgumentsString) {
  const std::string src = Fixture("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja");
  auto syntax = ResolveToolSyntax("auto", src);
  ASSERT_TRUE(syntax.ok());
  EXPECT_EQ(syntax->format, ToolCallFormat::kDeepSeekR1);
  const std::string out = Render(src, ToolChatInput(History(), nullptr, Tools(), *syntax));
  EXPECT_NE(out.find(FormatToolCall(ToolCallFormat::kDeepSeekR1, "get_weather", R"({"city": "Paris"})")),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(R"({"temp": 21})"), std::string::npos) << out;
  // Its template does not list tools: they are in the system message.
  EXPECT_FALSE(syntax->traits.renders_tools);
  EXPECT_NE(out.find("\"name\": \"get_weather\""), std::string::npos) << out;
}

TEST(ToolPrompt, SmolLm2GetsToolsInItsSystemMessage) {
  const std::string src = Fixture("smollm2.jinja");
  auto syntax = ResolveToolSyntax("auto", src);
  ASSERT_TRUE(syntax.ok());
  EXPECT_EQ(syntax->format, ToolCallFormat::kHermes);
  EXPECT_FALSE(syntax->traits.renders_tools);
  const std::string out = Render(src, ToolChatInput(History(), nullptr, Tools(), *syntax));
  EXPECT_EQ(out.find("<|im_start|>system\n# Tools"), 0u) << out;
  EXPECT_NE(out.find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                     "\"Paris\"}}\n</tool_call><|im_end|>"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>"),
            std::string::npos)
      << out;
}

TEST(ToolPrompt, RefusesAnUnknownParserName) {
  auto s = ResolveToolSyntax("mistral", "");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--tool-call-parser"), std::string::npos);
}

}  // namespace
}  // namespace beacon
