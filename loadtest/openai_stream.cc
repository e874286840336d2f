#include "loadtest/openai_stream.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace beacon::loadtest {

using json = nlohmann::json;

absl::string_view OpenAiPath(Backend backend) {
  return backend == Backend::kOpenAiChat ? "/v1/chat/completions" : "/v1/completions";
}

absl::StatusOr<std::string> OpenAiBody(const RequestSpec& spec, Backend backend, const std::string& model,
                                       bool continuous_usage) {
  json j;
  if (!model.empty()) j["model"] = model;
  if (backend == Backend::kOpenAiChat) {
    if (!spec.tokens.empty()) {
      return absl::InvalidArgumentError(
          "--backend openai-chat sends text: synthetic token-id prompts need --backend openai or grpc "
          "(or give --dataset)");
    }
    json msgs = json::array();
    if (spec.chat.empty()) {
      msgs.push_back({{"role", "user"}, {"content", spec.text}});
    } else {
      for (const auto& m : spec.chat) msgs.push_back({{"role", m.first}, {"content", m.second}});
    }
    j["messages"] = std::move(msgs);
  } else {
    if (!spec.chat.empty()) {
      return absl::InvalidArgumentError("chat messages in the dataset need --backend openai-chat (or grpc)");
    }
    j["prompt"] = spec.tokens.empty() ? json(spec.text) : json(spec.tokens);
  }
  j["max_tokens"] = spec.max_tokens;
  j["temperature"] = spec.temperature;
  if (spec.temperature > 0) j["seed"] = spec.seed;
  // vLLM's extension (beacon-serve, SGLang and llama.cpp's server take it too).
  if (spec.ignore_eos) j["ignore_eos"] = true;
  if (spec.kv.policy != "default") j["kv_policy"] = spec.kv.policy;  // beacon-serve's extensions
  if (spec.kv.budget > 0) j["kv_budget"] = spec.kv.budget;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  if (continuous_usage) j["stream_options"]["continuous_usage_stats"] = true;
  return j.dump();
}

int HttpStatusToCode(int s) {
  switch (s) {
    case 200: return 0;
    case 400: return 3;   // INVALID_ARGUMENT
    case 401: return 16;  // UNAUTHENTICATED
    case 403: return 7;   // PERMISSION_DENIED
    case 404: return 5;   // NOT_FOUND
    case 408:
    case 504: return 4;  // DEADLINE_EXCEEDED
    case 413: return 3;
    case 429: return 8;   // RESOURCE_EXHAUSTED
    case 501: return 12;  // UNIMPLEMENTED
    case 502:
    case 503: return 14;                // UNAVAILABLE
    default: return s >= 500 ? 13 : 2;  // INTERNAL, UNKNOWN
  }
}

SseReader::SseReader(RequestResult base) : r_(std::move(base)) {}

void SseReader::OnStatus(int http_status) { http_status_ = http_status; }

int SseReader::OnBytes(absl::string_view bytes, double t) {
  if (http_status_ != 200) {
    if (error_body_.size() < 4096) {
      const absl::string_view part = bytes.substr(0, 4096 - error_body_.size());
      error_body_.append(part.data(), part.size());
    }
    return 0;
  }
  new_tokens_ = 0;
  pending_.append(bytes.data(), bytes.size());
  // Events end at a blank line; \r\n line ends are allowed.
  while (true) {
    size_t end = pending_.find("\n\n");
    size_t crlf = pending_.find("\r\n\r\n");
    size_t sep = 2;
    if (crlf != std::string::npos && (end == std::string::npos || crlf < end)) {
      end = crlf;
      sep = 4;
    }
    if (end == std::string::npos) break;
    std::string event = pending_.substr(0, end);
    pending_.erase(0, end + sep);
    std::string data;
    for (absl::string_view line : absl::StrSplit(event, '\n')) {
      absl::ConsumeSuffix(&line, "\r");
      if (!absl::ConsumePrefix(&line, "data:")) continue;  // comments, event:, id:, retry:
      absl::ConsumePrefix(&line, " ");
      if (!data.empty()) data.push_back('\n');
      data.append(line.data(), line.size());
    }
    if (!data.empty()) OnEvent(data, t);
  }
  return new_tokens_;
}

void SseReader::OnEvent(absl::string_view data, double t) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  new_tokens_ += OnChunk(data, t);
}

int SseReader::OnChunk(absl::string_view data, double t) {
  json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    if (r_.error.empty()) r_.error = absl::StrCat("not a JSON chunk: ", data.substr(0, 200));
    r_.grpc_code = 13;
    return 0;
  }
  if (j.contains("error")) {  // an error event mid-stream (vLLM, beacon-serve)
    const json& e = j["error"];
    r_.error = e.is_object() ? e.value("message", e.dump()) : e.dump();
    r_.grpc_code = 13;  // INTERNAL
    return 0;
  }
  int32_t tokens = 0;
  bool text = false;
  const json* choices = j.contains("choices") && j["choices"].is_array() ? &j["choices"] : nullptr;
  if (choices != nullptr) {
    for (const json& c : *choices) {
      if (!c.is_object()) continue;
      auto non_empty = [](const json& o, const char* k) {
        return o.contains(k) && o[k].is_string() && !o[k].get_ref<const std::string&>().empty();
      };
      if (non_empty(c, "text")) text = true;
      if (c.contains("delta") && c["delta"].is_object() &&
          (non_empty(c["delta"], "content") || non_empty(c["delta"], "reasoning_content") ||
           non_empty(c["delta"], "reasoning"))) {
        text = true;
      }
      if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
        r_.finish_reason = c["finish_reason"].get<std::string>();
      }
    }
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) {
      r_.prompt_tokens = u["prompt_tokens"].get<int32_t>();
    }
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
      const int32_t now = u["completion_tokens"].get<int32_t>();
      // Continuous usage: this chunk's tokens are the growth since the last.
      if (text && usage_tokens_ >= 0 && now > usage_tokens_) tokens = now - usage_tokens_;
      if (text && usage_tokens_ < 0 && now > 0) tokens = now;
      usage_tokens_ = now;
      r_.server_completion_tokens = now;
    }
  }
  if (!text) return 0;
  if (tokens <= 0) tokens = 1;
  RecordArrival(&r_, t, tokens, &last_token_s_);
  return tokens;
}

RequestResult SseReader::Finish(const absl::Status& s, double t) {
  r_.e2e_s = t;
  if (!s.ok()) {
    r_.grpc_code = static_cast<int>(s.code());
    r_.error = std::string(s.message());
  } else if (http_status_ != 200) {
    r_.grpc_code = HttpStatusToCode(http_status_);
    r_.error = absl::StrCat("HTTP ", http_status_, ": ", absl::StrReplaceAll(error_body_, {{"\n", " "}}));
  } else if (r_.grpc_code == 0 && !done_ && r_.finish_reason.empty()) {
    r_.grpc_code = 14;  // UNAVAILABLE: the connection closed mid-stream
    r_.error = "the stream ended without a finish_reason or [DONE]";
  }
  // The server's count is the truth: it includes tokens sent in no chunk (EOS).
  if (r_.server_completion_tokens >= 0) r_.output_tokens = r_.server_completion_tokens;
  if (r_.grpc_code != 0 && r_.output_tokens == 0 && r_.finish_reason.empty()) r_.prompt_tokens = 0;
  return std::move(r_);
}

}  // namespace beacon::loadtest
