// The HTTP routes beacon-serve always has: liveness, readiness and the
// engine's live stats; plus the API-key guard every API route uses.
//
// /health and /ready stay open even with an API key: Kubernetes probes and
// load balancers do not carry credentials, and they reveal nothing.
#ifndef BEACON_SERVER_HTTP_ROUTES_H_
#define BEACON_SERVER_HTTP_ROUTES_H_

#include <atomic>
#include <string>

#include "server/engine_loop.h"
#include "server/http_server.h"

namespace beacon {

// Wraps `handler` so that, when `api_key` is non-empty, a request without
// `Authorization: Bearer <api_key>` gets 401 in OpenAI's error shape.
HttpHandler RequireApiKey(const std::string& api_key, HttpHandler handler);

// GET /health: 200 while the process runs.
// GET /ready: 200 while `ready` and not draining, else 503.
// GET /v1/engine/stats: LoopStats as JSON (guarded by the API key).
// `loop` and `ready` must outlive the server.
void AddOperationalRoutes(Router* router, EngineLoop* loop, const std::atomic<bool>* ready,
                          const std::string& api_key);

}  // namespace beacon

#endif  // BEACON_SERVER_HTTP_ROUTES_H_
