#include "server/openai/openai_routes.h"

#include <memory>

#include "nlohmann/json.hpp"
#include "server/openai/openai_completion.h"
#include "server/openai/tokenize_routes.h"
#include "server/ops/http_routes.h"

namespace beacon {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

void AddOpenAiRoutes(Router* router, EngineLoop* loop, const Tokenizer* tokenizer, OpenAiOptions options) {
  auto opts = std::make_shared<const OpenAiOptions>(std::move(options));
  for (auto [path, endpoint] : {std::pair{"/v1/completions", OpenAiEndpoint::kCompletions},
                                std::pair{"/v1/chat/completions", OpenAiEndpoint::kChatCompletions}}) {
    CompletionHandler h(loop, tokenizer, opts.get(), endpoint);
    router->Handle("POST", path,
                   RequireApiKey(opts->door.api_keys, [h, opts](const HttpRequest& q, HttpResponder& r) { h(q, r); }));
  }
  AddTokenizeRoutes(router, tokenizer, opts);
  router->Handle(
      "GET", "/v1/models", RequireApiKey(opts->door.api_keys, [opts](const HttpRequest&, HttpResponder& r) {
        const DefaultSampling& d = opts->door.limits.defaults;
        json model = {{"id", opts->served_model},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "beacon-serve"},
                      {"max_model_len", opts->door.limits.context_length},
                      // This server's: what a request that leaves sampling out gets.
                      {"default_sampling",
                       {{"temperature", d.temperature},
                        {"top_p", d.top_p},
                        {"top_k", d.top_k},
                        {"min_p", d.min_p},
                        {"repetition_penalty", d.repetition_penalty},
                        {"source", d.source}}},
                      {"logprobs_mode", std::string(LogprobsModeName(opts->door.limits.logprobs_mode))},
                      {"max_logprobs", opts->door.limits.max_logprobs}};
        r.Reply(HttpResponse{200, "application/json", {}, Dump({{"object", "list"}, {"data", json::array({model})}})});
      }));
}

}  // namespace beacon
