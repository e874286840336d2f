#include "server/openai/tokenize_body.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/tokenizer/unicode.h"
#include "server/http/json_fields.h"
#include "server/openai/openai_request.h"

namespace beacon {
namespace {

using nlohmann::json;

absl::Status CheckFields(const json& j, std::initializer_list<const char*> known) {
  for (const auto& [key, value] : j.items()) {
    bool found = false;
    for (const char* k : known) found |= key == k;
    if (!found) return FieldError(key, "unrecognized request argument (not a field of this endpoint)");
  }
  return absl::OkStatus();
}

// The body as a JSON object whose "model", if any, is the one served.
absl::StatusOr<json> ParseBody(std::string_view body, const TokenizeOptions& options) {
  absl::StatusOr<json> j = ParseJsonBounded(body, options.json_limits);
  if (!j.ok()) return j.status();
  if (!j->is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  if (auto it = j->find("model"); it != j->end() && !it->is_null()) {
    if (!it->is_string()) return FieldError("model", "must be a string");
    if (it->get<std::string>() != options.served_model) {
      return absl::NotFoundError(absl::StrCat("model: '", it->get<std::string>(),
                                              "' is not served here (this server serves '", options.served_model,
                                              "')"));
    }
  }
  return j;
}

}  // namespace

absl::StatusOr<json> TokenizeBody(std::string_view body, const Tokenizer& tokenizer, const TokenizeOptions& options) {
  absl::StatusOr<json> j = ParseBody(body, options);
  if (!j.ok()) return j.status();
  if (absl::Status s = CheckFields(*j, {"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt",
                                        "chat_template_kwargs", "return_token_strs"});
      !s.ok()) {
    return s;
  }
  const bool has_prompt = j->contains("prompt"), has_messages = j->contains("messages");
  if (has_prompt == has_messages) return FieldError("prompt", "give exactly one of prompt and messages");
  bool add_special = true, strs = false;
  if (absl::Status s = GetJsonBool(*j, "add_special_tokens", &add_special); !s.ok()) return s;
  if (absl::Status s = GetJsonBool(*j, "return_token_strs", &strs); !s.ok()) return s;
  // The completion parsers read the input fields, with their checks; the
  // rest of a completion's fields are absent here.
  json input = json::object();
  for (const char* f : {"prompt", "messages", "add_generation_prompt", "chat_template_kwargs"}) {
    if (j->contains(f)) input[f] = (*j)[f];
  }
  if (has_prompt && (j->contains("add_generation_prompt") || j->contains("chat_template_kwargs"))) {
    return FieldError(j->contains("add_generation_prompt") ? "add_generation_prompt" : "chat_template_kwargs",
                      "applies to messages only");
  }
  if (has_messages && j->contains("add_special_tokens"))
    return FieldError("add_special_tokens", "applies to prompt only");
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(has_prompt ? OpenAiEndpoint::kCompletions : OpenAiEndpoint::kChatCompletions, input.dump(),
                         options.served_model, options.json_limits);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<std::vector<int32_t>> ids = TokenizeInput(parsed->serve, tokenizer, options.limits);
  if (!ids.ok()) {
    // TokenizeInput names the request's input as gRPC does ("text",
    // "tokens"); this API's field is "prompt".
    const absl::string_view m = ids.status().message();
    for (absl::string_view grpc_name : {"text: ", "tokens: "}) {
      if (has_prompt && absl::StartsWith(m, grpc_name)) {
        return absl::Status(ids.status().code(), absl::StrCat("prompt: ", m.substr(grpc_name.size())));
      }
    }
    return ids.status();
  }
  // Without special tokens: the BOS TokenizeInput put first goes (token-id
  // prompts are taken as given either way).
  if (!add_special && parsed->serve.input == ServeRequest::Input::kText && !ids->empty() &&
      ids->front() == tokenizer.bos_id()) {
    ids->erase(ids->begin());
  }
  json out = {{"count", ids->size()}, {"max_model_len", options.limits.context_length}, {"tokens", *ids}};
  if (strs) {
    json pieces = json::array();
    for (int32_t id : *ids) pieces.push_back(SanitizeUtf8(tokenizer.TokenBytes(id, /*render_special=*/true)));
    out["token_strs"] = std::move(pieces);
  }
  return out;
}

absl::StatusOr<json> DetokenizeBody(std::string_view body, const Tokenizer& tokenizer, const TokenizeOptions& options) {
  absl::StatusOr<json> j = ParseBody(body, options);
  if (!j.ok()) return j.status();
  if (absl::Status s = CheckFields(*j, {"model", "tokens", "skip_special_tokens"}); !s.ok()) return s;
  auto it = j->find("tokens");
  if (it == j->end() || !it->is_array()) return FieldError("tokens", "is required: a list of token ids");
  const int32_t limit = TokenizeTokenLimit(options.limits);
  if (static_cast<int64_t>(it->size()) > limit) {  // before a vector of them is built
    return FieldError("tokens", absl::StrCat("has ", it->size(), " token ids; at most ", limit,
                                             " (the context length, or --max-tokenize-tokens)"));
  }
  std::vector<int32_t> ids;
  ids.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
      return FieldError(absl::StrCat("tokens[", i, "]"), absl::StrCat(v.dump(), " is not a token id"));
    }
    ids.push_back(v.get<int32_t>());
  }
  bool skip = true;
  if (absl::Status s = GetJsonBool(*j, "skip_special_tokens", &skip); !s.ok()) return s;
  absl::StatusOr<std::string> text = DetokenizeIds(ids, tokenizer, skip, "tokens", options.limits);
  if (!text.ok()) return text.status();
  return json{{"prompt", *text}};
}

}  // namespace beacon
