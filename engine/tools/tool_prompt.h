// A chat with tools as the model's template should see it. A template that
// lists tools itself (ToolTemplateTraits::renders_tools) gets them as its
// `tools` variable in OpenAI's shape, as HF's apply_chat_template passes
// them; one that does not gets them described in its system message, in the
// format the answer is parsed in (Qwen2.5's wording). A template that
// renders earlier calls and tool results (renders_tool_calls) gets the
// history as it is; one that does not gets an assistant turn's calls written
// into its text in that format and a tool result as a user turn in
// <tool_response> tags (the Hermes convention).
//
// Under tool_choice none the tools are not shown at all: the model is not
// told of what it may not call.
#ifndef BEACON_ENGINE_TOOLS_TOOL_PROMPT_H_
#define BEACON_ENGINE_TOOLS_TOOL_PROMPT_H_

#include <string>
#include <vector>

#include "engine/tools/tool_format.h"
#include "engine/tools/tool_spec.h"
#include "model/tokenizer/jinja/ast.h"
#include "model/tokenizer/tokenizer.h"

namespace beacon {

struct ToolChat {
  std::vector<ChatMessage> messages;
  jinja::Json vars;  // the template's extra variables: the request's, plus `tools`
};

// `vars`: the request's chat_template_kwargs (an object, or null).
// REQUIRES tools.Validate().ok().
ToolChat ToolChatInput(const std::vector<ChatMessage>& messages, const jinja::Json& vars, const ToolRequest& tools,
                       const ToolSyntax& syntax);

// The tools in OpenAI's shape: [{"type": "function", "function": {...}}].
jinja::Json ToolsJson(const ToolRequest& tools);

// What a template without tool support gets in its system message.
std::string ToolSystemText(const ToolRequest& tools, ToolCallFormat format);

}  // namespace beacon

#endif  // BEACON_ENGINE_TOOLS_TOOL_PROMPT_H_
