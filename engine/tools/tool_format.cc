#include "engine/tools/tool_format.h"

#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

bool Has(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

}  // namespace

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3Json: return "llama3_json";
    case ToolCallFormat::kDeepSeekR1: return "deepseek_r1";
  }
  return "unknown";
}

absl::StatusOr<ToolSyntax> ResolveToolSyntax(std::string_view flag, std::string_view source) {
  ToolSyntax s;
  // A template that names `tools` lists them itself (HF passes them as the
  // `tools` variable).
  s.traits.renders_tools = Has(source, "tools");
  s.traits.renders_tool_calls = Has(source, "tool_calls");
  if (flag == "auto") {
    if (Has(source, "<tool_call>")) {
      s.format = ToolCallFormat::kHermes;
    } else if (Has(source, "tool▁call▁begin")) {
      s.format = ToolCallFormat::kDeepSeekR1;
    } else if (Has(source, "<|python_tag|>") || (Has(source, "<|start_header_id|>") && Has(source, "\"parameters\""))) {
      s.format = ToolCallFormat::kLlama3Json;
    } else {
      s.format = ToolCallFormat::kHermes;
      // "tools" without a call format of its own lists nothing the parser reads.
      s.traits.renders_tools = false;
      s.traits.renders_tool_calls = false;
    }
    return s;
  }
  for (ToolCallFormat f : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kDeepSeekR1}) {
    if (flag == ToolCallFormatName(f)) {
      s.format = f;
      return s;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("--tool-call-parser: '", std::string(flag),
                                                 "' is not one of auto, hermes, llama3_json, deepseek_r1"));
}

std::string FormatToolCall(ToolCallFormat format, std::string_view name, std::string_view arguments) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return absl::StrCat("<tool_call>\n{\"name\": \"", std::string(name),
                          "\", \"arguments\": ", std::string(arguments), "}\n</tool_call>");
    case ToolCallFormat::kLlama3Json:
      return absl::StrCat("{\"name\": \"", std::string(name), "\", \"parameters\": ", std::string(arguments), "}");
    case ToolCallFormat::kDeepSeekR1:
      return absl::StrCat(std::string(kR1CallBegin), "function", std::string(kR1Sep), std::string(name), "\n```json\n",
                          std::string(arguments), "\n```", std::string(kR1CallEnd));
  }
  return "";
}

std::string_view ToolCallStart(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "<tool_call>";
    case ToolCallFormat::kLlama3Json: return "{\"name\"";
    case ToolCallFormat::kDeepSeekR1: return kR1CallsBegin;
  }
  return "";
}

}  // namespace beacon
