// The tool-call formats of the model families this server serves, and which
// one a model's chat template speaks:
//   hermes       <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//                (parsed also from a ```json fence holding such an object,
//                which Qwen2.5-Coder writes instead of the tags)
//                Qwen2.5, Qwen3, QwQ, Hermes; also the format of models
//                whose template has no tool support (SmolLM2): the tools
//                are then described to them in a system message
//                (tool_prompt.h);
//   llama3_json  {"name": ..., "parameters": {...}}, optionally after
//                <|python_tag|>, several separated by ";" (Llama 3.1-3.3);
//   deepseek_r1  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//                \n```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//                (DeepSeek-R1 and its distills' templates; in the Qwen
//                distills' vocabulary the markers are plain text).
#ifndef BEACON_ENGINE_TOOLS_TOOL_FORMAT_H_
#define BEACON_ENGINE_TOOLS_TOOL_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace beacon {

enum class ToolCallFormat : uint8_t { kHermes, kLlama3Json, kDeepSeekR1 };

// DeepSeek's markers (full-width bars and U+2581 in the names).
inline constexpr std::string_view kR1CallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kR1CallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kR1CallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kR1CallEnd = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kR1Sep = "<｜tool▁sep｜>";

// "hermes", "llama3_json", "deepseek_r1" (the --tool-call-parser values, vLLM's names).
std::string_view ToolCallFormatName(ToolCallFormat format);

// What a chat template does with tools. (Whether it wants a call's
// arguments as an object or a string is the template's own business:
// model/tokenizer/chat_template.h.)
struct ToolTemplateTraits {
  bool renders_tools = false;       // it lists `tools` to the model itself, in its format
  bool renders_tool_calls = false;  // it renders earlier calls (tool_calls) and tool results itself
};

struct ToolSyntax {
  ToolCallFormat format = ToolCallFormat::kHermes;
  ToolTemplateTraits traits;
};

// --tool-call-parser for a template: "auto" reads the template (its
// markers: <tool_call> hermes, tool▁call▁begin deepseek_r1, <|python_tag|>
// llama3_json; none of them: hermes, described in a system message); a
// name picks that format. INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<ToolSyntax> ResolveToolSyntax(std::string_view flag, std::string_view template_source);

// One call as the model writes it in `format` (`arguments` a JSON object's
// text): what the prompt's examples and the polyfilled history show.
std::string FormatToolCall(ToolCallFormat format, std::string_view name, std::string_view arguments);

// The text that starts a call in `format` ("<tool_call>", ...): the parser
// and the grammar's trigger.
std::string_view ToolCallStart(ToolCallFormat format);

}  // namespace beacon

#endif  // BEACON_ENGINE_TOOLS_TOOL_FORMAT_H_
