#include "server/openai/tokenize_routes.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "nlohmann/json.hpp"
#include "server/openai/openai_completion.h"
#include "server/openai/tokenize_body.h"
#include "server/ops/http_routes.h"

namespace beacon {

using nlohmann::json;

void AddTokenizeRoutes(Router* router, const Tokenizer* tokenizer, std::shared_ptr<const OpenAiOptions> options) {
  using Fn = absl::StatusOr<json> (*)(std::string_view, const Tokenizer&, const TokenizeOptions&);
  auto body_options = std::make_shared<const TokenizeOptions>(
      TokenizeOptions{options->served_model, options->door.limits, options->json_limits});
  for (const std::pair<const char*, Fn>& route : {std::pair<const char*, Fn>{"/tokenize", &TokenizeBody},
                                                  std::pair<const char*, Fn>{"/detokenize", &DetokenizeBody}}) {
    const Fn fn = route.second;  // a variable the lambda can capture (clang: not a structured binding)
    router->Handle(
        "POST", route.first,
        RequireApiKey(options->door.api_keys, [tokenizer, options, body_options, fn](const HttpRequest& q,
                                                                                     HttpResponder& r) {
          if (absl::Status s = CheckJsonContentType(q); !s.ok()) {
            return (void)r.Reply(OpenAiError(415, std::string(s.message())));
          }
          absl::StatusOr<json> out = fn(q.body, *tokenizer, *body_options);
          if (!out.ok()) {
            if (options->door.on_rejected) options->door.on_rejected(out.status());
            return (void)r.Reply(OpenAiError(out.status()));
          }
          r.Reply(HttpResponse{200, "application/json", {}, out->dump(-1, ' ', false, json::error_handler_t::replace)});
        }));
  }
}

}  // namespace beacon
