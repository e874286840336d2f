#include "engine/tools/tool_grammar.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace beacon {
namespace {

using nlohmann::json;

// The ```json fence hermes calls are also parsed from (tool_parser.h): the
// text of a call written that way, `arguments` a placeholder.
std::string FencedCall(std::string_view name, std::string_view arguments) {
  return absl::StrCat("```json\n{\"name\": \"", std::string(name), "\", \"arguments\": ", std::string(arguments),
                      "}\n```");
}

// One tool's tag: what precedes its arguments, the arguments' schema, what
// follows them (FormatToolCall's text around the arguments, or the fence's).
json ToolTag(ToolCallFormat format, const ToolDefinition& t, bool fenced = false) {
  json schema = json::parse(t.parameters, nullptr, /*allow_exceptions=*/false);
  if (!schema.is_object() || schema.empty()) schema = json{{"type", "object"}};
  const std::string marker = "\x01";  // never in a name: FormatToolCall's arguments placeholder
  const std::string call = fenced ? FencedCall(t.name, marker) : FormatToolCall(format, t.name, marker);
  const size_t at = call.find(marker);
  return json{{"type", "tag"},
              {"begin", call.substr(0, at)},
              // One whitespace character at most between tokens of the
              // arguments: unbounded runs are where small models loop.
              {"content", json{{"type", "json_schema"}, {"json_schema", schema}, {"max_whitespace_cnt", 1}}},
              {"end", call.substr(at + marker.size())}};
}

std::string_view Separator(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "\n";
    case ToolCallFormat::kLlama3Json: return "; ";
    case ToolCallFormat::kDeepSeekR1: return "\n";
  }
  return "\n";
}

}  // namespace

std::optional<GrammarSpec> ToolGrammar(ToolCallFormat format, const ToolRequest& tools) {
  const ToolChoice::Mode mode = tools.choice.mode;
  const bool forced = mode == ToolChoice::Mode::kRequired || mode == ToolChoice::Mode::kNamed;
  if (!tools.active() || (!forced && !tools.constrain_auto)) return std::nullopt;
  json tags = json::array();
  for (const ToolDefinition& t : tools.tools) {
    if (mode == ToolChoice::Mode::kNamed && t.name != tools.choice.name) continue;
    tags.push_back(ToolTag(format, t));
  }
  const bool one = mode == ToolChoice::Mode::kNamed || !tools.parallel;
  json body;
  if (forced) {
    body = json{{"type", "tags_with_separator"},
                {"tags", tags},
                {"separator", std::string(Separator(format))},
                {"at_least_one", true},
                {"stop_after_first", one}};
  } else {
    // The trigger: the start every tool's call shares.
    std::string trigger = format == ToolCallFormat::kLlama3Json ? "{\"name\": \"" : std::string(ToolCallStart(format));
    if (format == ToolCallFormat::kDeepSeekR1) trigger = std::string(kR1CallBegin);
    json triggers = json::array({trigger});
    if (format == ToolCallFormat::kHermes) {
      // The fence the parser also takes: under the grammar, a ```json fence
      // is a call too (Qwen2.5-Coder writes its calls so; with only the tags
      // as trigger its calls would never be constrained).
      triggers.push_back("```json");
      for (const ToolDefinition& t : tools.tools) tags.push_back(ToolTag(format, t, /*fenced=*/true));
    }
    body = json{{"type", "triggered_tags"},
                {"triggers", triggers},
                {"tags", tags},
                {"at_least_one", false},
                {"stop_after_first", one}};
  }
  GrammarSpec spec;
  spec.kind = GrammarKind::kStructuralTag;
  spec.source = json{{"type", "structural_tag"}, {"format", body}}.dump();
  spec.field = mode == ToolChoice::Mode::kAuto ? "tools" : "tool_choice";
  return spec;
}

}  // namespace beacon
