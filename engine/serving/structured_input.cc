#include "engine/serving/structured_input.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/tools/tool_grammar.h"

namespace beacon {
namespace {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

}  // namespace

absl::StatusOr<ToolChat> ChatForTemplate(const ServeRequest& r, const ServeLimits& limits) {
  if (!r.tools.tools.empty()) {
    if (absl::Status s = r.tools.Validate(limits.tool_limits); !s.ok()) return s;
    if (r.chat_template_kwargs.is_object() && r.chat_template_kwargs.contains("tools")) {
      return Invalid("chat_template_kwargs", "'tools' is set from the request's tools; it cannot be passed here too");
    }
  } else if (r.tools.choice.mode == ToolChoice::Mode::kRequired || r.tools.choice.mode == ToolChoice::Mode::kNamed) {
    return Invalid("tool_choice", "needs tools to choose from");
  }
  return ToolChatInput(r.messages, r.chat_template_kwargs, r.tools, limits.tool_syntax);
}

absl::Status PrepareStructured(const ServeRequest& r, const ServeLimits& limits, PreparedRequest* p) {
  const bool chat = r.input == ServeRequest::Input::kChat;
  if (!r.tools.tools.empty() && !chat) return Invalid("tools", "apply to chat input only");
  std::optional<GrammarSpec> spec = r.structured;
  if (r.tools.active()) {
    std::optional<GrammarSpec> forced = ToolGrammar(limits.tool_syntax.format, r.tools);
    const bool must_call =
        r.tools.choice.mode == ToolChoice::Mode::kRequired || r.tools.choice.mode == ToolChoice::Mode::kNamed;
    if (must_call && spec.has_value()) {
      return Invalid("tool_choice", "a required or named tool call cannot also follow response_format: use one");
    }
    // A structured answer wins over a constrained auto: the call grammar
    // would let through text the response format forbids.
    if (!spec.has_value() && forced.has_value()) {
      // The calls are constrained: a strict function's parameters must be
      // enforced as written, or the request is refused naming them.
      for (size_t i = 0; i < r.tools.tools.size() && limits.grammars != nullptr; ++i) {
        const ToolDefinition& t = r.tools.tools[i];
        if (!t.strict) continue;
        GrammarSpec params;
        params.kind = GrammarKind::kJsonSchema;
        params.source = t.parameters;
        params.field = absl::StrCat("tools[", i, "].function.parameters");
        if (absl::Status s = limits.grammars->CheckEnforced(params); !s.ok()) return s;
      }
      spec = std::move(forced);
    }
    p->tool_format = limits.tool_syntax.format;
    for (const ToolDefinition& t : r.tools.tools) p->tool_names.push_back(t.name);
  }
  if (!spec.has_value()) return absl::OkStatus();
  if (limits.grammars == nullptr) {
    return Invalid(spec->field.empty() ? "response_format" : spec->field,
                   "structured output is off on this server (--grammar-threads 0)");
  }
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> g = limits.grammars->Compile(*spec);
  if (!g.ok()) return g.status();
  p->options.grammar = *std::move(g);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ReasoningBudget(const ServeRequest& r, const ServeLimits& limits) {
  if (r.max_reasoning_tokens.has_value()) return *r.max_reasoning_tokens;
  if (r.reasoning_effort.empty()) return 0;
  const auto& budgets = limits.reasoning_effort_tokens;
  int64_t budget = -1;
  if (r.reasoning_effort == "low") budget = budgets[0];
  if (r.reasoning_effort == "medium") budget = budgets[1];
  if (r.reasoning_effort == "high") budget = budgets[2];
  if (budget < 0) {
    return Invalid("reasoning_effort", absl::StrCat("'", Excerpt(r.reasoning_effort), "' is not low, medium or high"));
  }
  if (!limits.reasoning.enabled() || r.input != ServeRequest::Input::kChat) return 0;
  return budget;
}

}  // namespace beacon
