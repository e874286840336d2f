#include "server/ops/http_routes.h"

#include "nlohmann/json.hpp"
#include "server/ops/api_key.h"

namespace beacon {

namespace {

HttpResponse Unauthorized() {
  HttpResponse r =
      JsonError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'", "authentication_error");
  r.headers.push_back({"WWW-Authenticate", "Bearer"});
  return r;
}

}  // namespace

GatedHandler RequireApiKey(const ApiKeys& keys, HttpHandler handler) {
  if (keys.empty()) return GatedHandler{std::move(handler), nullptr};
  GatedHandler g;
  g.gate = [keys](const HttpRequest& head) -> std::optional<HttpResponse> {
    if (keys.Allows(head.header("authorization"))) return std::nullopt;
    return Unauthorized();
  };
  // The gate has let the request in; checked again in the handler (a cheap
  // compare) so that the handler alone is never unguarded.
  g.handler = [keys, handler = std::move(handler)](const HttpRequest& req, HttpResponder& resp) {
    if (!keys.Allows(req.header("authorization"))) {
      resp.Reply(Unauthorized());
      return;
    }
    handler(req, resp);
  };
  return g;
}

void AddOperationalRoutes(Router* router, EngineLoop* loop, Readiness readiness, const ApiKeys& api_keys,
                          bool with_stats) {
  router->Handle(
      "GET", "/health",
      [](const HttpRequest&, HttpResponder& r) {
        r.Reply(HttpResponse{200, "application/json", {}, R"({"status":"ok"})"});
      },
      RouteKind::kProbe);
  router->Handle(
      "GET", "/ready",
      [loop, readiness = std::move(readiness)](const HttpRequest&, HttpResponder& r) {
        absl::Status s = loop->draining() ? absl::UnavailableError("draining") : readiness();
        if (s.ok()) {
          r.Reply(HttpResponse{200, "application/json", {}, R"({"status":"ready"})"});
          return;
        }
        const nlohmann::json body = {{"status", "not_ready"}, {"reason", std::string(s.message())}};
        r.Reply(HttpResponse{503, "application/json", {}, body.dump()});
      },
      RouteKind::kProbe);
  if (!with_stats) return;
  router->Handle("GET", "/v1/engine/stats", RequireApiKey(api_keys, [loop](const HttpRequest&, HttpResponder& r) {
                   const LoopStats s = loop->Stats();
                   nlohmann::json j = {
                       {"running", s.running},
                       {"waiting", s.waiting},
                       {"inflight", s.inflight},
                       {"kv_blocks_total", s.kv_blocks_total},
                       {"kv_blocks_free", s.kv_blocks_free},
                       {"kv_blocks_reserved", s.kv_blocks_reserved},
                       {"compressing", s.compressing},
                       {"finished", s.finished},
                       {"rejected", s.rejected},
                       {"prompt_tokens", s.totals.prompt_tokens},
                       {"generation_tokens", s.totals.generation_tokens},
                       {"preemptions", s.totals.preemptions},
                       {"evictions", s.totals.evictions},
                       {"evicted_tokens", s.totals.evicted_tokens},
                       {"steps", s.totals.steps},
                       {"prefix_cache", s.prefix_cache},
                       {"prefix_cache_blocks", s.prefix_cache_blocks},
                       {"prefix_cache_idle_blocks", s.prefix_cache_idle_blocks},
                       {"prefix_cache_queries", s.totals.prefix_queries},
                       {"prefix_cache_hits", s.totals.prefix_hits},
                       {"last_step_batch", s.last_step_batch},
                       {"last_step_tokens", s.last_step_tokens},
                       {"draining", loop->draining()},
                   };
                   r.Reply(HttpResponse{200, "application/json", {}, j.dump()});
                 }));
}

}  // namespace beacon
