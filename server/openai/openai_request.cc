#include "server/openai/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/http/json_fields.h"
#include "server/http/json_limits.h"
#include "server/openai/openai_fields.h"
#include "server/openai/openai_structured.h"
#include "util/utf8.h"

namespace beacon {
namespace {

using nlohmann::json;

// Typed field readers: absent or null leaves `out` unchanged.
absl::Status GetNumber(const json& j, const char* field, double lo, double hi, float* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return FieldError(field, "must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) return FieldError(field, absl::StrCat(v, " is outside [", lo, ", ", hi, "]"));
  *out = static_cast<float>(v);
  return absl::OkStatus();
}

// An integer field as the client sent it. nlohmann::json holds integers up
// to 2^64 - 1; larger integer literals become doubles, taken here as
// integers too when integral. `value` saturates at the int64 range, and
// `text` then keeps the value as sent (to 17 significant digits past 2^64).
struct SentInt {
  int64_t value = 0;
  std::string text;  // empty when `value` is exact
  std::string Shown() const { return text.empty() ? absl::StrCat(value) : text; }
};

// Absent or null: nullopt. Not an integer: INVALID_ARGUMENT naming the field.
absl::StatusOr<std::optional<SentInt>> ReadInt(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::optional<SentInt>();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(kMax)) return SentInt{kMax, absl::StrCat(u)};
    return SentInt{static_cast<int64_t>(u), ""};
  }
  if (it->is_number_integer()) return SentInt{it->get<int64_t>(), ""};
  if (it->is_number_float()) {
    const double v = it->get<double>();
    // Only magnitudes past int64 get here as integers: 2.0 is a float.
    if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) >= 0x1p63) {
      return SentInt{v > 0 ? kMax : kMin, absl::StrFormat("%.0f", v)};
    }
  }
  return FieldError(field, "must be an integer");
}

// An integer field the OpenAI layer itself bounds, to the range of the
// ServeRequest field it fills; the server's own limits are PrepareRequest's.
absl::Status GetInt(const json& j, const char* field, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
  absl::StatusOr<std::optional<SentInt>> v = ReadInt(j, field);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return absl::OkStatus();
  if ((*v)->value < lo || (*v)->value > hi) {
    return FieldError(field, absl::StrCat((*v)->Shown(), " is outside [", lo, ", ", hi, "]"));
  }
  *out = (*v)->value;
  return absl::OkStatus();
}

// An integer field whose range only the server knows (max_tokens,
// kv_budget, kv_budget_bytes): passed on, as sent, to PrepareRequest's range check.
absl::Status GetServerChecked(const json& j, const char* field, ServeRequest* r, std::optional<int64_t>* out) {
  absl::StatusOr<std::optional<SentInt>> v = ReadInt(j, field);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return absl::OkStatus();
  *out = (*v)->value;
  if (!(*v)->text.empty()) r->oversized_ints[field] = (*v)->text;
  return absl::OkStatus();
}

absl::Status GetOptionalNumber(const json& j, const char* field, double lo, double hi, std::optional<float>* out) {
  float v = 0.0f;
  if (auto it = j.find(field); it == j.end() || it->is_null()) return absl::OkStatus();
  if (absl::Status s = GetNumber(j, field, lo, hi, &v); !s.ok()) return s;
  *out = v;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> TokenList(const json& arr, const std::string& field) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_number_integer())
      return FieldError(absl::StrCat(field, "[", i, "]"), "must be a token id (integer)");
    // Negative or past 32 bits: no vocabulary has it (PrepareRequest checks
    // the rest against the model's vocabulary).
    if (arr[i].is_number_unsigned() ? arr[i].get<uint64_t>() > std::numeric_limits<int32_t>::max()
                                    : arr[i].get<int64_t>() < 0) {
      return FieldError(absl::StrCat(field, "[", i, "]"),
                        absl::StrCat(arr[i].dump(), " is not a token id (ids are >= 0 and 32-bit)"));
    }
    ids.push_back(arr[i].get<int32_t>());
  }
  return ids;
}

absl::Status ParsePrompt(const json& j, ServeRequest* r) {
  auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) return FieldError("prompt", "is required");
  if (it->is_string()) {
    r->input = ServeRequest::Input::kText;
    r->text = it->get<std::string>();
    return absl::OkStatus();
  }
  const char* kShapes = "must be a string, a list of one string, or a list of token ids";
  if (!it->is_array() || it->empty()) return FieldError("prompt", kShapes);
  // A list that starts with a number is token ids: a bad element (1.5) is
  // reported as such, not as a batch.
  if ((*it)[0].is_number()) {
    absl::StatusOr<std::vector<int32_t>> ids = TokenList(*it, "prompt");
    if (!ids.ok()) return ids.status();
    r->input = ServeRequest::Input::kTokens;
    r->token_ids = std::move(*ids);
    return absl::OkStatus();
  }
  if (it->size() == 1 && (*it)[0].is_string()) {
    r->input = ServeRequest::Input::kText;
    r->text = (*it)[0].get<std::string>();
    return absl::OkStatus();
  }
  if (it->size() == 1 && (*it)[0].is_array()) {
    absl::StatusOr<std::vector<int32_t>> ids = TokenList((*it)[0], "prompt[0]");
    if (!ids.ok()) return ids.status();
    r->input = ServeRequest::Input::kTokens;
    r->token_ids = std::move(*ids);
    return absl::OkStatus();
  }
  // Only a list of strings or of token-id lists is a batch.
  const bool batch = std::all_of(it->begin(), it->end(), [](const json& e) { return e.is_string(); }) ||
                     std::all_of(it->begin(), it->end(), [](const json& e) { return e.is_array(); });
  if (batch) return FieldError("prompt", "batched prompts are not supported: send one per request");
  return FieldError("prompt", kShapes);
}

absl::Status ParseMessages(const json& j, ServeRequest* r) {
  auto it = j.find("messages");
  if (it == j.end() || it->is_null()) return FieldError("messages", "is required");
  if (!it->is_array() || it->empty()) return FieldError("messages", "must be a non-empty list");
  r->input = ServeRequest::Input::kChat;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string f = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return FieldError(f, "must be an object with role and content");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return FieldError(f + ".role", "must be a string");
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
          return FieldError(pf, "only parts of type \"text\" are supported");
        }
        msg.content += part["text"].get<std::string>();
      }
    } else {
      return FieldError(f + ".content", "must be a string or a list of text parts");
    }
    // An assistant turn's reasoning as this API returned it (vLLM's field).
    if (auto rc = m.find("reasoning_content"); rc != m.end() && !rc->is_null()) {
      if (!rc->is_string()) return FieldError(f + ".reasoning_content", "must be a string");
      msg.reasoning_content = rc->get<std::string>();
    }
    if (absl::Status s = ParseMessageToolFields(m, f, &msg); !s.ok()) return s;
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
  if (!it->is_array()) return FieldError("stop", "must be a string or a list of strings");
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string()) return FieldError(absl::StrCat("stop[", i, "]"), "must be a string");
    r->stop.push_back((*it)[i].get<std::string>());
  }
  return absl::OkStatus();
}

// logit_bias: {"<token id>": bias, ...}; ids and ranges are PrepareRequest's.
absl::Status ParseLogitBias(const json& j, ServeRequest* r) {
  auto it = j.find("logit_bias");
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return FieldError("logit_bias", "must be an object of token id (as a string) to bias");
  for (const auto& [key, value] : it->items()) {
    const std::string f = absl::StrCat("logit_bias[\"", key.substr(0, 32), "\"]");
    int64_t id = -1;
    if (key.empty() || key.size() > 10 ||
        !std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return FieldError(f, "the key must be a token id (a decimal integer)");
    }
    id = std::stoll(key);
    if (!value.is_number()) return FieldError(f, "the bias must be a number");
    const double b = value.get<double>();
    if (!(b >= -100 && b <= 100)) return FieldError(f, absl::StrCat(b, " is outside [-100, 100]"));
    if (id > std::numeric_limits<int32_t>::max()) return FieldError(f, "is not a token id (ids are 32-bit)");
    r->sampling.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  std::sort(r->sampling.logit_bias.begin(), r->sampling.logit_bias.end());
  return absl::OkStatus();
}

// logprobs / top_logprobs in the endpoint's shape, into serve.logprobs:
// chat: logprobs true/false and top_logprobs n; completions: logprobs n.
absl::Status ParseLogprobs(const json& j, OpenAiEndpoint endpoint, OpenAiRequest* out) {
  ServeRequest& r = out->serve;
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    bool on = false;
    if (absl::Status s = GetJsonBool(j, "logprobs", &on); !s.ok()) return s;
    std::optional<int64_t> top;
    if (absl::Status s = GetInt(j, "top_logprobs", 0, std::numeric_limits<int32_t>::max(), &top); !s.ok()) return s;
    if (top.has_value() && !on) return FieldError("top_logprobs", "needs logprobs: true");
    if (on) r.logprobs = top.value_or(0);
  } else {
    std::optional<int64_t> n;
    if (absl::Status s = GetInt(j, "logprobs", 0, std::numeric_limits<int32_t>::max(), &n); !s.ok()) return s;
    if (n.has_value()) r.logprobs = *n;
    if (absl::Status s = GetJsonBool(j, "echo", &out->echo); !s.ok()) return s;
    // Echo with logprobs scores the prompt: its tokens' logprobs come first.
    if (out->echo && n.has_value()) r.prompt_logprobs = *n;
  }
  // vLLM's prompt_logprobs (either endpoint); PrepareRequest bounds both.
  std::optional<int64_t> prompt;
  if (absl::Status s = GetInt(j, "prompt_logprobs", 0, std::numeric_limits<int32_t>::max(), &prompt); !s.ok()) return s;
  if (prompt.has_value()) {
    out->prompt_logprobs_field = true;
    r.prompt_logprobs = std::max<int64_t>(r.prompt_logprobs, *prompt);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, const std::string& body,
                                                 const std::string& served_model, const JsonLimits& json_limits) {
  absl::StatusOr<json> parsed = ParseJsonBounded(body, json_limits);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  if (!j.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  OpenAiRequest out;
  ServeRequest& r = out.serve;
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return FieldError("model", "must be a string");
    out.model = it->get<std::string>();
    if (out.model != served_model) {
      return absl::NotFoundError(absl::StrCat("model: '", Excerpt(out.model),
                                              "' is not served here (this server serves '", served_model, "')"));
    }
  } else {
    out.model = served_model;
  }
  if (absl::Status s = CheckOpenAiFields(j, endpoint); !s.ok()) return s;
  if (auto it = j.find("best_of"); it != j.end() && !it->is_null() && *it != 1) {
    return FieldError("best_of", "only 1 is supported (ask for n samples instead)");
  }
  if (absl::Status s = ParseLogprobs(j, endpoint, &out); !s.ok()) return s;
  if (absl::Status s = ParseLogitBias(j, &r); !s.ok()) return s;
  if (absl::Status s = GetJsonBool(j, "return_tokens_as_token_ids", &out.tokens_as_ids); !s.ok()) return s;
  if (auto it = j.find("user"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return FieldError("user", "must be a string");
    out.user = it->get<std::string>();  // logged with the request; bounded by the body limit
  }
  std::optional<int64_t> n;  // PrepareRequest bounds it (ServeLimits::max_n)
  if (absl::Status s = GetServerChecked(j, "n", &r, &n); !s.ok()) return s;
  r.n = n.value_or(1);
  if (auto it = j.find("request_id"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return FieldError("request_id", "must be a string");
    r.request_id = it->get<std::string>();  // PrepareRequest checks its length and characters
  }

  if (absl::Status s = endpoint == OpenAiEndpoint::kChatCompletions ? ParseMessages(j, &r) : ParsePrompt(j, &r);
      !s.ok()) {
    return s;
  }
  // The newer name wins when both are given, as in OpenAI's API; errors name
  // max_tokens either way. Only the lower bound is OpenAI's (0 is not "the
  // default" here, as it is over gRPC); the upper one is the server's,
  // checked by PrepareRequest with the value as sent.
  absl::StatusOr<std::optional<SentInt>> max_tokens = ReadInt(j, "max_tokens");
  if (!max_tokens.ok()) return max_tokens.status();
  absl::StatusOr<std::optional<SentInt>> max_completion_tokens = ReadInt(j, "max_completion_tokens");
  if (!max_completion_tokens.ok()) return max_completion_tokens.status();
  if (max_completion_tokens->has_value()) *max_tokens = *max_completion_tokens;
  if (max_tokens->has_value()) {
    if ((*max_tokens)->value < 1)
      return FieldError("max_tokens", absl::StrCat((*max_tokens)->Shown(), " is less than 1"));
    r.max_tokens = (*max_tokens)->value;
    if (!(*max_tokens)->text.empty()) r.oversized_ints["max_tokens"] = (*max_tokens)->text;
  }

  if (absl::Status s = GetOptionalNumber(j, "temperature", 0, 2, &r.temperature); !s.ok()) return s;
  if (absl::Status s = GetOptionalNumber(j, "top_p", 0, 1, &r.top_p); !s.ok()) return s;
  if (absl::Status s = GetOptionalNumber(j, "min_p", 0, 1, &r.min_p); !s.ok()) return s;
  if (absl::Status s = GetNumber(j, "presence_penalty", -2, 2, &r.sampling.presence_penalty); !s.ok()) return s;
  if (absl::Status s = GetNumber(j, "frequency_penalty", -2, 2, &r.sampling.frequency_penalty); !s.ok()) return s;
  if (absl::Status s = GetOptionalNumber(j, "repetition_penalty", 0, 10, &r.repetition_penalty); !s.ok()) return s;
  std::optional<int64_t> top_k, budget, time_limit;
  // -1 is "off", as in vLLM; any larger k is valid (past the vocabulary, off).
  if (absl::Status s = GetInt(j, "top_k", -1, std::numeric_limits<int32_t>::max(), &top_k); !s.ok()) return s;
  if (top_k.has_value()) r.top_k = *top_k < 0 ? 0 : static_cast<int32_t>(*top_k);  // -1: off (vLLM)
  if (auto it = j.find("seed"); it != j.end() && !it->is_null()) {
    absl::StatusOr<std::optional<SentInt>> v = ReadInt(j, "seed");  // names a non-integer
    if (!v.ok()) return v.status();
    if (!it->is_number_integer()) {
      return FieldError("seed", absl::StrCat((*v)->Shown(), " is outside [", std::numeric_limits<int64_t>::min(), ", ",
                                             std::numeric_limits<uint64_t>::max(), "]"));
    }
    r.sampling.seed = it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
  }
  if (absl::Status s = ParseStop(j, &r); !s.ok()) return s;
  if (auto it = j.find("stop_token_ids"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return FieldError("stop_token_ids", "must be a list of token ids");
    absl::StatusOr<std::vector<int32_t>> ids = TokenList(*it, "stop_token_ids");
    if (!ids.ok()) return ids.status();
    r.stop_token_ids = std::move(*ids);
  }
  if (absl::Status s = GetJsonBool(j, "ignore_eos", &r.ignore_eos); !s.ok()) return s;
  if (absl::Status s = GetJsonBool(j, "skip_special_tokens", &r.skip_special_tokens); !s.ok()) return s;
  if (absl::Status s = GetJsonBool(j, "include_stop_str_in_output", &r.include_stop_str_in_output); !s.ok()) return s;
  std::optional<int64_t> min_tokens;
  if (absl::Status s = GetServerChecked(j, "min_tokens", &r, &min_tokens); !s.ok()) return s;
  r.min_tokens = min_tokens.value_or(0);
  if (absl::Status s = GetJsonBool(j, "add_generation_prompt", &r.add_generation_prompt); !s.ok()) return s;
  if (absl::Status s = GetInt(j, "time_limit_ms", 0, std::numeric_limits<uint32_t>::max(), &time_limit); !s.ok()) {
    return s;
  }
  if (time_limit.has_value()) r.time_limit_ms = static_cast<uint32_t>(*time_limit);
  if (auto it = j.find("kv_policy"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return FieldError("kv_policy", "must be a string");
    r.kv_policy = it->get<std::string>();
  }
  if (absl::Status s = GetServerChecked(j, "kv_budget", &r, &budget); !s.ok()) return s;
  r.kv_budget = budget;
  std::optional<int64_t> budget_bytes;
  if (absl::Status s = GetServerChecked(j, "kv_budget_bytes", &r, &budget_bytes); !s.ok()) return s;
  r.kv_budget_bytes = budget_bytes;
  if (auto it = j.find("cache_salt"); it != j.end() && !it->is_null()) {  // vLLM's; PrepareRequest bounds it
    if (!it->is_string()) return FieldError("cache_salt", "must be a string");
    r.cache_salt = it->get<std::string>();
  }
  // Reasoning models: extra template variables and the thinking limit
  // (PrepareRequest checks both against the model).
  if (auto it = j.find("chat_template_kwargs"); it != j.end() && !it->is_null()) {
    if (endpoint != OpenAiEndpoint::kChatCompletions)
      return FieldError("chat_template_kwargs", "is for chat completions only");
    if (!it->is_object()) return FieldError("chat_template_kwargs", "must be an object");
    // Same tree, in the template engine's (insertion-ordered) JSON type.
    r.chat_template_kwargs = jinja::Json::parse(it->dump());
  }
  if (absl::Status s = GetServerChecked(j, "max_reasoning_tokens", &r, &r.max_reasoning_tokens); !s.ok()) return s;
  for (const char* key :
       {"response_format", "structured_outputs", "tools", "functions", "tool_choice", "function_call"}) {
    if (auto it = j.find(key); it != j.end() && !it->is_null()) {
      // Parsed again keeping key order (the body passed the limits above).
      const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
      if (absl::Status s = ParseStructuredFields(ordered, endpoint, &r); !s.ok()) return s;
      break;
    }
  }
  if (auto it = j.find("reasoning_effort"); it != j.end() && !it->is_null()) {
    if (endpoint != OpenAiEndpoint::kChatCompletions)
      return FieldError("reasoning_effort", "is for chat completions only");
    if (!it->is_string()) return FieldError("reasoning_effort", "must be low, medium or high");
    r.reasoning_effort = it->get<std::string>();  // PrepareRequest checks the value
  }
  if (auto it = j.find("constrain_tool_calls"); it != j.end() && !it->is_null()) {
    if (absl::Status s = GetJsonBool(j, "constrain_tool_calls", &r.tools.constrain_auto); !s.ok()) return s;
  }

  if (absl::Status s = GetJsonBool(j, "stream", &out.stream); !s.ok()) return s;
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return FieldError("stream_options", "must be an object");
    if (!out.stream) return FieldError("stream_options", "is only allowed with stream: true");
    for (const auto& [key, value] : it->items()) {
      if (key != "include_usage" && key != "continuous_usage_stats") {
        return FieldError("stream_options." + key, "unrecognized (include_usage and continuous_usage_stats are)");
      }
    }
    if (absl::Status s = GetJsonBool(*it, "include_usage", &out.include_usage); !s.ok()) {
      return FieldError("stream_options.include_usage", "must be true or false");
    }
    if (absl::Status s = GetJsonBool(*it, "continuous_usage_stats", &out.continuous_usage); !s.ok()) {
      return FieldError("stream_options.continuous_usage_stats", "must be true or false");
    }
  }
  return out;
}

}  // namespace beacon
