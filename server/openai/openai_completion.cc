#include "server/openai/openai_completion.h"

#include <ctime>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/tools/tool_parser.h"
#include "model/tokenizer/unicode.h"
#include "nlohmann/json.hpp"
#include "server/openai/completion_output.h"
#include "server/openai/completion_sink.h"
#include "server/openai/openai_logprobs.h"
#include "util/log.h"

namespace beacon {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string ErrorType(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 415: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return "server_error";
  }
}

// OpenAI's `user` (an end-user id) as logged: valid UTF-8, at most 128
// bytes, control characters as '?' (it is the client's text).
std::string LoggableUser(const std::string& user) {
  std::string u = SanitizeUtf8(std::string_view(user).substr(0, 128));
  for (char& c : u) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return u;
}

}  // namespace

HttpResponse OpenAiError(int http_status, const std::string& message, const std::string& param) {
  const json body = {{"error",
                      {{"message", message},
                       {"type", ErrorType(http_status)},
                       {"param", param.empty() ? json(nullptr) : json(param)},
                       {"code", http_status}}}};
  return HttpResponse{http_status, "application/json", {}, Dump(body)};
}

HttpResponse OpenAiError(const absl::Status& s) {
  return OpenAiError(HttpStatusFor(s.code()), std::string(s.message()), FieldOf(std::string(s.message())));
}

// A JSON body must say so (the header has the contract). Browsers send cross-origin POSTs of form and
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

void CompletionHandler::Refuse(const absl::Status& s, std::string_view request_id, HttpResponder& resp) const {
  options_->door.Refused(s, request_id);
  resp.Reply(OpenAiError(s));
}

void CompletionHandler::operator()(const HttpRequest& req, HttpResponder& resp) const {
  const bool chat = endpoint_ == OpenAiEndpoint::kChatCompletions;
  if (absl::Status s = CheckJsonContentType(req); !s.ok()) {
    if (options_->door.on_rejected) options_->door.on_rejected(absl::InvalidArgumentError(s.message()));
    logging::Info("%s refused: %s", req.path, s.ToString());
    return (void)resp.Reply(OpenAiError(415, std::string(s.message())));
  }
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(endpoint_, req.body, options_->served_model, options_->json_limits);
  if (!parsed.ok()) return Refuse(parsed.status(), "", resp);
  if (parsed->serve.request_id.empty()) {
    thread_local std::mt19937_64 rng(std::random_device{}());
    parsed->serve.request_id = absl::StrFormat("%s-%016x", chat ? "chatcmpl" : "cmpl", rng());
  }
  parsed->serve.arrival = SchedClock::now();
  absl::StatusOr<PreparedRequest> prepared =
      options_->door.Prepare(parsed->serve, req.header("authorization"), *tokenizer_);
  if (!prepared.ok()) return (void)resp.Reply(OpenAiError(prepared.status()));  // counted and logged
  if (!parsed->user.empty()) {
    logging::Request(logging::Level::kInfo, parsed->serve.request_id, "user %s", LoggableUser(parsed->user));
  }

  CompletionContext ctx;
  ctx.id = parsed->serve.request_id;
  ctx.model = parsed->model;
  ctx.created = static_cast<int64_t>(std::time(nullptr));
  ctx.chat = chat;
  ctx.reasoning = chat && options_->door.limits.reasoning.enabled();
  ctx.logprobs = parsed->serve.logprobs >= 0;
  ctx.tokens_as_ids = parsed->tokens_as_ids;
  ctx.echo = parsed->echo;
  if (ctx.echo) {
    ctx.echo_text = parsed->serve.input == ServeRequest::Input::kText
                        ? parsed->serve.text
                        : SanitizeUtf8(tokenizer_->Decode(prepared->prompt));
  }
  ctx.prompt_logprobs_field = parsed->prompt_logprobs_field;
  ctx.include_usage = parsed->include_usage;
  ctx.continuous_usage = parsed->continuous_usage;
  ctx.prompt_tokens = static_cast<int32_t>(prepared->prompt.size());
  ctx.tool_format = prepared->tool_format;
  ctx.tool_names = prepared->tool_names;

  const int32_t n = prepared->samples;
  auto queue = std::make_shared<CompletionQueue>();
  std::vector<std::shared_ptr<RequestSink>> sinks;
  for (int32_t i = 0; i < n; ++i) sinks.push_back(std::make_shared<CompletionSink>(queue, i));
  absl::StatusOr<RequestId> first_id = loop_->SubmitGroup(ExpandSamples(*prepared), std::move(sinks));
  if (!first_id.ok()) return Refuse(first_id.status(), parsed->serve.request_id, resp);
  EngineLoop* loop = loop_;
  const RequestId first = *first_id;
  auto cancel_all = [loop, first, n] {
    for (int32_t i = 0; i < n; ++i) loop->Cancel(first + i);
  };
  resp.OnDisconnect([cancel_all, queue] {
    cancel_all();
    queue->Wake();
  });

  // The first event decides between an error status and a 200: a sample
  // the scheduler refuses is refused when it is queued, before any step.
  CompletionEvent e = queue->Next();
  while (e.kind == CompletionEvent::kWake && !resp.Disconnected()) e = queue->Next();
  if (e.kind == CompletionEvent::kRejected) {
    cancel_all();  // the samples that were queued
    return (void)resp.Reply(OpenAiError(e.status));
  }
  if (resp.Disconnected()) return;
  std::vector<CompletionOutput> outs;
  for (int32_t i = 0; i < n; ++i) outs.emplace_back(ctx, tokenizer_, i);
  if (parsed->stream) return Stream(ctx, std::move(e), queue.get(), &outs, resp);

  int32_t finals = 0;
  for (;; e = queue->Next()) {
    // A group is queued whole before any step runs (SubmitGroup), so a
    // refusal comes first; this one would be a contract break: end cleanly.
    if (e.kind == CompletionEvent::kRejected) {
      cancel_all();
      return (void)resp.Reply(OpenAiError(e.status));
    }
    if (e.kind == CompletionEvent::kWake) {
      if (resp.Disconnected()) return;
      continue;
    }
    CompletionOutput& out = outs[e.index];
    if (e.kind == CompletionEvent::kPrompt) out.Prompt(e);
    if (e.kind == CompletionEvent::kTokens) {
      (e.part == TextPart::kReasoning ? out.reasoning : out.text) += e.text;
      out.lp.insert(out.lp.end(), e.logprobs.begin(), e.logprobs.end());
    }
    if (e.kind == CompletionEvent::kFinal) {
      out.final = e.final;
      if (++finals == n) break;
    }
  }
  json body = outs[0].Envelope(false);
  body["choices"] = json::array();
  int32_t completion = 0, reasoning = 0;
  for (CompletionOutput& out : outs) {
    if (out.final->reason == FinishReason::kError) {
      return (void)resp.Reply(OpenAiError(500, "generation failed: " + out.final->error));
    }
    body["choices"].push_back(out.WholeChoice(OpenAiFinish(out.final->reason)));
    completion += out.final->completion_tokens;
    reasoning += out.final->reasoning_tokens;
  }
  if (chat && ctx.prompt_logprobs_field) body["prompt_logprobs"] = outs[0].PromptLogprobs();
  // The prompt once, the completions of every sample (OpenAI's usage for n).
  body["usage"] = Usage(outs[0].final->prompt_tokens, completion, ctx.reasoning, reasoning,
                        outs[0].final->cached_tokens_reported ? outs[0].final->cached_tokens : -1);
  resp.Reply(HttpResponse{200, "application/json", {}, Dump(body)});
}

// Server-sent events: one `data: <chunk>` per message (a choice each, by
// index), then `data: [DONE]` once every sample has finished.
void CompletionHandler::Stream(const CompletionContext& ctx, CompletionEvent e, CompletionQueue* queue,
                               std::vector<CompletionOutput>* outs, HttpResponder& resp) const {
  if (!resp.BeginStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}})) {
    return;
  }
  const int32_t n = static_cast<int32_t>(outs->size());
  // Continuous usage: tokens streamed so far, per sample; a finished one
  // counts its final record's (which includes an unstreamed EOS).
  std::vector<int32_t> tokens_of(outs->size(), 0);
  int32_t completion_tokens = 0;
  auto send = [&](json chunk) {
    if (ctx.continuous_usage) chunk["usage"] = Usage(ctx.prompt_tokens, completion_tokens, false, 0);
    return resp.Write("data: " + Dump(chunk) + "\n\n");
  };
  auto head = [&](CompletionOutput& out) {
    json choice = out.HeadChoice();
    if (choice.is_null()) return true;
    json chunk = out.Envelope(true);
    if (ctx.chat && ctx.prompt_logprobs_field) chunk["prompt_logprobs"] = out.PromptLogprobs();
    chunk["choices"] = json::array({choice});
    return send(chunk);
  };
  // Prompt logprobs arrive before a sample's first token: its head waits for them.
  const bool wait_for_prompt = ctx.prompt_logprobs_field || (ctx.echo && ctx.logprobs);
  for (CompletionOutput& out : *outs) {
    if (!wait_for_prompt && !head(out)) return;
  }
  int32_t finals = 0, reasoning = 0, completion = 0, cached = 0;
  std::string error;
  for (;; e = queue->Next()) {
    if (resp.Disconnected()) return;  // the disconnect callback cancelled the request
    if (e.kind == CompletionEvent::kWake) continue;
    if (e.kind == CompletionEvent::kRejected) {  // not expected after the first event: counted as a failure
      if (error.empty()) error = std::string(e.status.message());
      if (++finals == n) break;
      continue;
    }
    CompletionOutput& out = (*outs)[e.index];
    if (e.kind == CompletionEvent::kPrompt) {
      out.Prompt(e);
      if (!head(out)) return;
      continue;
    }
    if (!out.head_sent() && !head(out)) return;
    if (e.kind == CompletionEvent::kTokens) {
      tokens_of[e.index] += static_cast<int32_t>(e.ids.size());
      completion_tokens += static_cast<int32_t>(e.ids.size());
      ParsedAnswer piece = e.part == TextPart::kAnswer ? out.Answer(e.text, false) : ParsedAnswer{e.text, {}};
      if (!piece.content.empty() || !e.logprobs.empty()) {
        json chunk = out.Envelope(true);
        chunk["choices"] = json::array({out.ChunkChoice(piece.content, e.part, e.logprobs, nullptr)});
        if (!send(chunk)) return;
      }
      if (!piece.calls.empty()) {
        json chunk = out.Envelope(true);
        chunk["choices"] = json::array({out.CallsChoice(piece.calls)});
        if (!send(chunk)) return;
      }
      continue;
    }
    // kFinal: this choice's finish chunk.
    completion += e.final.completion_tokens;
    reasoning += e.final.reasoning_tokens;
    // The prompt's, as run by sample 0; -1 (no prompt_tokens_details) when withheld.
    if (e.index == 0) cached = e.final.cached_tokens_reported ? e.final.cached_tokens : -1;
    completion_tokens += e.final.completion_tokens - tokens_of[e.index];
    tokens_of[e.index] = e.final.completion_tokens;
    if (e.final.reason == FinishReason::kError) {
      if (error.empty()) error = e.final.error;
    } else {
      // What the call parser still held: text, or a call the end closed.
      ParsedAnswer rest = out.Answer("", true);
      if (!rest.content.empty()) {
        json chunk = out.Envelope(true);
        chunk["choices"] = json::array({out.ChunkChoice(rest.content, TextPart::kAnswer, {}, nullptr)});
        if (!send(chunk)) return;
      }
      if (!rest.calls.empty()) {
        json chunk = out.Envelope(true);
        chunk["choices"] = json::array({out.CallsChoice(rest.calls)});
        if (!send(chunk)) return;
      }
      json last = out.Envelope(true);
      last["choices"] =
          json::array({out.ChunkChoice("", TextPart::kAnswer, {}, FinishWithCalls(e.final.reason, out.sent_calls()))});
      if (!send(last)) return;
    }
    if (++finals == n) break;
  }
  if (!error.empty()) {
    send(json::parse(OpenAiError(500, "generation failed: " + error).body));
  } else if (ctx.include_usage) {
    json usage = (*outs)[0].Envelope(true);
    usage["choices"] = json::array();
    usage["usage"] = Usage(e.final.prompt_tokens, completion, ctx.reasoning, reasoning, cached);
    if (!resp.Write("data: " + Dump(usage) + "\n\n")) return;
  }
  if (resp.Write("data: [DONE]\n\n")) resp.End();
}

}  // namespace beacon
