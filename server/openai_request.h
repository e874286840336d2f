// Requests of the OpenAI-compatible HTTP API (POST /v1/completions and
// /v1/chat/completions) parsed into the server's protocol-neutral
// ServeRequest. Errors are INVALID_ARGUMENT naming the JSON field, or
// NOT_FOUND for a model this server does not serve.
//
// The body is parsed within JsonLimits (json_limits.h) before any tree is
// built. Limits that are the server's (max_tokens, kv_budget, counts of
// stop strings and messages, request_id) are left to PrepareRequest, which
// reports them with the value as sent; this layer checks only types and the
// ranges of the fields it fills.
//
// Supported: model, prompt (a string, or a list of one string or of token
// ids) / messages (content as a string or a list of text parts),
// max_tokens / max_completion_tokens, temperature, top_p, seed, stop (string
// or list), n (1 only), presence_penalty, frequency_penalty, stream,
// stream_options.include_usage; extensions top_k, min_p,
// repetition_penalty, ignore_eos, stop_token_ids, kv_policy, kv_budget,
// time_limit_ms, request_id (the response's id instead of a generated one,
// as in the gRPC API); for reasoning models chat_template_kwargs (vLLM's),
// max_reasoning_tokens and messages[].reasoning_content. Refused with a clear error: n > 1, best_of > 1,
// logprobs, echo, suffix, tools / tool_choice, a non-text response_format.
#ifndef BEACON_SERVER_OPENAI_REQUEST_H_
#define BEACON_SERVER_OPENAI_REQUEST_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/json_limits.h"
#include "server/serve_request.h"

namespace beacon {

enum class OpenAiEndpoint { kCompletions, kChatCompletions };

struct OpenAiRequest {
  ServeRequest serve;
  std::string model;  // as the client named it (the served name when absent)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Parses a request body. `served_model` is the id this server answers to.
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, const std::string& body,
                                                 const std::string& served_model,
                                                 const JsonLimits& json_limits = JsonLimits());

}  // namespace beacon

#endif  // BEACON_SERVER_OPENAI_REQUEST_H_
