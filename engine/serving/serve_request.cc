#include "engine/serving/serve_request.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/serving/request_input.h"
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

using request_input::CheckUtf8;
using request_input::Invalid;
using request_input::ResolveReasoning;
using request_input::Shown;
using request_input::TokenizeChecked;

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

}  // namespace beacon
