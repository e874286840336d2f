#include "engine/serving/request_input.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/serving/structured_input.h"
#include "model/tokenizer/unicode.h"
#include "util/utf8.h"

namespace beacon {
namespace request_input {
namespace {

// Template variables a client may not set: the server sets them from the
// request itself.
absl::Status CheckTemplateKwargs(const jinja::Json& kwargs) {
  if (kwargs.is_null()) return absl::OkStatus();
  if (!kwargs.is_object()) return Invalid("chat_template_kwargs", "must be an object");
  for (const char* reserved : {"messages", "add_generation_prompt", "bos_token", "eos_token"}) {
    if (kwargs.contains(reserved)) {
      return Invalid("chat_template_kwargs",
                     absl::StrCat("'", reserved, "' is set by the server from the request; it cannot be passed here"));
    }
  }
  return absl::OkStatus();
}

// What the generation prompt appends to the conversation: `rendered` (the
// prompt as tokenised, with it) less its longest common prefix with the
// rendering without it.
absl::StatusOr<std::string> GenerationPromptText(const ServeRequest& r, const Tokenizer& tokenizer,
                                                 const ServeLimits& limits, const std::string& rendered) {
  if (!r.add_generation_prompt) return std::string();
  absl::StatusOr<ToolChat> chat = ChatForTemplate(r, limits);
  if (!chat.ok()) return chat.status();
  absl::StatusOr<std::string> without = tokenizer.ApplyChatTemplate(chat->messages, false, chat->vars);
  if (!without.ok()) return without.status();
  const auto diverge = std::mismatch(rendered.begin(), rendered.end(), without->begin(), without->end()).first;
  return std::string(diverge, rendered.end());
}

}  // namespace

absl::Status Invalid(std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", std::string(what)));
}

absl::Status CheckUtf8(std::string_view field, std::string_view s) {
  if (IsValidUtf8(s)) return absl::OkStatus();
  return Invalid(field, "is not valid UTF-8");
}

std::string Shown(const ServeRequest& r, std::string_view field, int64_t value) {
  auto it = r.oversized_ints.find(field);
  return it != r.oversized_ints.end() ? it->second : absl::StrCat(value);
}

absl::StatusOr<ReasoningOptions> ResolveReasoning(const ServeRequest& r, const Tokenizer& tokenizer,
                                                  const ServeLimits& limits, const std::string& rendered) {
  absl::StatusOr<int64_t> budget = ReasoningBudget(r, limits);
  if (!budget.ok()) return budget.status();
  const int64_t max = *budget;
  if (max < 0 || max > std::numeric_limits<int32_t>::max()) {
    return Invalid("max_reasoning_tokens",
                   absl::StrCat(Shown(r, "max_reasoning_tokens", max), " is outside [0, 2147483647] (0 = no limit)"));
  }
  const bool chat = r.input == ServeRequest::Input::kChat;
  if (max > 0 && !chat) return Invalid("max_reasoning_tokens", "applies to chat input only");
  if (max > 0 && !limits.reasoning.enabled()) {
    return Invalid("max_reasoning_tokens",
                   "this server splits no reasoning (--reasoning-parser none, or the model has no <think> markers)");
  }
  if (!chat || !limits.reasoning.enabled()) return ReasoningOptions();
  absl::StatusOr<std::string> generation_prompt = GenerationPromptText(r, tokenizer, limits, rendered);
  if (!generation_prompt.ok()) return Invalid("messages", std::string(generation_prompt.status().message()));
  return ReasoningFor(limits.reasoning, *generation_prompt, static_cast<int32_t>(max));
}

absl::StatusOr<std::vector<int32_t>> TokenizeChecked(const ServeRequest& r, const Tokenizer& tokenizer,
                                                     const ServeLimits& limits, std::string* rendered_chat) {
  switch (r.input) {
    case ServeRequest::Input::kNone: return Invalid("input", "give one of text, chat messages or token ids");
    case ServeRequest::Input::kText: {
      if (r.text.empty()) return Invalid("text", "is empty");
      if (absl::Status s = CheckUtf8("text", r.text); !s.ok()) return s;
      return tokenizer.Encode(r.text, /*parse_special=*/false, /*add_bos=*/true);
    }
    case ServeRequest::Input::kChat: {
      if (r.messages.empty()) return Invalid("messages", "is empty");
      if (static_cast<int64_t>(r.messages.size()) > limits.max_messages) {
        return Invalid("messages", absl::StrCat("has ", r.messages.size(), " messages; at most ", limits.max_messages));
      }
      for (size_t i = 0; i < r.messages.size(); ++i) {
        const ChatMessage& m = r.messages[i];
        const std::string field = absl::StrCat("messages[", i, "]");
        if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool") {
          return Invalid(field + ".role",
                         absl::StrCat("'", Excerpt(m.role), "' is not one of system, user, assistant, tool"));
        }
        if (absl::Status s = CheckUtf8(field + ".content", m.content); !s.ok()) return s;
        for (size_t k = 0; k < m.tool_calls.size(); ++k) {
          const std::string f = absl::StrCat(field, ".tool_calls[", k, "].function");
          if (absl::Status s = CheckUtf8(f + ".name", m.tool_calls[k].name); !s.ok()) return s;
          if (absl::Status s = CheckUtf8(f + ".arguments", m.tool_calls[k].arguments); !s.ok()) return s;
        }
        if (m.reasoning_content.has_value()) {
          if (absl::Status s = CheckUtf8(field + ".reasoning_content", *m.reasoning_content); !s.ok()) return s;
        }
      }
      if (absl::Status s = CheckTemplateKwargs(r.chat_template_kwargs); !s.ok()) return s;
      absl::StatusOr<ToolChat> chat = ChatForTemplate(r, limits);
      if (!chat.ok()) return chat.status();
      absl::StatusOr<std::string> rendered =
          tokenizer.ApplyChatTemplate(chat->messages, r.add_generation_prompt, chat->vars);
      if (!rendered.ok()) return Invalid("messages", std::string(rendered.status().message()));
      *rendered_chat = *std::move(rendered);
      // The template's markers are special tokens; user content is parsed the
      // same way, as HF apply_chat_template + encode does.
      return tokenizer.Encode(*rendered_chat, /*parse_special=*/true, /*add_bos=*/true);
    }
    case ServeRequest::Input::kTokens: {
      if (r.token_ids.empty()) return Invalid("tokens", "is empty");
      for (size_t i = 0; i < r.token_ids.size(); ++i) {
        const int32_t id = r.token_ids[i];
        if (id < 0 || id >= tokenizer.vocab_size()) {
          return Invalid(absl::StrCat("tokens[", i, "]"),
                         absl::StrCat(id, " is outside the vocabulary [0, ", tokenizer.vocab_size(), ")"));
        }
      }
      return r.token_ids;
    }
  }
  return Invalid("input", "unknown kind");
}

}  // namespace request_input

using request_input::Invalid;
using request_input::TokenizeChecked;

int32_t TokenizeTokenLimit(const ServeLimits& limits) {
  if (limits.max_tokenize_tokens > 0) return limits.max_tokenize_tokens;
  return limits.context_length > 0 ? limits.context_length : 1 << 20;
}

absl::StatusOr<std::vector<int32_t>> TokenizeInput(const ServeRequest& r, const Tokenizer& tokenizer,
                                                   const ServeLimits& limits) {
  const int32_t limit = TokenizeTokenLimit(limits);
  const char* field = r.input == ServeRequest::Input::kChat     ? "messages"
                      : r.input == ServeRequest::Input::kTokens ? "tokens"
                                                                : "text";
  // Token ids given: counted before they are checked one by one.
  if (r.input == ServeRequest::Input::kTokens && static_cast<int64_t>(r.token_ids.size()) > limit) {
    return Invalid(field, absl::StrCat("has ", r.token_ids.size(), " token ids; at most ", limit));
  }
  std::string rendered;
  absl::StatusOr<std::vector<int32_t>> ids = TokenizeChecked(r, tokenizer, limits, &rendered);
  if (ids.ok() && static_cast<int64_t>(ids->size()) > limit) {
    return Invalid(field, absl::StrCat("makes ", ids->size(), " tokens; at most ", limit,
                                       " (the context length, or --max-tokenize-tokens)"));
  }
  return ids;
}

absl::StatusOr<std::string> DetokenizeIds(std::span<const int32_t> ids, const Tokenizer& tokenizer,
                                          bool skip_special_tokens, std::string_view field, const ServeLimits& limits) {
  const int32_t limit = TokenizeTokenLimit(limits);
  if (static_cast<int64_t>(ids.size()) > limit) {
    return Invalid(field, absl::StrCat("has ", ids.size(), " token ids; at most ", limit,
                                       " (the context length, or --max-tokenize-tokens)"));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= tokenizer.vocab_size()) {
      return Invalid(absl::StrCat(std::string(field), "[", i, "]"),
                     absl::StrCat(ids[i], " is outside the vocabulary [0, ", tokenizer.vocab_size(), ")"));
    }
  }
  // The text's size is known only from the tokens' bytes: summed before
  // anything is built, so a reply past the limit costs no allocation.
  int64_t bytes = 0;
  for (int32_t id : ids) bytes += static_cast<int64_t>(tokenizer.TokenBytes(id, !skip_special_tokens).size());
  if (bytes > limits.max_detokenize_bytes) {
    return Invalid(field, absl::StrCat("decode to ", bytes, " bytes of text; at most ", limits.max_detokenize_bytes,
                                       " (--max-detokenize-bytes)"));
  }
  return SanitizeUtf8(tokenizer.Decode(std::vector<int32_t>(ids.begin(), ids.end()), !skip_special_tokens));
}

}  // namespace beacon
