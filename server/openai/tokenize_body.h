// The bodies of vLLM's tokenizer endpoints, read and answered without HTTP
// (server/openai/tokenize_routes.h serves them; tests/fuzz/openai_fuzzer.cc
// fuzzes them: issue 46):
//   TokenizeBody   {"prompt": "..."} or {"messages": [...]}, optional
//     "model", "add_special_tokens", "add_generation_prompt",
//     "chat_template_kwargs", "return_token_strs"
//     -> {"count", "max_model_len", "tokens", "token_strs" (when asked)}
//   DetokenizeBody {"tokens": [ids], optional "model", "skip_special_tokens"}
//     -> {"prompt": "text"}
// Bounded JSON (json_limits), every field checked, token counts and text
// bounded by the limits (TokenizeTokenLimit, max_detokenize_bytes); errors
// name the field: INVALID_ARGUMENT, or NOT_FOUND for another model.
#ifndef BEACON_SERVER_OPENAI_TOKENIZE_BODY_H_
#define BEACON_SERVER_OPENAI_TOKENIZE_BODY_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/serving/serve_request.h"
#include "model/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/http/json_limits.h"

namespace beacon {

struct TokenizeOptions {
  std::string served_model;  // a body's "model", when given, must be this
  ServeLimits limits;
  JsonLimits json_limits;
};

absl::StatusOr<nlohmann::json> TokenizeBody(std::string_view body, const Tokenizer& tokenizer,
                                            const TokenizeOptions& options);
absl::StatusOr<nlohmann::json> DetokenizeBody(std::string_view body, const Tokenizer& tokenizer,
                                              const TokenizeOptions& options);

}  // namespace beacon

#endif  // BEACON_SERVER_OPENAI_TOKENIZE_BODY_H_
