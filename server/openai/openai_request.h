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
// Which fields each endpoint takes is server/openai/openai_fields.h's list (an
// unknown field, or one of the other endpoint, is refused). Honoured:
// model, prompt (a string, or a list of one string or of token ids) /
// messages (content as a string or a list of text parts), max_tokens /
// max_completion_tokens, temperature, top_p, seed, stop (string or list),
// n (samples: PrepareRequest bounds it), presence_penalty, frequency_penalty, logit_bias, logprobs
// (completions: the count; chat: with top_logprobs), echo (completions),
// user (logged), stream, stream_options.include_usage and vLLM's
// continuous_usage_stats; vLLM's extensions top_k, min_p,
// repetition_penalty, min_tokens, ignore_eos, stop_token_ids,
// skip_special_tokens, include_stop_str_in_output, prompt_logprobs,
// return_tokens_as_token_ids, add_generation_prompt,
// chat_template_kwargs; this server's kv_policy, kv_budget,
// time_limit_ms, request_id (the response's id instead of a generated one,
// as in the gRPC API), max_reasoning_tokens and messages[].reasoning_content.
// Structured output and tools (openai_structured.h): response_format,
// structured_outputs, tools, tool_choice, parallel_tool_calls, functions,
// function_call, constrain_tool_calls, reasoning_effort, and messages'
// tool_calls, tool_call_id and name.
// Sampling fields left out take the server's defaults (ServeLimits::defaults).
#ifndef BEACON_SERVER_OPENAI_OPENAI_REQUEST_H_
#define BEACON_SERVER_OPENAI_OPENAI_REQUEST_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/serving/serve_request.h"
#include "nlohmann/json.hpp"
#include "server/http/json_limits.h"
#include "server/openai/openai_fields.h"

namespace beacon {

struct OpenAiRequest {
  ServeRequest serve;
  std::string model;  // as the client named it (the served name when absent)
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  bool continuous_usage = false;       // stream_options.continuous_usage_stats (vLLM's): usage in every chunk
  bool echo = false;                   // completions: the prompt's text (and logprobs) before the completion
  bool prompt_logprobs_field = false;  // vLLM's prompt_logprobs was sent: report it in that field
  bool tokens_as_ids = false;          // vLLM's return_tokens_as_token_ids (logprobs name ids)
  std::string user;                    // the end user's id, logged
};

// Parses a request body. `served_model` is the id this server answers to.
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, const std::string& body,
                                                 const std::string& served_model,
                                                 const JsonLimits& json_limits = JsonLimits());

}  // namespace beacon

#endif  // BEACON_SERVER_OPENAI_OPENAI_REQUEST_H_
