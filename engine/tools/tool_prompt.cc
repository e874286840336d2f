#include "engine/tools/tool_prompt.h"

#include "absl/strings/str_cat.h"
#include "model/tokenizer/jinja/value.h"

namespace beacon {

jinja::Json ToolsJson(const ToolRequest& tools) {
  jinja::Json out = jinja::Json::array();
  for (const ToolDefinition& t : tools.tools) {
    jinja::Json f = {{"name", t.name}};
    if (!t.description.empty()) f["description"] = t.description;
    f["parameters"] = jinja::Json::parse(t.parameters, nullptr, /*allow_exceptions=*/false);
    if (f["parameters"].is_discarded()) f["parameters"] = jinja::Json::object();  // Validate refused it already
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

std::string ToolSystemText(const ToolRequest& tools, ToolCallFormat format) {
  std::string list;
  for (const jinja::Json& t : ToolsJson(tools))
    absl::StrAppend(&list, "\n", jinja::JsonDumps(t, -1, ", ", ": ", false));
  if (format == ToolCallFormat::kHermes) {
    // Qwen2.5's own wording, which Hermes-trained models know.
    return absl::StrCat(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
        list,
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call>");
  }
  return absl::StrCat("# Tools\n\nYou may call one or more of these functions to answer:", list,
                      "\n\nTo call a function, write the call as:\n",
                      FormatToolCall(format, "<function-name>", "<args-json-object>"));
}

ToolChat ToolChatInput(const std::vector<ChatMessage>& messages, const jinja::Json& vars, const ToolRequest& tools,
                       const ToolSyntax& syntax) {
  ToolChat out;
  out.vars = vars.is_object() ? vars : jinja::Json::object();
  if (syntax.traits.renders_tool_calls) {
    out.messages = messages;
  } else {
    out.messages.reserve(messages.size() + 1);
    for (const ChatMessage& m : messages) {
      ChatMessage c(m.role, m.content, m.reasoning_content);
      if (m.role == "tool") {
        c.role = "user";
        c.content = absl::StrCat("<tool_response>\n", m.content, "\n</tool_response>");
      }
      for (const ChatToolCall& call : m.tool_calls) {
        absl::StrAppend(&c.content, c.content.empty() ? "" : "\n",
                        FormatToolCall(syntax.format, call.name, call.arguments));
      }
      out.messages.push_back(std::move(c));
    }
  }
  if (!tools.active()) return out;
  if (syntax.traits.renders_tools) {
    out.vars["tools"] = ToolsJson(tools);
    return out;
  }
  const std::string text = ToolSystemText(tools, syntax.format);
  if (!out.messages.empty() && out.messages.front().role == "system") {
    absl::StrAppend(&out.messages.front().content, "\n\n", text);
  } else {
    out.messages.insert(out.messages.begin(), ChatMessage("system", text));
  }
  return out;
}

}  // namespace beacon
