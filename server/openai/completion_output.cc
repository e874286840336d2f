#include "server/openai/completion_output.h"

#include <utility>

namespace beacon {
namespace {

using nlohmann::json;

// Calls in OpenAI's shape; streamed ones carry their index in the choice's list.
json CallsJson(const std::vector<ParsedToolCall>& calls, int first_index, bool stream) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", NewToolCallId()},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (stream) c["index"] = first_index + static_cast<int>(i);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

json OpenAiFinish(FinishReason f) {
  return f == FinishReason::kNone ? json(nullptr) : json(std::string(VllmFinishReason(f)));
}

json FinishWithCalls(FinishReason f, bool calls) {
  const bool natural = f == FinishReason::kEos || f == FinishReason::kStop || f == FinishReason::kStopSequence;
  return calls && natural ? json("tool_calls") : OpenAiFinish(f);
}

json Usage(int32_t prompt_tokens, int32_t completion_tokens, bool reasoning, int32_t reasoning_tokens,
           int32_t cached_tokens) {
  json u = {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}};
  if (cached_tokens >= 0) u["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
  if (reasoning) u["completion_tokens_details"] = {{"reasoning_tokens", reasoning_tokens}};
  return u;
}

CompletionOutput::CompletionOutput(const CompletionContext& c, const Tokenizer* tokenizer, int32_t index)
    : c_(c), tokenizer_(tokenizer), index_(index), completion_lp_(tokenizer, c.tokens_as_ids) {
  if (c.tool_format.has_value()) calls_.emplace(*c.tool_format, c.tool_names);
}

ParsedAnswer CompletionOutput::Answer(const std::string& text, bool final) {
  if (!calls_.has_value()) return ParsedAnswer{text, {}};
  ParsedAnswer p = calls_->Push(text);
  if (final) {
    ParsedAnswer rest = calls_->Finish();
    p.content += rest.content;
    for (ParsedToolCall& c : rest.calls) p.calls.push_back(std::move(c));
  }
  return p;
}

json CompletionOutput::CallsChoice(const std::vector<ParsedToolCall>& calls) {
  json choice = {{"index", index_},
                 {"delta", {{"tool_calls", CallsJson(calls, calls_sent_, true)}}},
                 {"logprobs", nullptr},
                 {"finish_reason", nullptr}};
  calls_sent_ += static_cast<int>(calls.size());
  return choice;
}

void CompletionOutput::Prompt(const CompletionEvent& e) {
  prompt_ids_ = e.ids;
  prompt_lp_ = e.logprobs;
  if (c_.echo && c_.logprobs) completion_lp_.AddPrompt(prompt_ids_, prompt_lp_);
}

json CompletionOutput::Envelope(bool chunk) const {
  return {{"id", c_.id},
          {"object", c_.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", c_.created},
          {"model", c_.model}};
}

json CompletionOutput::Logprobs(std::span<const PositionLogprobs> positions) {
  if (!c_.logprobs) return nullptr;
  if (c_.chat) return {{"content", ChatLogprobs(positions, *tokenizer_, c_.tokens_as_ids)}};
  completion_lp_.Add(positions);
  return completion_lp_.Take();
}

json CompletionOutput::PromptLogprobs() const { return PromptLogprobsJson(prompt_ids_, prompt_lp_, *tokenizer_); }

json CompletionOutput::ChunkChoice(const std::string& text, TextPart part, std::span<const PositionLogprobs> lp,
                                   const json& finish) {
  json choice = {{"index", index_}, {"finish_reason", finish}};
  if (c_.chat) {
    const char* field = part == TextPart::kReasoning ? "reasoning_content" : "content";
    choice["delta"] = text.empty() && !finish.is_null() ? json::object() : json{{field, text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = lp.empty() && !finish.is_null() ? json(nullptr) : Logprobs(lp);
  return choice;
}

json CompletionOutput::WholeChoice(const json& finish) {
  json choice = {{"index", index_}, {"finish_reason", finish}};
  if (c_.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
    if (c_.tool_format.has_value()) {
      ParsedAnswer p = ParseToolCalls(*c_.tool_format, text, c_.tool_names);
      if (!p.calls.empty()) {
        choice["message"]["content"] = p.content.empty() ? json(nullptr) : json(p.content);
        choice["message"]["tool_calls"] = CallsJson(p.calls, 0, false);
        choice["finish_reason"] = FinishWithCalls(final->reason, true);
      }
    }
    // vLLM's field: null when the model wrote no reasoning.
    if (c_.reasoning) choice["message"]["reasoning_content"] = reasoning.empty() ? json(nullptr) : json(reasoning);
  } else {
    choice["text"] = (c_.echo ? c_.echo_text : "") + text;
    if (c_.prompt_logprobs_field) choice["prompt_logprobs"] = PromptLogprobs();
  }
  choice["logprobs"] = Logprobs(lp);
  return choice;
}

json CompletionOutput::HeadChoice() {
  head_sent_ = true;
  if (c_.chat) {
    return {{"index", index_},
            {"delta", {{"role", "assistant"}, {"content", ""}}},
            {"logprobs", nullptr},
            {"finish_reason", nullptr}};
  }
  if (!c_.echo && !c_.prompt_logprobs_field) return nullptr;
  json choice = {{"index", index_}, {"text", c_.echo ? c_.echo_text : ""}, {"finish_reason", nullptr}};
  choice["logprobs"] = c_.echo ? Logprobs({}) : json(nullptr);
  if (c_.prompt_logprobs_field) choice["prompt_logprobs"] = PromptLogprobs();
  return choice;
}

}  // namespace beacon
