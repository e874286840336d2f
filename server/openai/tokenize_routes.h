// vLLM's tokenizer endpoints on the HTTP port (guarded by the API key):
//   POST /tokenize   {"prompt": "..."} or {"messages": [...]}, optional
//     "model", "add_special_tokens" (default true: BOS where the vocabulary
//     asks for it; prompt only), "add_generation_prompt" (default true;
//     messages only), "chat_template_kwargs", "return_token_strs"
//     -> {"count", "max_model_len", "tokens", "token_strs" (when asked)}
//   POST /detokenize {"tokens": [ids], optional "model",
//     "skip_special_tokens" (default true)} -> {"prompt": "text"}
// The ids are exactly what a completion of the same input runs on
// (TokenizeInput). Errors as the completion endpoints': 400 naming the
// field (unknown fields too), 404 another model, 415 not JSON.
#ifndef BEACON_SERVER_OPENAI_TOKENIZE_ROUTES_H_
#define BEACON_SERVER_OPENAI_TOKENIZE_ROUTES_H_

#include <memory>

#include "model/tokenizer/tokenizer.h"
#include "server/http/http_server.h"
#include "server/openai/openai_routes.h"

namespace beacon {

// `tokenizer` must outlive the server.
void AddTokenizeRoutes(Router* router, const Tokenizer* tokenizer, std::shared_ptr<const OpenAiOptions> options);

}  // namespace beacon

#endif  // BEACON_SERVER_OPENAI_TOKENIZE_ROUTES_H_
