#include "server/openai_request.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Typed field readers: absent or null leaves `out` unchanged.
absl::Status GetNumber(const json& j, const char* field, double lo, double hi, float* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return Bad(field, "must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) return Bad(field, absl::StrCat(v, " is outside [", lo, ", ", hi, "]"));
  *out = static_cast<float>(v);
  return absl::OkStatus();
}

absl::Status GetInt(const json& j, const char* field, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer()) return Bad(field, "must be an integer");
  const int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)
                        ? hi + 1
                        : it->get<int64_t>();
  if (v < lo || v > hi) return Bad(field, absl::StrCat(v, " is outside [", lo, ", ", hi, "]"));
  *out = v;
  return absl::OkStatus();
}

absl::Status GetBool(const json& j, const char* field, bool* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return Bad(field, "must be true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> TokenList(const json& arr, const std::string& field) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_number_integer()) return Bad(absl::StrCat(field, "[", i, "]"), "must be a token id (integer)");
    const int64_t v = arr[i].get<int64_t>();
    if (v < 0 || v > std::numeric_limits<int32_t>::max()) {
      return Bad(absl::StrCat(field, "[", i, "]"), absl::StrCat(v, " is not a token id"));
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

absl::Status ParsePrompt(const json& j, ServeRequest* r) {
  auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) return Bad("prompt", "is required");
  if (it->is_string()) {
    r->input = ServeRequest::Input::kText;
    r->text = it->get<std::string>();
    return absl::OkStatus();
  }
  if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
    absl::StatusOr<std::vector<int32_t>> ids = TokenList(*it, "prompt");
    if (!ids.ok()) return ids.status();
    r->input = ServeRequest::Input::kTokens;
    r->token_ids = std::move(*ids);
    return absl::OkStatus();
  }
  if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    r->input = ServeRequest::Input::kText;
    r->text = (*it)[0].get<std::string>();
    return absl::OkStatus();
  }
  if (it->is_array() && it->size() == 1 && (*it)[0].is_array()) {
    absl::StatusOr<std::vector<int32_t>> ids = TokenList((*it)[0], "prompt[0]");
    if (!ids.ok()) return ids.status();
    r->input = ServeRequest::Input::kTokens;
    r->token_ids = std::move(*ids);
    return absl::OkStatus();
  }
  if (it->is_array() && it->size() > 1) return Bad("prompt", "batched prompts are not supported: send one per request");
  return Bad("prompt", "must be a string, a list of one string, or a list of token ids");
}

absl::Status ParseMessages(const json& j, ServeRequest* r) {
  auto it = j.find("messages");
  if (it == j.end() || it->is_null()) return Bad("messages", "is required");
  if (!it->is_array() || it->empty()) return Bad("messages", "must be a non-empty list");
  r->input = ServeRequest::Input::kChat;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string f = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return Bad(f, "must be an object with role and content");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return Bad(f + ".role", "must be a string");
    ChatMessage msg;
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for it
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      msg.content = "";
    } else if (content->is_string()) {
      msg.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (size_t k = 0; k < content->size(); ++k) {
        const json& part = (*content)[k];
        const std::string pf = absl::StrCat(f, ".content[", k, "]");
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
          return Bad(pf, "only parts of type \"text\" are supported");
        }
        msg.content += part["text"].get<std::string>();
      }
    } else {
      return Bad(f + ".content", "must be a string or a list of text parts");
    }
    r->messages.push_back(std::move(msg));
  }
  return absl::OkStatus();
}

absl::Status ParseStop(const json& j, ServeRequest* r) {
  auto it = j.find("stop");
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (it->is_string()) {
    r->stop.push_back(it->get<std::string>());
    return absl::OkStatus();
  }
  if (!it->is_array()) return Bad("stop", "must be a string or a list of strings");
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string()) return Bad(absl::StrCat("stop[", i, "]"), "must be a string");
    r->stop.push_back((*it)[i].get<std::string>());
  }
  return absl::OkStatus();
}

// Fields whose OpenAI features this server does not implement: refused, not
// silently ignored, so a client never believes it got them.
absl::Status RefuseUnsupported(const json& j) {
  if (auto it = j.find("logprobs"); it != j.end() && !it->is_null() &&
                                    !(it->is_boolean() && !it->get<bool>()) &&
                                    !(it->is_number_integer() && it->get<int64_t>() == 0)) {
    return Bad("logprobs", "log probabilities are not supported by this server");
  }
  if (auto it = j.find("top_logprobs"); it != j.end() && !it->is_null() && it->get<json>() != 0) {
    return Bad("top_logprobs", "log probabilities are not supported by this server");
  }
  if (auto it = j.find("echo"); it != j.end() && it->is_boolean() && it->get<bool>()) {
    return Bad("echo", "is not supported by this server");
  }
  if (auto it = j.find("suffix"); it != j.end() && !it->is_null()) {
    return Bad("suffix", "is not supported by this server");
  }
  if (auto it = j.find("best_of"); it != j.end() && !it->is_null() && it->get<json>() != 1) {
    return Bad("best_of", "only 1 is supported");
  }
  if (auto it = j.find("tools"); it != j.end() && !it->is_null() && !(it->is_array() && it->empty())) {
    return Bad("tools", "tool calling is not supported by this server");
  }
  if (auto it = j.find("response_format"); it != j.end() && !it->is_null()) {
    if (!it->is_object() || it->value("type", "") != "text") {
      return Bad("response_format", "only {\"type\": \"text\"} is supported");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, const std::string& body,
                                                 const std::string& served_model) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("the body is not valid JSON (or not UTF-8)");
  }
  if (!j.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  OpenAiRequest out;
  ServeRequest& r = out.serve;
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return Bad("model", "must be a string");
    out.model = it->get<std::string>();
    if (out.model != served_model) {
      return absl::NotFoundError(
          absl::StrCat("model: '", out.model, "' is not served here (this server serves '", served_model, "')"));
    }
  } else {
    out.model = served_model;
  }
  if (absl::Status s = RefuseUnsupported(j); !s.ok()) return s;
  std::optional<int64_t> n;
  if (absl::Status s = GetInt(j, "n", 1, 1 << 20, &n); !s.ok()) return s;
  if (n.has_value() && *n != 1) return Bad("n", "only n = 1 is supported (send several requests)");

  if (absl::Status s = endpoint == OpenAiEndpoint::kChatCompletions ? ParseMessages(j, &r) : ParsePrompt(j, &r);
      !s.ok()) {
    return s;
  }
  std::optional<int64_t> max_tokens, max_completion_tokens, top_k, seed, budget, time_limit;
  if (absl::Status s = GetInt(j, "max_tokens", 1, 1 << 30, &max_tokens); !s.ok()) return s;
  if (absl::Status s = GetInt(j, "max_completion_tokens", 1, 1 << 30, &max_completion_tokens); !s.ok()) return s;
  // The newer name wins when both are given, as in OpenAI's API.
  if (max_completion_tokens.has_value()) max_tokens = max_completion_tokens;
  // A limit beyond the context is clamped by PrepareRequest's range check,
  // which names max_tokens.
  if (max_tokens.has_value()) r.max_tokens = static_cast<int32_t>(std::min<int64_t>(*max_tokens, 1 << 30));

  if (absl::Status s = GetNumber(j, "temperature", 0, 2, &r.sampling.temperature); !s.ok()) return s;
  if (absl::Status s = GetNumber(j, "top_p", 0, 1, &r.sampling.top_p); !s.ok()) return s;
  if (absl::Status s = GetNumber(j, "min_p", 0, 1, &r.sampling.min_p); !s.ok()) return s;
  if (absl::Status s = GetNumber(j, "presence_penalty", -2, 2, &r.sampling.presence_penalty); !s.ok()) return s;
  if (absl::Status s = GetNumber(j, "frequency_penalty", -2, 2, &r.sampling.frequency_penalty); !s.ok()) return s;
  if (absl::Status s = GetNumber(j, "repetition_penalty", 0, 10, &r.sampling.repetition_penalty); !s.ok()) return s;
  if (absl::Status s = GetInt(j, "top_k", -1, 1 << 20, &top_k); !s.ok()) return s;
  if (top_k.has_value()) r.sampling.top_k = *top_k < 0 ? 0 : static_cast<int32_t>(*top_k);  // -1: off (vLLM)
  if (auto it = j.find("seed"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) return Bad("seed", "must be an integer");
    r.sampling.seed = it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
  }
  if (absl::Status s = ParseStop(j, &r); !s.ok()) return s;
  if (auto it = j.find("stop_token_ids"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return Bad("stop_token_ids", "must be a list of token ids");
    absl::StatusOr<std::vector<int32_t>> ids = TokenList(*it, "stop_token_ids");
    if (!ids.ok()) return ids.status();
    r.stop_token_ids = std::move(*ids);
  }
  if (absl::Status s = GetBool(j, "ignore_eos", &r.ignore_eos); !s.ok()) return s;
  if (absl::Status s = GetInt(j, "time_limit_ms", 0, std::numeric_limits<uint32_t>::max(), &time_limit); !s.ok()) {
    return s;
  }
  if (time_limit.has_value()) r.time_limit_ms = static_cast<uint32_t>(*time_limit);
  if (auto it = j.find("kv_policy"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return Bad("kv_policy", "must be a string");
    r.kv_policy = it->get<std::string>();
  }
  if (absl::Status s = GetInt(j, "kv_budget", 0, std::numeric_limits<int32_t>::max(), &budget); !s.ok()) return s;
  if (budget.has_value()) r.kv_budget = static_cast<int32_t>(*budget);

  if (absl::Status s = GetBool(j, "stream", &out.stream); !s.ok()) return s;
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return Bad("stream_options", "must be an object");
    if (!out.stream) return Bad("stream_options", "is only allowed with stream: true");
    if (absl::Status s = GetBool(*it, "include_usage", &out.include_usage); !s.ok()) {
      return Bad("stream_options.include_usage", "must be true or false");
    }
  }
  // `user` (an end-user id) and other unknown fields are ignored, as OpenAI does.
  return out;
}

}  // namespace beacon
