// Tool calls parsed out of answers in each format, whole and streamed in
// pieces of every size: calls come out with compact arguments, text around
// them stays, and malformed or unknown calls stay as text.
#include "engine/tools/tool_parser.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace beacon {
namespace {

const std::vector<std::string> kTools = {"get_weather", "get_time"};

// The same answer through ToolCallStream in pieces of `step` bytes.
ParsedAnswer Streamed(ToolCallFormat f, const std::string& text, size_t step) {
  ToolCallStream s(f, kTools);
  ParsedAnswer all;
  auto take = [&](ParsedAnswer p) {
    all.content += p.content;
    for (auto& c : p.calls) all.calls.push_back(c);
  };
  for (size_t i = 0; i < text.size(); i += step) take(s.Push(text.substr(i, step)));
  take(s.Finish());
  return all;
}

void ExpectBoth(ToolCallFormat f, const std::string& text, const std::string& content,
                const std::vector<std::pair<std::string, std::string>>& calls) {
  for (size_t step : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{1000}}) {
    const ParsedAnswer p = step == 0 ? ParseToolCalls(f, text, kTools) : Streamed(f, text, step);
    SCOPED_TRACE(::testing::Message() << ToolCallFormatName(f) << " step " << step << ": " << text);
    EXPECT_EQ(p.content, content);
    ASSERT_EQ(p.calls.size(), calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(p.calls[i].name, calls[i].first);
      EXPECT_EQ(p.calls[i].arguments, calls[i].second);
    }
  }
}

TEST(ToolParser, Hermes) {
  const auto f = ToolCallFormat::kHermes;
  ExpectBoth(f, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
             {{"get_weather", R"({"city":"Paris"})"}});
  ExpectBoth(f,
             "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
             "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"CET\\\"}\"}\n"
             "</tool_call>",
             "Let me check.\n", {{"get_weather", R"({"city":"Oslo"})"}, {"get_time", R"({"tz":"CET"})"}});
  // Unclosed at the end of the answer (stopped by EOS): still a call.
  ExpectBoth(f, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}", "", {{"get_time", "{}"}});
  // Plain text that mentions a tag, broken JSON, an unknown name: text.
  ExpectBoth(f, "Use <tool to call.", "Use <tool to call.", {});
  const std::string broken = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {</tool_call>";
  ExpectBoth(f, broken, broken, {});
  const std::string unknown = "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>";
  ExpectBoth(f, unknown, unknown, {});
  const std::string not_object = "<tool_call>{\"name\": \"get_time\", \"arguments\": [1]}</tool_call>";
  ExpectBoth(f, not_object, not_object, {});
  // A ```json fence holding a call (Qwen2.5-Coder writes them): a call; one
  // holding other JSON, or an unknown name: text as written.
  ExpectBoth(f, "Here:\n```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n```", "Here:\n",
             {{"get_weather", R"({"city":"Rome"})"}});
  const std::string code = "Example:\n```json\n{\"a\": 1}\n```\nDone.";
  ExpectBoth(f, code, code, {});
}

TEST(ToolParser, Llama3Json) {
  const auto f = ToolCallFormat::kLlama3Json;
  ExpectBoth(f, R"({"name": "get_weather", "parameters": {"city": "Rome"}})", "",
             {{"get_weather", R"({"city":"Rome"})"}});
  ExpectBoth(
      f,
      R"(<|python_tag|>{"name": "get_time", "parameters": {}}; {"name": "get_weather", "parameters": {"city": "a;b}"}})",
      "", {{"get_time", "{}"}, {"get_weather", R"({"city":"a;b}"})"}});
  ExpectBoth(f, "The weather is fine.", "The weather is fine.", {});
  const std::string half = R"({"name": "get_time", "parameters": {})";
  ExpectBoth(f, half, half, {});
}

TEST(ToolParser, DeepSeekR1) {
  const auto f = ToolCallFormat::kDeepSeekR1;
  const std::string one =
      std::string(kR1CallsBegin) + FormatToolCall(f, "get_weather", R"({"city": "Lima"})") + std::string(kR1CallsEnd);
  ExpectBoth(f, one, "", {{"get_weather", R"({"city":"Lima"})"}});
  const std::string two = "Checking." + std::string(kR1CallsBegin) + FormatToolCall(f, "get_time", "{}") + "\n" +
                          FormatToolCall(f, "get_weather", R"({"city": "Quito"})") + std::string(kR1CallsEnd);
  ExpectBoth(f, two, "Checking.", {{"get_time", "{}"}, {"get_weather", R"({"city":"Quito"})"}});
}

}  // namespace
}  // namespace beacon
