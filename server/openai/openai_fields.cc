#include "server/openai/openai_fields.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "server/http/json_fields.h"
#include "util/utf8.h"

namespace beacon {
namespace {

using nlohmann::json;

constexpr OpenAiField kFields[] = {
    {"model", OpenAiField::kBoth},
    {"prompt", OpenAiField::kCompletions},
    {"messages", OpenAiField::kChat},
    {"max_tokens", OpenAiField::kBoth},
    {"max_completion_tokens", OpenAiField::kBoth},
    {"temperature", OpenAiField::kBoth},
    {"top_p", OpenAiField::kBoth},
    {"n", OpenAiField::kBoth},
    {"stream", OpenAiField::kBoth},
    {"stream_options", OpenAiField::kBoth},
    {"stop", OpenAiField::kBoth},
    {"presence_penalty", OpenAiField::kBoth},
    {"frequency_penalty", OpenAiField::kBoth},
    {"logit_bias", OpenAiField::kBoth},
    {"seed", OpenAiField::kBoth},
    {"user", OpenAiField::kBoth},
    {"logprobs", OpenAiField::kBoth},
    {"top_logprobs", OpenAiField::kChat},
    {"echo", OpenAiField::kCompletions},
    {"best_of", OpenAiField::kCompletions},
    // Accepted at their do-nothing values only (RefuseUnsupported).
    {"suffix", OpenAiField::kCompletions, true},
    {"modalities", OpenAiField::kChat, true},
    {"audio", OpenAiField::kChat, true},
    {"prediction", OpenAiField::kChat, true},
    {"store", OpenAiField::kChat, true},
    {"metadata", OpenAiField::kChat, true},
    {"service_tier", OpenAiField::kBoth, true},
    {"web_search_options", OpenAiField::kChat, true},
    // Structured output and tool calling (openai_structured.h).
    {"response_format", OpenAiField::kChat},
    {"tools", OpenAiField::kChat},
    {"tool_choice", OpenAiField::kChat},
    {"parallel_tool_calls", OpenAiField::kChat},
    {"functions", OpenAiField::kChat},
    {"function_call", OpenAiField::kChat},
    {"reasoning_effort", OpenAiField::kChat},
    {"structured_outputs", OpenAiField::kBoth},    // vLLM's
    {"constrain_tool_calls", OpenAiField::kChat},  // this server's
    // vLLM's extensions.
    {"top_k", OpenAiField::kBoth},
    {"min_p", OpenAiField::kBoth},
    {"repetition_penalty", OpenAiField::kBoth},
    {"min_tokens", OpenAiField::kBoth},
    {"ignore_eos", OpenAiField::kBoth},
    {"stop_token_ids", OpenAiField::kBoth},
    {"skip_special_tokens", OpenAiField::kBoth},
    {"include_stop_str_in_output", OpenAiField::kBoth},
    {"prompt_logprobs", OpenAiField::kBoth},
    {"return_tokens_as_token_ids", OpenAiField::kBoth},
    {"add_generation_prompt", OpenAiField::kChat},
    {"chat_template_kwargs", OpenAiField::kChat},
    {"request_id", OpenAiField::kBoth},
    // This server's.
    {"kv_policy", OpenAiField::kBoth},
    {"kv_budget", OpenAiField::kBoth},
    {"kv_budget_bytes", OpenAiField::kBoth},
    {"cache_salt", OpenAiField::kBoth},
    {"time_limit_ms", OpenAiField::kBoth},
    {"max_reasoning_tokens", OpenAiField::kChat},
};

absl::Status CheckKnown(const json& j, OpenAiEndpoint endpoint) {
  const bool chat = endpoint == OpenAiEndpoint::kChatCompletions;
  for (const auto& [key, value] : j.items()) {
    const OpenAiField* rule = nullptr;
    for (const OpenAiField& r : kFields) {
      if (key == r.name) rule = &r;
    }
    if (rule == nullptr) {
      return FieldError(Excerpt(key), "unrecognized request argument (not a field of this API: check its spelling)");
    }
    // null is no value, as everywhere in these parsers.
    if (rule->where == (chat ? OpenAiField::kCompletions : OpenAiField::kChat) && !value.is_null()) {
      return FieldError(key, chat ? "is a /v1/completions field, not one of /v1/chat/completions"
                                  : "is a /v1/chat/completions field, not one of /v1/completions");
    }
  }
  return absl::OkStatus();
}

// True when `v` is absent, null, or `off` (the value that asks for nothing).
bool Off(const json& j, const char* field, const json& off) {
  auto it = j.find(field);
  return it == j.end() || it->is_null() || *it == off;
}

// Fields of OpenAI's schemas whose features this server does not
// implement: accepted only at the value that asks for nothing.
absl::Status RefuseUnsupported(const json& j) {
  if (!Off(j, "suffix", "")) return FieldError("suffix", "insertion (suffix) is not supported by this server");
  if (!Off(j, "modalities", json::array({"text"}))) return FieldError("modalities", "only [\"text\"] is supported");
  if (!Off(j, "audio", nullptr)) return FieldError("audio", "audio output is not supported");
  if (!Off(j, "prediction", nullptr)) return FieldError("prediction", "predicted outputs are not supported");
  if (!Off(j, "store", false)) return FieldError("store", "this server stores no completions: only false");
  if (!Off(j, "metadata", nullptr))
    return FieldError("metadata", "is stored with store, which this server does not do");
  if (auto it = j.find("service_tier"); it != j.end() && !it->is_null() && *it != "auto" && *it != "default") {
    return FieldError("service_tier", "this server has one tier: only \"auto\" or \"default\"");
  }
  if (!Off(j, "web_search_options", nullptr)) return FieldError("web_search_options", "web search is not supported");
  return absl::OkStatus();
}

}  // namespace

std::span<const OpenAiField> OpenAiFields() { return kFields; }

absl::Status CheckOpenAiFields(const json& body, OpenAiEndpoint endpoint) {
  if (absl::Status s = CheckKnown(body, endpoint); !s.ok()) return s;
  return RefuseUnsupported(body);
}

}  // namespace beacon
