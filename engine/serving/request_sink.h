// How the engine thread hands a request's results back to its front end
// (a gRPC write reactor, an HTTP stream): tokens as they are sampled, then
// one final record. Implementations queue and return at once: they run on
// the engine thread, which must never wait on a client.
#ifndef BEACON_ENGINE_SERVING_REQUEST_SINK_H_
#define BEACON_ENGINE_SERVING_REQUEST_SINK_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/finish_reason.h"
#include "engine/logprobs.h"
#include "engine/reasoning.h"
#include "kv/policy/kv_policy.h"

namespace beacon {

struct RequestKvStats {
  KvPolicyKind policy = KvPolicyKind::kFull;
  int32_t budget = 0;  // 0 under full
  int32_t peak_cached_tokens = 0;
  int64_t evictions = 0;
  int64_t evicted_tokens = 0;
  int32_t reserved_tokens = 0;  // KV slots admission set aside (reserve mode)
  int32_t preemptions = 0;
  // Memory in bytes (kv/policy/policy_bytes.h): one KV slot (K, V and position of
  // every layer and KV head), and the policy's own state at the peak.
  int64_t bytes_per_slot = 0;
  int64_t state_bytes = 0;
  // What the request ran with (under full: the default-constructed options,
  // policy kFull), and the recent slots its policy protected in fact
  // (kv/policy/policy_registry.h ProtectedWindow; 0 under full).
  KvPolicyOptions options;
  int32_t protected_window = 0;
};

struct StreamFinal {
  std::string request_id;
  // Never kNone.
  FinishReason reason = FinishReason::kError;
  std::string error;           // with kError
  std::string matched_stop;    // the stop string that ended it (kStopSequence)
  int32_t stop_token_id = -1;  // the token that ended it (kEos, kStop)
  uint64_t seed = 0;           // the sampling seed used
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  // Of completion_tokens, those that were reasoning (markers included);
  // the rest are the answer's (engine/reasoning.h).
  int32_t reasoning_tokens = 0;
  // Of prompt_tokens, those taken by reference at admission instead of run
  // (the prefix cache, or a sample group's shared prompt): OpenAI's
  // usage.prompt_tokens_details.cached_tokens.
  int32_t cached_tokens = 0;
  // Whether the client may see cached_tokens (PreparedRequest::
  // report_cached_tokens); the metrics count them either way.
  bool cached_tokens_reported = false;
  double queue_seconds = 0;  // arrival to first scheduled step
  double ttft_seconds = 0;   // arrival to first token (0 if none)
  double total_seconds = 0;
  RequestKvStats kv;
};

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // New tokens and the text they completed (may be empty while a UTF-8
  // character or a possible stop string is held back), and which part that
  // text belongs to: the model's reasoning or its answer. One call never
  // mixes parts. `logprobs`: with the request's logprobs, one per id
  // (engine/logprobs.h), else empty.
  virtual void OnTokens(std::span<const int32_t> ids, std::string_view text, TextPart part,
                        std::span<const PositionLogprobs> logprobs) = 0;
  // With the request's prompt_logprobs: once, before the first OnTokens, the
  // prompt's token ids and the log probabilities of every one but the first
  // (logprobs[i] is prompt[i + 1]'s).
  virtual void OnPromptLogprobs(std::span<const int32_t> prompt, std::span<const PositionLogprobs> logprobs) {}
  // Exactly once, last, for every request the engine accepted.
  virtual void OnFinish(const StreamFinal& final) = 0;
  // Instead of the above when the request is refused before it runs
  // (RESOURCE_EXHAUSTED: queue full; INVALID_ARGUMENT: it can never fit).
  virtual void OnRejected(const absl::Status& status) = 0;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_SERVING_REQUEST_SINK_H_
