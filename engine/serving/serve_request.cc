#include "engine/serving/serve_request.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/serving/structured_input.h"
#include "kv/policy/eviction_schedule.h"
#include "kv/policy/policy_bytes.h"
#include "kv/policy/sequence_compressor.h"
#include "kv/serving/prefix_cache.h"
#include "model/tokenizer/unicode.h"
#include "openssl/sha.h"
#include "util/utf8.h"

namespace beacon {
namespace {

absl::Status Invalid(std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", std::string(what)));
}

absl::Status CheckUtf8(std::string_view field, std::string_view s) {
  if (IsValidUtf8(s)) return absl::OkStatus();
  return Invalid(field, "is not valid UTF-8");
}

// A request_id is echoed in every response message and written to logs, so
// it must not carry line breaks, NULs or terminal escapes: printable UTF-8
// only (C0 controls, DEL and the C1 controls U+0080..U+009F are refused).
absl::Status CheckRequestId(std::string_view id, int32_t max_bytes) {
  if (static_cast<int64_t>(id.size()) > max_bytes) {
    return Invalid("request_id", absl::StrCat("is ", id.size(), " bytes; at most ", max_bytes));
  }
  if (absl::Status s = CheckUtf8("request_id", id); !s.ok()) return s;
  for (size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    uint32_t control = 0x100;  // none
    if (c < 0x20 || c == 0x7f) control = c;
    // Valid UTF-8 (checked above): U+0080..U+009F is C2 80..C2 9F.
    if (c == 0xC2 && i + 1 < id.size() && static_cast<unsigned char>(id[i + 1]) <= 0x9F) {
      control = static_cast<unsigned char>(id[i + 1]);
    }
    if (control != 0x100) {
      return Invalid("request_id", absl::StrFormat("has the control character U+%04X at byte %d; only printable "
                                                   "characters are allowed",
                                                   control, i));
    }
  }
  return absl::OkStatus();
}

// How an integer field is shown in an error: as the client sent it.
std::string Shown(const ServeRequest& r, std::string_view field, int64_t value) {
  auto it = r.oversized_ints.find(field);
  return it != r.oversized_ints.end() ? it->second : absl::StrCat(value);
}

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

// The request's reasoning split; `rendered` is the chat prompt's text
// (TokenizeChecked has validated and rendered the chat).
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

// TokenizeInput, also handing back a chat input's rendered text.
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

// The prefix-cache partition of the request's (cache_salt, tenant).
// kv_budget_bytes as a slot budget for the request's policy: the slots that
// remain after the policy's own state (kv/policy/policy_bytes.h). The result still
// goes through ResolveRequestKvOptions's range check, and what it refuses
// names kv_budget_bytes here.
absl::StatusOr<int32_t> BudgetFromBytes(const ServeRequest& r, const ServeLimits& limits) {
  if (r.kv_budget.has_value()) return Invalid("kv_budget_bytes", "is given with kv_budget; give one of them");
  if (limits.kv_row_bytes <= 0) return Invalid("kv_budget_bytes", "is not taken by this server");
  absl::StatusOr<KvPolicyOptions> policy =
      ResolveRequestKvOptions(limits.kv_default, limits.kv_limits, r.kv_policy, std::nullopt);
  if (!policy.ok()) return policy.status();
  if (!policy->compresses()) return Invalid("kv_budget_bytes", "needs a compressing kv_policy (full keeps everything)");
  absl::StatusOr<int32_t> slots =
      BudgetForBytes(*policy, limits.kv_model, limits.kv_row_bytes, *r.kv_budget_bytes, limits.kv_limits.min_budget);
  if (!slots.ok()) return slots.status();  // names kv_budget_bytes, the state and the bytes needed
  if (*slots > limits.kv_limits.max_budget) {
    return Invalid("kv_budget_bytes",
                   absl::StrCat(*r.kv_budget_bytes, " bytes give ", *slots,
                                " slots, past the server's kv_budget maximum ", limits.kv_limits.max_budget));
  }
  return *slots;
}

absl::StatusOr<uint64_t> CachePartition(const ServeRequest& r, const ServeLimits& limits) {
  if (!r.cache_salt.has_value() && r.tenant == 0) return kSharedPartition;
  uint64_t salt_hash = 0;
  if (r.cache_salt.has_value()) {
    if (r.cache_salt->empty()) return Invalid("cache_salt", "is empty (leave it out to share the prefix cache)");
    if (static_cast<int64_t>(r.cache_salt->size()) > limits.max_cache_salt_bytes) {
      return Invalid("cache_salt",
                     absl::StrCat("is ", r.cache_salt->size(), " bytes; at most ", limits.max_cache_salt_bytes));
    }
    if (static_cast<int64_t>(r.cache_salt->size()) < limits.min_cache_salt_bytes) {
      return Invalid("cache_salt",
                     absl::StrCat("is ", r.cache_salt->size(), " bytes; at least ", limits.min_cache_salt_bytes,
                                  " (a secret another tenant cannot guess)"));
    }
    salt_hash = CacheSaltDigest(*r.cache_salt);
  }
  // The presence bit keeps "no salt" apart from a salt that hashes to 0.
  const uint64_t parts[] = {r.tenant, r.cache_salt.has_value() ? 1u : 0u, salt_hash};
  const uint64_t partition = PrefixCacheSalt(parts);
  return partition == kSharedPartition ? 1 : partition;
}

}  // namespace

uint64_t CacheSaltDigest(std::string_view salt) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(salt.data()), salt.size(), digest);
  uint64_t out = 0;
  for (int i = 0; i < 8; ++i) out = (out << 8) | digest[i];
  return out;
}

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

absl::StatusOr<PreparedRequest> PrepareRequest(const ServeRequest& r, const Tokenizer& tokenizer,
                                               const ServeLimits& limits) {
  PreparedRequest p;
  p.request_id = r.request_id;
  if (absl::Status s = CheckRequestId(r.request_id, limits.max_request_id_bytes); !s.ok()) return s;

  // Counts first, before any work proportional to them.
  if (r.input == ServeRequest::Input::kTokens && static_cast<int64_t>(r.token_ids.size()) >= limits.context_length) {
    return Invalid("prompt", absl::StrCat("is ", r.token_ids.size(), " tokens; the model's context is ",
                                          limits.context_length, " tokens and generation needs at least one more"));
  }
  if (static_cast<int64_t>(r.stop.size()) > limits.max_stop_strings) {
    return Invalid("stop", absl::StrCat("has ", r.stop.size(), " strings; at most ", limits.max_stop_strings));
  }
  if (static_cast<int64_t>(r.stop_token_ids.size()) > limits.max_stop_token_ids) {
    return Invalid("stop_token_ids",
                   absl::StrCat("has ", r.stop_token_ids.size(), " ids; at most ", limits.max_stop_token_ids));
  }
  if (static_cast<int64_t>(r.sampling.logit_bias.size()) > limits.max_logit_bias) {
    return Invalid("logit_bias",
                   absl::StrCat("has ", r.sampling.logit_bias.size(), " entries; at most ", limits.max_logit_bias));
  }
  if (r.n < 1 || r.n > limits.max_n) {
    return Invalid("n", absl::StrCat(Shown(r, "n", r.n), " is outside [1, ", limits.max_n, "]"));
  }
  for (const auto& [field, n] : {std::pair{"logprobs", r.logprobs}, std::pair{"prompt_logprobs", r.prompt_logprobs}}) {
    if (n < -1 || n > limits.max_logprobs) {
      return Invalid(field, absl::StrCat(Shown(r, field, n), " is outside [0, ", limits.max_logprobs,
                                         "] (the most alternatives this server reports)"));
    }
  }

  std::string rendered;  // a chat's prompt text, which the reasoning split reads too
  absl::StatusOr<std::vector<int32_t>> prompt = TokenizeChecked(r, tokenizer, limits, &rendered);
  if (!prompt.ok()) return prompt.status();
  p.prompt = std::move(*prompt);
  const int32_t n_prompt = static_cast<int32_t>(p.prompt.size());
  if (n_prompt >= limits.context_length) {
    return Invalid("prompt", absl::StrCat("is ", n_prompt, " tokens; the model's context is ", limits.context_length,
                                          " tokens and generation needs at least one more"));
  }

  const int32_t limit = limits.max_tokens_limit > 0 ? limits.max_tokens_limit : limits.context_length;
  const int64_t requested = r.max_tokens == 0 ? limits.default_max_tokens : r.max_tokens;
  if (requested < 1 || requested > limit) {
    return Invalid("max_tokens", absl::StrCat(Shown(r, "max_tokens", r.max_tokens), " is outside [1, ", limit,
                                              "] (0 = the default, ", limits.default_max_tokens, ")"));
  }
  // Generation ends with `length` when the context fills; the footprint
  // never counts past it.
  const int32_t max_tokens = std::min(static_cast<int32_t>(requested), limits.context_length - n_prompt);
  if (r.min_tokens < 0 || r.min_tokens > requested) {
    return Invalid("min_tokens",
                   absl::StrCat(Shown(r, "min_tokens", r.min_tokens), " is outside [0, max_tokens = ", requested, "]"));
  }

  for (size_t i = 0; i < r.stop.size(); ++i) {
    const std::string field = absl::StrCat("stop[", i, "]");
    if (r.stop[i].empty()) return Invalid(field, "is empty");
    if (static_cast<int64_t>(r.stop[i].size()) > limits.max_stop_string_bytes) {
      return Invalid(field, absl::StrCat("is ", r.stop[i].size(), " bytes; at most ", limits.max_stop_string_bytes));
    }
    if (absl::Status s = CheckUtf8(field, r.stop[i]); !s.ok()) return s;
  }

  // ResolveRequestKvOptions checks the budget against the server's range
  // but takes 32 bits: a wider budget is outside that range whatever it is,
  // and is reported here the same way, as sent.
  std::optional<int32_t> budget;
  if (r.kv_budget.has_value()) {
    if (*r.kv_budget < std::numeric_limits<int32_t>::min() || *r.kv_budget > std::numeric_limits<int32_t>::max()) {
      return Invalid("kv_budget", absl::StrCat(Shown(r, "kv_budget", *r.kv_budget), " is outside the server's range [",
                                               limits.kv_limits.min_budget, ", ", limits.kv_limits.max_budget, "]"));
    }
    budget = static_cast<int32_t>(*r.kv_budget);
  }
  if (r.kv_budget_bytes.has_value()) {
    absl::StatusOr<int32_t> from_bytes = BudgetFromBytes(r, limits);
    if (!from_bytes.ok()) return from_bytes.status();
    budget = *from_bytes;
  }
  absl::StatusOr<KvPolicyOptions> kv =
      ResolveRequestKvOptions(limits.kv_default, limits.kv_limits, r.kv_policy, budget);
  if (!kv.ok()) return kv.status();

  p.options.sampling = r.sampling;
  p.options.sampling.temperature = r.temperature.value_or(limits.defaults.temperature);
  p.options.sampling.top_p = r.top_p.value_or(limits.defaults.top_p);
  p.options.sampling.top_k = r.top_k.value_or(limits.defaults.top_k);
  p.options.sampling.min_p = r.min_p.value_or(limits.defaults.min_p);
  p.options.sampling.repetition_penalty = r.repetition_penalty.value_or(limits.defaults.repetition_penalty);
  p.options.max_tokens = max_tokens;
  // The context may cut generation short of min_tokens: it ends at the
  // context's end (length) either way.
  p.options.min_tokens = static_cast<int32_t>(std::min<int64_t>(r.min_tokens, max_tokens));
  p.options.ignore_eos = r.ignore_eos;
  p.options.stop = r.stop;
  p.options.stop_token_ids = r.stop_token_ids;
  p.options.include_stop_str_in_output = r.include_stop_str_in_output;
  p.options.skip_special_tokens = r.skip_special_tokens;
  p.options.logprobs = static_cast<int32_t>(r.logprobs);
  p.options.prompt_logprobs = static_cast<int32_t>(r.prompt_logprobs);
  p.options.logprobs_mode = limits.logprobs_mode;
  p.options.kv = *kv;
  absl::StatusOr<ReasoningOptions> reasoning = ResolveReasoning(r, tokenizer, limits, rendered);
  if (!reasoning.ok()) return reasoning.status();
  p.options.reasoning = *reasoning;
  // Last of the checks: compiling a grammar is the costliest of them.
  if (absl::Status s = PrepareStructured(r, limits, &p); !s.ok()) return s;
  // Sampling ranges and stop token ids (names the field).
  if (absl::Status s = p.options.Validate(tokenizer.vocab_size()); !s.ok()) return s;

  absl::StatusOr<uint64_t> partition = CachePartition(r, limits);
  if (!partition.ok()) return partition.status();
  p.cache_partition = *partition;
  p.report_cached_tokens = limits.enable_prompt_tokens_details || p.cache_partition != kSharedPartition;

  p.samples = static_cast<int32_t>(r.n);
  // Samples draw with seed + i: the seed is fixed here so that all share it.
  if (p.samples > 1 && !p.options.sampling.seed.has_value()) {
    p.options.sampling.seed = RandomSeed();
  }
  // The phase moves only the first eviction, never the peak.
  p.spread_eviction_phase = limits.spread_eviction_phase && p.options.kv.compresses();
  if (p.spread_eviction_phase) {
    p.options.kv.eviction_phase = EvictionSchedule::SpreadPhase(p.prompt, 0, p.samples, p.options.kv.interval);
  }
  p.peak_slots = static_cast<int32_t>(
      std::min<int64_t>(SequenceCompressor::PeakSlots(p.options.kv, n_prompt, max_tokens), limits.context_length));
  p.arrival = r.arrival;
  p.deadline = r.deadline;
  if (r.time_limit_ms > 0) {
    p.deadline = std::min(p.deadline, r.arrival + std::chrono::milliseconds(r.time_limit_ms));
  }
  return p;
}

std::vector<PreparedRequest> ExpandSamples(const PreparedRequest& request) {
  std::vector<PreparedRequest> out(static_cast<size_t>(std::max(1, request.samples)), request);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].sample_index = static_cast<int32_t>(i);
    if (i > 0) out[i].options.sampling.seed = *request.options.sampling.seed + i;  // wraps like uint64
    if (request.spread_eviction_phase) {
      out[i].options.kv.eviction_phase = EvictionSchedule::SpreadPhase(request.prompt, static_cast<int32_t>(i),
                                                                       request.samples, request.options.kv.interval);
    }
  }
  return out;
}

std::string FieldOf(const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon == std::string::npos || colon == 0) return "";
  const std::string head = message.substr(0, colon);
  if (!absl::ascii_isalpha(static_cast<unsigned char>(head[0])) && head[0] != '_') return "";
  for (char c : head) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '[' && c != ']' &&
        c != '"') {
      return "";
    }
  }
  return head;
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
