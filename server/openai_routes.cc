#include "server/openai_routes.h"

#include <ctime>
#include <deque>
#include <optional>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "server/http_routes.h"
#include "server/openai_request.h"
#include "util/log.h"
#include "util/mutex.h"

namespace beacon {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string ErrorType(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return "server_error";
  }
}

HttpResponse Error(const absl::Status& s) {
  const int status = HttpStatusFor(s.code());
  return JsonError(status, std::string(s.message()), ErrorType(status));
}

// OpenAI's finish reasons: time limits read as `length` (a limit was hit),
// cancellation as `abort` (vLLM's word for it).
const char* OpenAiFinish(FinishReason f) {
  switch (f) {
    case FinishReason::kNone:  // never in a final record
    case FinishReason::kStop:
    case FinishReason::kEos:
    case FinishReason::kStopSequence: return "stop";
    case FinishReason::kLength:
    case FinishReason::kTimeLimit: return "length";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kError: return "error";
  }
  return "stop";
}

// `reasoning`: the server splits reasoning, so usage says how much was
// (OpenAI's completion_tokens_details.reasoning_tokens).
json Usage(const StreamFinal& f, bool reasoning) {
  json u = {{"prompt_tokens", f.prompt_tokens},
            {"completion_tokens", f.completion_tokens},
            {"total_tokens", f.prompt_tokens + f.completion_tokens}};
  if (reasoning) u["completion_tokens_details"] = {{"reasoning_tokens", f.reasoning_tokens}};
  return u;
}

// Hands the engine thread's events to the HTTP handler thread, which waits.
class HttpSink : public RequestSink {
 public:
  struct Event {
    enum { kTokens, kFinal, kRejected, kWake } kind;
    std::string text;
    TextPart part = TextPart::kAnswer;
    StreamFinal final;
    absl::Status status;
  };

  void OnTokens(std::span<const int32_t>, std::string_view text, TextPart part) override {
    Push({Event::kTokens, std::string(text), part, {}, {}});
  }
  void OnFinish(const StreamFinal& f) override { Push({Event::kFinal, {}, TextPart::kAnswer, f, {}}); }
  void OnRejected(const absl::Status& s) override { Push({Event::kRejected, {}, TextPart::kAnswer, {}, s}); }
  void Wake() { Push({Event::kWake, {}, TextPart::kAnswer, {}, {}}); }

  // Blocks until an event arrives.
  Event Next() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    while (events_.empty()) cv_.Wait(&mu_);
    Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

 private:
  void Push(Event e) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      events_.push_back(std::move(e));
    }
    cv_.Signal();
  }
  Mutex mu_;
  CondVar cv_;  // signalled (outside mu_) for each event pushed
  std::deque<Event> events_ ABSL_GUARDED_BY(mu_);
};

// A JSON body must say so. Browsers send cross-origin POSTs of form and
// text types without asking the server first (no CORS preflight), so
// accepting any type would let a web page drive a server on localhost;
// application/json always needs the preflight, which this server never
// grants. Parameters (charset) are allowed; the media type is compared
// case-insensitively (RFC 9110).
absl::Status CheckJsonContentType(const HttpRequest& req) {
  const std::string sent(req.header("Content-Type"));
  std::string media = sent.substr(0, sent.find(';'));
  const size_t first = media.find_first_not_of(" \t");
  media = first == std::string::npos ? "" : media.substr(first, media.find_last_not_of(" \t") + 1 - first);
  if (absl::AsciiStrToLower(media) == "application/json") return absl::OkStatus();
  if (sent.empty()) return absl::InvalidArgumentError("Content-Type must be application/json (none was sent)");
  // Shown as printable ASCII, cut short: header values may be kilobytes
  // long and hold any byte, and the error body must stay valid UTF-8.
  constexpr size_t kShown = 100;
  std::string shown = sent.substr(0, kShown);
  for (char& c : shown) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Content-Type must be application/json (got '", shown, sent.size() > kShown ? "...'" : "'", ")"));
}

class CompletionHandler {
 public:
  CompletionHandler(EngineLoop* loop, const Tokenizer* tokenizer, const OpenAiOptions* options, OpenAiEndpoint endpoint)
      : loop_(loop), tokenizer_(tokenizer), options_(options), endpoint_(endpoint) {}

  void operator()(const HttpRequest& req, HttpResponder& resp) const {
    const bool chat = endpoint_ == OpenAiEndpoint::kChatCompletions;
    if (absl::Status s = CheckJsonContentType(req); !s.ok()) {
      if (options_->on_rejected) options_->on_rejected(absl::InvalidArgumentError(s.message()));
      logging::Info("%s refused: %s", req.path, s.ToString());
      return (void)resp.Reply(JsonError(415, std::string(s.message()), "invalid_request_error"));
    }
    absl::StatusOr<OpenAiRequest> parsed =
        ParseOpenAiRequest(endpoint_, req.body, options_->served_model, options_->json_limits);
    if (!parsed.ok()) return Refuse(parsed.status(), "", resp);
    if (parsed->serve.request_id.empty()) {
      thread_local std::mt19937_64 rng(std::random_device{}());
      parsed->serve.request_id = absl::StrFormat("%s-%016x", chat ? "chatcmpl" : "cmpl", rng());
    }
    parsed->serve.arrival = SchedClock::now();
    absl::StatusOr<PreparedRequest> prepared = PrepareRequest(parsed->serve, *tokenizer_, options_->limits);
    if (!prepared.ok()) return Refuse(prepared.status(), parsed->serve.request_id, resp);

    auto sink = std::make_shared<HttpSink>();
    absl::StatusOr<RequestId> id = loop_->Submit(std::move(*prepared), sink);
    if (!id.ok()) return Refuse(id.status(), parsed->serve.request_id, resp);
    EngineLoop* loop = loop_;
    const RequestId rid = *id;
    resp.OnDisconnect([loop, rid, sink] {
      loop->Cancel(rid);
      sink->Wake();
    });

    Context ctx{parsed->serve.request_id, parsed->model, static_cast<int64_t>(std::time(nullptr)), chat,
                chat && options_->limits.reasoning.enabled()};
    // The first event decides between an error status and a 200.
    HttpSink::Event first = sink->Next();
    while (first.kind == HttpSink::Event::kWake && !resp.Disconnected()) first = sink->Next();
    if (first.kind == HttpSink::Event::kRejected) return (void)resp.Reply(Error(first.status));
    if (resp.Disconnected()) return;
    if (parsed->stream) {
      Stream(ctx, parsed->include_usage, std::move(first), sink.get(), resp);
    } else {
      Whole(ctx, std::move(first), sink.get(), resp);
    }
  }

 private:
  struct Context {
    std::string id;
    std::string model;
    int64_t created;
    bool chat;
    bool reasoning;  // chat on a reasoning model: reasoning_content is split out
  };

  // `request_id`: empty when the body did not parse as far as one.
  void Refuse(const absl::Status& s, std::string_view request_id, HttpResponder& resp) const {
    if (options_->on_rejected) options_->on_rejected(s);
    logging::Request(logging::Level::kInfo, request_id, "refused: %s", s.ToString());
    resp.Reply(Error(s));
  }

  json Envelope(const Context& c, bool chunk) const {
    return {{"id", c.id},
            {"object", c.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
            {"created", c.created},
            {"model", c.model}};
  }

  // `text` is of `part`; a whole message has the reasoning as well.
  json Choice(const Context& c, const std::string& text, bool chunk, const char* finish,
              TextPart part = TextPart::kAnswer, const std::string& reasoning = "") const {
    json choice = {{"index", 0}, {"finish_reason", finish != nullptr ? json(finish) : json(nullptr)}};
    const char* field = part == TextPart::kReasoning ? "reasoning_content" : "content";
    if (!c.chat) {
      choice["text"] = text;
      choice["logprobs"] = nullptr;
    } else if (chunk) {
      choice["delta"] = text.empty() && finish != nullptr ? json::object() : json{{field, text}};
    } else {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
      // vLLM's field: null when the model wrote no reasoning.
      if (c.reasoning) choice["message"]["reasoning_content"] = reasoning.empty() ? json(nullptr) : json(reasoning);
      choice["logprobs"] = nullptr;
    }
    return choice;
  }

  void Whole(const Context& c, HttpSink::Event e, HttpSink* sink, HttpResponder& resp) const {
    std::string text, reasoning;
    for (;; e = sink->Next()) {
      if (e.kind == HttpSink::Event::kTokens) (e.part == TextPart::kReasoning ? reasoning : text) += e.text;
      if (e.kind == HttpSink::Event::kFinal) break;
    }
    if (e.final.reason == FinishReason::kError) {
      return (void)resp.Reply(JsonError(500, "generation failed: " + e.final.error, "server_error"));
    }
    json body = Envelope(c, false);
    body["choices"] = json::array({Choice(c, text, false, OpenAiFinish(e.final.reason), TextPart::kAnswer, reasoning)});
    body["usage"] = Usage(e.final, c.reasoning);
    resp.Reply(HttpResponse{200, "application/json", {}, Dump(body)});
  }

  // Server-sent events: one `data: <chunk>` per message, then `data: [DONE]`.
  void Stream(const Context& c, bool include_usage, HttpSink::Event e, HttpSink* sink, HttpResponder& resp) const {
    if (!resp.BeginStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}})) {
      return;
    }
    auto send = [&](const json& chunk) { return resp.Write("data: " + Dump(chunk) + "\n\n"); };
    if (c.chat) {
      json head = Envelope(c, true);
      json choice = {{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"finish_reason", nullptr}};
      head["choices"] = json::array({choice});
      if (!send(head)) return;
    }
    for (;; e = sink->Next()) {
      if (resp.Disconnected()) return;  // the disconnect callback cancelled the request
      if (e.kind == HttpSink::Event::kTokens && !e.text.empty()) {
        json chunk = Envelope(c, true);
        chunk["choices"] = json::array({Choice(c, e.text, true, nullptr, e.part)});
        if (!send(chunk)) return;
      }
      if (e.kind == HttpSink::Event::kFinal) break;
    }
    if (e.final.reason == FinishReason::kError) {
      send({{"error", {{"message", "generation failed: " + e.final.error}, {"type", "server_error"}, {"code", 500}}}});
    } else {
      json last = Envelope(c, true);
      last["choices"] = json::array({Choice(c, "", true, OpenAiFinish(e.final.reason))});
      if (!send(last)) return;
      if (include_usage) {
        json usage = Envelope(c, true);
        usage["choices"] = json::array();
        usage["usage"] = Usage(e.final, c.reasoning);
        if (!send(usage)) return;
      }
    }
    if (resp.Write("data: [DONE]\n\n")) resp.End();
  }

  EngineLoop* loop_;
  const Tokenizer* tokenizer_;
  const OpenAiOptions* options_;
  OpenAiEndpoint endpoint_;
};

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
                   RequireApiKey(opts->api_key, [h, opts](const HttpRequest& q, HttpResponder& r) { h(q, r); }));
  }
  router->Handle(
      "GET", "/v1/models", RequireApiKey(opts->api_key, [opts](const HttpRequest&, HttpResponder& r) {
        json model = {{"id", opts->served_model},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "beacon-serve"},
                      {"max_model_len", opts->limits.context_length}};
        r.Reply(HttpResponse{200, "application/json", {}, Dump({{"object", "list"}, {"data", json::array({model})}})});
      }));
}

}  // namespace beacon
