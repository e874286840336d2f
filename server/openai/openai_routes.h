// The OpenAI-compatible HTTP API on beacon-serve's HTTP port:
//   POST /v1/completions, POST /v1/chat/completions (plain JSON, or with
//   "stream": true server-sent events ending in "data: [DONE]"),
//   GET /v1/models.
//
// Each request is validated (openai_request.h + PrepareRequest) and submitted
// to the same EngineLoop as the gRPC API. The HTTP handler thread waits on
// the request's sink; a client that disconnects cancels its request, which
// frees its KV blocks before the next engine step.
//
// Errors use OpenAI's JSON shape {"error": {"message", "type", "code"}}:
// 400 invalid input (the message names the field, or the JSON limit the body
// exceeds), 401 missing API key, 404 unknown model or route, 415 a POST body
// whose Content-Type is not application/json (parameters such as charset
// allowed), 429 queue full, 503 draining, 500 engine error.
#ifndef BEACON_SERVER_OPENAI_OPENAI_ROUTES_H_
#define BEACON_SERVER_OPENAI_OPENAI_ROUTES_H_

#include <functional>
#include <string>

#include "engine/serving/engine_loop.h"
#include "engine/serving/serve_request.h"
#include "server/http/http_server.h"
#include "server/http/json_limits.h"
#include "server/ops/api_key.h"
#include "server/ops/front_door.h"

namespace beacon {

struct OpenAiOptions {
  std::string served_model;  // the id clients use ("model")
  // Limits, API keys (empty: no authentication), tenants and the refusals'
  // counter, shared with the gRPC API (server/ops/front_door.h).
  FrontDoor door;
  JsonLimits json_limits;  // nesting depth and value count of a request body
};

// Registers the routes. `loop` and `tokenizer` must outlive the server.
void AddOpenAiRoutes(Router* router, EngineLoop* loop, const Tokenizer* tokenizer, OpenAiOptions options);

// The HTTP status for an absl status code (400, 404, 429, 503, 401, 500).
int HttpStatusFor(absl::StatusCode code);

}  // namespace beacon

#endif  // BEACON_SERVER_OPENAI_OPENAI_ROUTES_H_
