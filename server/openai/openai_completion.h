// The handler of POST /v1/completions and /v1/chat/completions: parses and
// validates the body (openai_request.h, PrepareRequest), submits it to the
// EngineLoop, waits on its sink and answers as one JSON body or as
// server-sent events. Registered by AddOpenAiRoutes (openai_routes.h).
//
// Output beyond the text: logprobs in the endpoint's shape
// (openai_logprobs.h), echo of the prompt (completions), vLLM's
// prompt_logprobs, usage at the end (stream_options.include_usage) or in
// every chunk (continuous_usage_stats).
#ifndef BEACON_SERVER_OPENAI_OPENAI_COMPLETION_H_
#define BEACON_SERVER_OPENAI_OPENAI_COMPLETION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/serving/engine_loop.h"
#include "server/http/http_server.h"
#include "server/openai/completion_output.h"
#include "server/openai/completion_sink.h"
#include "server/openai/openai_request.h"
#include "server/openai/openai_routes.h"

namespace beacon {

// An error in OpenAI's shape {"error": {"message", "type", "param", "code"}}:
// "param" is the field the message names ("messages[0].role: ..."), else
// null.
HttpResponse OpenAiError(const absl::Status& status);
HttpResponse OpenAiError(int http_status, const std::string& message, const std::string& param = "");

// INVALID_ARGUMENT unless the Content-Type is application/json (any
// parameters; case-insensitive). Browsers send cross-origin POSTs of form
// and text types without a CORS preflight, so accepting any type would let
// a web page drive a server on localhost.
absl::Status CheckJsonContentType(const HttpRequest& req);

class CompletionHandler {
 public:
  // All pointers must outlive the handler.
  CompletionHandler(EngineLoop* loop, const Tokenizer* tokenizer, const OpenAiOptions* options, OpenAiEndpoint endpoint)
      : loop_(loop), tokenizer_(tokenizer), options_(options), endpoint_(endpoint) {}

  void operator()(const HttpRequest& req, HttpResponder& resp) const;

 private:
  void Stream(const CompletionContext& ctx, CompletionEvent first, CompletionQueue* queue,
              std::vector<CompletionOutput>* outs, HttpResponder& resp) const;
  // `request_id`: empty when the body did not parse as far as one.
  void Refuse(const absl::Status& s, std::string_view request_id, HttpResponder& resp) const;

  EngineLoop* loop_;
  const Tokenizer* tokenizer_;
  const OpenAiOptions* options_;
  OpenAiEndpoint endpoint_;
};

}  // namespace beacon

#endif  // BEACON_SERVER_OPENAI_OPENAI_COMPLETION_H_
