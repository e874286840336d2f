// The HTTP routes beacon-serve always has: liveness, readiness and the
// engine's live stats; plus the API-key guard every API route uses.
//
// /health and /ready stay open even with an API key: Kubernetes probes and
// load balancers do not carry credentials, and they reveal nothing.
#ifndef BEACON_SERVER_OPS_HTTP_ROUTES_H_
#define BEACON_SERVER_OPS_HTTP_ROUTES_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "engine/serving/engine_loop.h"
#include "server/http/http_server.h"
#include "server/ops/api_key.h"

namespace beacon {

// `handler` behind the API key: when `keys` is not empty, a request without
// `Authorization: Bearer <one of the keys>` gets 401 in OpenAI's error
// shape from the route's gate, before its body is read (HttpGate).
GatedHandler RequireApiKey(const ApiKeys& keys, HttpHandler handler);

// Whether the replica can serve now: OK, or UNAVAILABLE with the reason
// ("draining", "gRPC listener not accepting connections"). Called on an HTTP
// handler thread for every /ready; must be cheap and thread-safe.
using Readiness = std::function<absl::Status()>;

// GET /health: 200 while the process runs.
// GET /ready: 200 while `readiness` is OK and the loop is not draining, else
//   503 with {"status":"not_ready","reason":...}.
// GET /v1/engine/stats: LoopStats as JSON (guarded by the API key), unless
//   `with_stats` is false (the client port when an admin port serves it).
// `loop` must outlive the server.
void AddOperationalRoutes(Router* router, EngineLoop* loop, Readiness readiness, const ApiKeys& api_keys,
                          bool with_stats = true);

}  // namespace beacon

#endif  // BEACON_SERVER_OPS_HTTP_ROUTES_H_
