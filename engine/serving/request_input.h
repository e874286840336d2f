// The request's input, checked and tokenised (internal to engine/serving/):
// what serve_request.cc's PrepareRequest and request_input.cc share. The
// public entry points (TokenizeInput, TokenizeTokenLimit, DetokenizeIds) are
// declared in serve_request.h; their definitions live in request_input.cc,
// beside the chat rendering and checks they use.
#ifndef BEACON_ENGINE_SERVING_REQUEST_INPUT_H_
#define BEACON_ENGINE_SERVING_REQUEST_INPUT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/reasoning.h"
#include "engine/serving/serve_request.h"

namespace beacon::request_input {

// INVALID_ARGUMENT "<field>: <what>": every refusal of a request's field.
absl::Status Invalid(std::string_view field, std::string_view what);
// Invalid(field, "is not valid UTF-8") unless `s` is valid UTF-8.
absl::Status CheckUtf8(std::string_view field, std::string_view s);
// How an integer field is shown in an error: as the client sent it.
std::string Shown(const ServeRequest& r, std::string_view field, int64_t value);

// The input's tokens, its fields checked (text, messages, token ids); a chat
// input is rendered through the template into *rendered_chat first.
absl::StatusOr<std::vector<int32_t>> TokenizeChecked(const ServeRequest& r, const Tokenizer& tokenizer,
                                                     const ServeLimits& limits, std::string* rendered_chat);
// The request's reasoning split; `rendered` is the chat prompt's text
// (TokenizeChecked has validated and rendered the chat).
absl::StatusOr<ReasoningOptions> ResolveReasoning(const ServeRequest& r, const Tokenizer& tokenizer,
                                                  const ServeLimits& limits, const std::string& rendered);

}  // namespace beacon::request_input

#endif  // BEACON_ENGINE_SERVING_REQUEST_INPUT_H_
