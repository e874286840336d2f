#include "engine/reasoning.h"

#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

constexpr char kOpen[] = "<think>";
constexpr char kClose[] = "</think>";

}  // namespace

std::string_view ReasoningParserName(ReasoningParser parser) {
  switch (parser) {
    case ReasoningParser::kNone: return "none";
    case ReasoningParser::kDeepSeekR1: return "deepseek_r1";
    case ReasoningParser::kQwen3: return "qwen3";
  }
  return "none";
}

absl::StatusOr<ReasoningSyntax> ResolveReasoningParser(std::string_view flag, const Tokenizer& tokenizer) {
  ReasoningSyntax s;
  if (flag == "none") return s;
  const bool is_auto = flag == "auto";
  if (!is_auto && flag != "deepseek_r1" && flag != "qwen3") {
    return absl::InvalidArgumentError(
        absl::StrCat("--reasoning-parser: '", std::string(flag), "' is not one of auto, none, deepseek_r1, qwen3"));
  }
  s.open_id = tokenizer.TokenId(kOpen);
  s.close_id = tokenizer.TokenId(kClose);
  const bool has_markers = s.open_id >= 0 && s.close_id >= 0;
  const std::string_view source = tokenizer.chat_template_source();
  if (is_auto) {
    const bool writes_markers =
        source.find(kOpen) != std::string_view::npos || source.find(kClose) != std::string_view::npos;
    if (!has_markers || !writes_markers) return ReasoningSyntax();
    s.parser = source.find("enable_thinking") != std::string_view::npos ? ReasoningParser::kQwen3
                                                                        : ReasoningParser::kDeepSeekR1;
    return s;
  }
  if (!has_markers) {
    return absl::InvalidArgumentError(absl::StrCat("--reasoning-parser ", std::string(flag),
                                                   ": the vocabulary has no single '<think>' and '</think>' tokens "
                                                   "(use none, or auto)"));
  }
  s.parser = flag == "qwen3" ? ReasoningParser::kQwen3 : ReasoningParser::kDeepSeekR1;
  return s;
}

ReasoningOptions ReasoningFor(const ReasoningSyntax& syntax, std::string_view generation_prompt,
                              int32_t max_reasoning_tokens) {
  ReasoningOptions o;
  o.syntax = syntax;
  o.max_reasoning_tokens = max_reasoning_tokens;
  if (!syntax.enabled()) return o;
  const size_t open = generation_prompt.rfind(kOpen);
  const size_t close = generation_prompt.rfind(kClose);
  if (open != std::string_view::npos && (close == std::string_view::npos || open > close)) {
    o.starts_inside = true;  // the prompt opened the block: the model continues inside it
  } else if (close != std::string_view::npos) {
    o.starts_inside = false;  // the prompt closed it (Qwen3 with enable_thinking=false)
  } else {
    o.starts_inside = syntax.parser == ReasoningParser::kDeepSeekR1;
  }
  return o;
}

ReasoningTracker::ReasoningTracker(const ReasoningOptions& options)
    : options_(options), inside_(options.syntax.enabled() && options.starts_inside) {}

ReasoningTracker::Step ReasoningTracker::Observe(int32_t id) {
  Step step;
  if (!options_.syntax.enabled()) return step;
  if (inside_) {
    ++reasoning_tokens_;
    step.part = TextPart::kReasoning;
    if (id == options_.syntax.close_id) {
      step.marker = true;
      step.closed = true;
      inside_ = false;
    } else if (id == options_.syntax.open_id && reasoning_tokens_ == 1) {
      step.marker = true;  // the model opens the block the parser assumed open
    }
    return step;
  }
  if (id == options_.syntax.open_id && !answered_ && reasoning_tokens_ == 0) {
    // The model opens its block before any answer text.
    ++reasoning_tokens_;
    inside_ = true;
    step.part = TextPart::kReasoning;
    step.marker = true;
    return step;
  }
  answered_ = true;
  return step;
}

}  // namespace beacon
