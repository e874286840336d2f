// A generation request independent of the wire protocol: the gRPC service
// (beacon.v1) and the OpenAI-compatible HTTP routes both fill a ServeRequest,
// and PrepareRequest validates and tokenises it into what the engine runs.
// Error messages name the request field, in the snake_case both APIs use.
//
// Thread ownership: PrepareRequest runs on front-end threads; it only reads
// the tokenizer (immutable) and the limits.
#ifndef BEACON_ENGINE_SERVING_SERVE_REQUEST_H_
#define BEACON_ENGINE_SERVING_SERVE_REQUEST_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/generation.h"
#include "engine/grammar/grammar_compiler.h"
#include "engine/grammar/grammar_spec.h"
#include "engine/reasoning.h"
#include "engine/tools/tool_format.h"
#include "engine/tools/tool_spec.h"
#include "kv/policy/kv_policy.h"
#include "kv/serving/kv_policy_limits.h"
#include "model/model_config.h"
#include "model/tokenizer/tokenizer.h"
#include "scheduler/request.h"
#include "util/utf8.h"

namespace beacon {

struct ServeRequest {
  std::string request_id;  // the client's; the server makes one when empty
  enum class Input { kNone, kText, kChat, kTokens } input = Input::kNone;
  std::string text;                   // kText: raw text, no template
  std::vector<ChatMessage> messages;  // kChat: rendered with the chat template
  bool add_generation_prompt = true;  // kChat
  // kChat: further template variables (a JSON object, or null), e.g.
  // {"enable_thinking": false}; the names the server sets itself
  // (messages, add_generation_prompt, bos_token, eos_token) are refused.
  jinja::Json chat_template_kwargs;
  std::vector<int32_t> token_ids;  // kTokens

  // Penalties, seed and logit_bias. Its temperature, top_p, top_k, min_p
  // and repetition_penalty are not read: those five are the optionals below.
  SamplingParams sampling;
  // Absent: the server's default (ServeLimits::defaults: the model's
  // generation config, else OpenAI's documented values).
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;  // 0: off
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  // 0: the server's default. 64-bit so that a value past the server's limit
  // reaches PrepareRequest's range check as sent (HTTP's JSON has no 32-bit
  // bound); the same for kv_budget.
  int64_t max_tokens = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int64_t min_tokens = 0;  // GenerationOptions::min_tokens; at most max_tokens
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  // Log probabilities: -1 none, else the alternatives per position
  // (GenerationOptions::logprobs / prompt_logprobs; at most
  // ServeLimits::max_logprobs).
  int64_t logprobs = -1;
  int64_t prompt_logprobs = -1;
  // Samples of the prompt (OpenAI's n): sample i draws with seed + i, so
  // each is what the request alone with that seed gives. 1 <= n <= max_n.
  int64_t n = 1;
  uint32_t time_limit_ms = 0;  // 0: none
  // kChat on a reasoning model: close the think block after this many
  // tokens (ReasoningOptions::max_reasoning_tokens); absent or 0: no limit.
  std::optional<int64_t> max_reasoning_tokens;
  // kChat: OpenAI's reasoning_effort, "low", "medium" or "high": the budget
  // ServeLimits::reasoning_effort_tokens gives it, unless
  // max_reasoning_tokens is set; empty: none (structured_input.h).
  std::string reasoning_effort;
  // Structured output (response_format, vLLM's structured_outputs, gRPC's
  // StructuredOutput): the answer, after any reasoning, matches this.
  std::optional<GrammarSpec> structured;
  // kChat: tools the model may call, and how (engine/tools/tool_spec.h).
  ToolRequest tools;
  std::optional<std::string> kv_policy;
  std::optional<int64_t> kv_budget;
  // The budget in bytes, KV slots and policy state together (kv/policy/policy_bytes.h); not with kv_budget.
  std::optional<int64_t> kv_budget_bytes;
  // Prefix-cache isolation (vLLM's cache_salt): a request takes cached prompt
  // blocks only from requests with the same salt and tenant, so another
  // tenant cannot tell from its time to first token whether this prompt was
  // sent. Absent with tenant 0: the partition every such request shares.
  // ServeLimits::min_cache_salt_bytes to max_cache_salt_bytes bytes; it
  // enters the partition as its SHA-256 (CacheSaltDigest), so neither a
  // salt's partition nor another salt of the same partition can be found
  // without the salt itself.
  std::optional<std::string> cache_salt;
  // Set by the front end, never read from the client: the tenant of the API
  // key the request came with under --prefix-cache-salt-per-key
  // (ApiKeys::Tenant), else 0.
  uint64_t tenant = 0;
  // Integer fields the client sent that do not fit int64 (JSON only), by
  // field name ("max_tokens", "kv_budget"), with the digits as sent: the
  // field itself then holds INT64_MAX (or INT64_MIN), outside every range,
  // and the range error shows these digits instead.
  std::map<std::string, std::string, std::less<>> oversized_ints;

  SchedClock::time_point arrival = SchedClock::now();
  // The transport's deadline (gRPC deadline); time_limit_ms tightens it.
  SchedClock::time_point deadline = SchedClock::time_point::max();
};

// The sampling a request gets for the fields it leaves out.
struct DefaultSampling {
  float temperature = 1.0f;  // OpenAI's documented default
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  // "openai", or the generation config that set them (engine/serving/generation_config.h).
  std::string source = "openai";
};

// What an operator allows (beacon-serve flags).
struct ServeLimits {
  int32_t context_length = 0;  // the model's
  int32_t default_max_tokens = 256;
  int32_t max_tokens_limit = 0;  // 0: the context length
  int32_t max_stop_strings = 16;
  int32_t max_stop_string_bytes = 256;
  // Bounds on the other client-sized fields, so that no request makes the
  // front end render, copy or echo an unbounded amount. The prompt's token
  // ids are bounded by the context length.
  int32_t max_request_id_bytes = 256;  // printable UTF-8 only: it is echoed and logged
  int32_t max_stop_token_ids = 64;
  int32_t max_messages = 4096;             // chat messages, checked before the template renders
  int32_t max_logit_bias = 1024;           // logit_bias entries
  int32_t max_logprobs = kMaxTopLogprobs;  // alternatives per position (--max-logprobs)
  int32_t max_n = 64;                      // samples per request (n)
  int32_t max_cache_salt_bytes = 256;      // cache_salt
  int32_t min_cache_salt_bytes = 8;        // cache_salt: shorter is a guessable secret
  // Tokenize / Detokenize (both APIs), whose replies grow with their input:
  // token ids given or made (0: the context length, which no prompt may
  // pass anyway), and bytes of text a Detokenize makes (a token can be 100+
  // bytes of spaces, so ids alone do not bound the reply).
  int32_t max_tokenize_tokens = 0;
  int64_t max_detokenize_bytes = int64_t{4} << 20;
  LogprobsMode logprobs_mode = LogprobsMode::kRaw;  // --logprobs-mode
  DefaultSampling defaults;                         // --generation-config
  KvPolicyOptions kv_default;                       // --kv-policy and its settings
  KvPolicyLimits kv_limits;
  // What kv_budget_bytes converts with (kv/policy/policy_bytes.h): the model's
  // shape and the bytes of one head's K row in the cache; row bytes 0: the
  // server takes no byte budgets.
  PolicyModelInfo kv_model;
  int64_t kv_row_bytes = 0;
  // --enable-prompt-tokens-details: report cached_tokens to every request.
  // Off, only requests in their own prefix-cache partition get it
  // (PreparedRequest::report_cached_tokens).
  bool enable_prompt_tokens_details = false;
  // --kv-eviction-phase spread: each compressing request gets its own
  // eviction phase (EvictionSchedule::SpreadPhase of its prompt and sample
  // index), so requests admitted together do not all evict on one step.
  // Off (aligned): every request evicts on the published schedule.
  bool spread_eviction_phase = true;
  // --reasoning-parser, resolved for the model: chat requests have their
  // reasoning split from the answer (engine/reasoning.h).
  ReasoningSyntax reasoning;
  // reasoning_effort low, medium, high: the thinking budgets they name
  // (--reasoning-effort-tokens).
  std::array<int64_t, 3> reasoning_effort_tokens = {1024, 4096, 16384};
  // Structured output and forced tool calls compile here; null: refused
  // (structured_input.h). Not owned: the server's, it outlives every request.
  GrammarCompiler* grammars = nullptr;
  // --tool-call-parser, resolved for the model's template, and the bounds
  // on the tools a request may bring.
  ToolSyntax tool_syntax;
  ToolLimits tool_limits;
};

// A validated request, ready for the engine thread.
struct PreparedRequest {
  std::string request_id;
  std::vector<int32_t> prompt;
  GenerationOptions options;  // max_tokens clamped to the context
  int32_t peak_slots = 0;     // admission footprint (EvictionSchedule::PeakSlots)
  SchedClock::time_point arrival;
  SchedClock::time_point deadline = SchedClock::time_point::max();  // none unless set
  // Sample i of n (ServeRequest::n): its seed is the request's + i. The
  // engine loop submits the n together (EngineLoop::SubmitGroup); sample 0
  // runs the prompt and the others share its prompt blocks.
  int32_t sample_index = 0;
  int32_t samples = 1;
  bool spread_eviction_phase = false;  // ServeLimits's: ExpandSamples gives each sample its phase
  RequestId group = 0;                 // set by EngineLoop::SubmitGroup: sample 0's id
  // The prefix-cache partition of (cache_salt, tenant): kSharedPartition
  // when both are absent (kv/serving/prefix_cache.h).
  uint64_t cache_partition = 0;
  // Whether the client is told its cached prompt tokens: with
  // --enable-prompt-tokens-details, or when cache_partition is its own. On
  // the shared partition the count is an oracle for other clients' recent
  // prompts (16-token-aligned prefixes), so it is withheld by default.
  bool report_cached_tokens = false;
  // Chat with tools offered (tool_choice not none): the answer is parsed for
  // calls in this format, of these functions (engine/tools/tool_parser.h).
  std::optional<ToolCallFormat> tool_format;
  std::vector<std::string> tool_names;
};

// INVALID_ARGUMENT naming the field (and the value or count, and the limit)
// for: a request_id too long, not UTF-8 or with control characters; no input
// or an empty one, invalid UTF-8, more chat messages than max_messages, chat
// messages with an unknown role, token ids outside the vocabulary, a prompt
// that leaves no room in the context, max_tokens out of range, sampling
// parameters out of range, stop strings empty/too many/too long, too many
// stop_token_ids, an unknown or disallowed kv_policy, a kv_budget out of
// bounds, chat_template_kwargs that are not an object or name a variable the
// server sets, max_reasoning_tokens negative, on non-chat input or without a
// reasoning parser. A template that refuses the conversation is
// INVALID_ARGUMENT "messages: <the template's message>". Bounds on sizes are
// checked before any work proportional to them.
absl::StatusOr<PreparedRequest> PrepareRequest(const ServeRequest& request, const Tokenizer& tokenizer,
                                               const ServeLimits& limits);

// The `samples` requests of a prepared one: copies with sample_index i and
// seed + i (the seed drawn by PrepareRequest when the request gave none),
// and, when the phase is spread, sample i's eviction phase.
std::vector<PreparedRequest> ExpandSamples(const PreparedRequest& request);

// The token ids of a text or chat input, as PrepareRequest would make them,
// for the Tokenize RPC and /tokenize. Of `limits`, max_messages and
// TokenizeTokenLimit: INVALID_ARGUMENT naming the input (text, messages,
// tokens) when it makes more tokens than that.
absl::StatusOr<std::vector<int32_t>> TokenizeInput(const ServeRequest& request, const Tokenizer& tokenizer,
                                                   const ServeLimits& limits = ServeLimits());

// The most token ids a Tokenize or Detokenize takes or makes:
// max_tokenize_tokens, else the context length (else 2^20).
int32_t TokenizeTokenLimit(const ServeLimits& limits);

// The first 8 bytes of SHA-256(salt), big-endian: what a cache_salt adds to
// its prefix-cache partition (vLLM hashes the salt into the first block's
// SHA-256 block hash).
uint64_t CacheSaltDigest(std::string_view salt);

// The request field an error message of this server names: its text
// before ": " when that is a field path (letters, digits, _ . [ ] and
// quotes, starting with a letter or _), else "". Both APIs report it
// (OpenAI's `param`, gRPC's BadRequest field violation).
std::string FieldOf(const std::string& message);

// The text of token ids (Detokenize, /detokenize): special tokens' text
// left out when `skip_special_tokens`, a cut UTF-8 character as U+FFFD.
// INVALID_ARGUMENT naming `field` for more ids than TokenizeTokenLimit or a
// text longer than max_detokenize_bytes, `field`[i] for an id outside the
// vocabulary.
absl::StatusOr<std::string> DetokenizeIds(std::span<const int32_t> ids, const Tokenizer& tokenizer,
                                          bool skip_special_tokens, std::string_view field,
                                          const ServeLimits& limits = ServeLimits());

}  // namespace beacon

#endif  // BEACON_ENGINE_SERVING_SERVE_REQUEST_H_
