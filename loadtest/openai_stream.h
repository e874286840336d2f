// The OpenAI wire format of one load-test request, without the network: the
// JSON body of a streamed /v1/completions or /v1/chat/completions request,
// and the reader that turns the server-sent events of its response into a
// RequestResult (token times, finish reason, usage).
//
// Measurement (as vLLM's benchmark_serving): a chunk whose choice carries
// text (`text`, or `delta.content` / `delta.reasoning_content` in chat) is a
// token arrival. It counts as one token, or, when the chunk carries usage
// (vLLM's and beacon-serve's continuous_usage_stats), as the growth of
// usage.completion_tokens since the previous chunk, so the per-token ITLs
// stay exact when a chunk holds several tokens. output_tokens is the final
// usage.completion_tokens when the server sends usage (include_usage), else
// the tokens counted; prompt_tokens is usage.prompt_tokens, else the ids sent.
#ifndef BEACON_LOADTEST_OPENAI_STREAM_H_
#define BEACON_LOADTEST_OPENAI_STREAM_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/client.h"
#include "loadtest/stats.h"
#include "loadtest/workload.h"

namespace beacon::loadtest {

// The API path of a backend: "/v1/completions" or "/v1/chat/completions".
absl::string_view OpenAiPath(Backend backend);

// The streamed request body for `spec`. openai takes token ids or text;
// openai-chat takes chat messages or text (sent as one user message). A
// spec the endpoint cannot carry is INVALID_ARGUMENT saying which backend it needs.
absl::StatusOr<std::string> OpenAiBody(const RequestSpec& spec, Backend backend, const std::string& model,
                                       bool continuous_usage);

// The gRPC status code (the load tester's error vocabulary) of an HTTP status.
int HttpStatusToCode(int http_status);

class SseReader {
 public:
  // `base` holds the request's identity (index, warmup, kv, start_s,
  // prompt_tokens of ids sent, max_tokens).
  explicit SseReader(RequestResult base);

  void OnStatus(int http_status);
  // Body bytes that arrived `t` seconds after the intended start. Returns the
  // tokens they completed (for the progress line).
  int OnBytes(absl::string_view bytes, double t);
  // The response ended at `t` with the transport status `s`. Call once.
  RequestResult Finish(const absl::Status& s, double t);

 private:
  void OnEvent(absl::string_view data, double t);
  int OnChunk(absl::string_view data, double t);

  RequestResult r_;
  int http_status_ = 0;
  std::string pending_;        // bytes of an incomplete event
  std::string error_body_;     // a non-200 response's body
  int32_t usage_tokens_ = -1;  // the last usage.completion_tokens seen
  double last_token_s_ = 0;
  bool done_ = false;  // data: [DONE]
  int new_tokens_ = 0;
};

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_OPENAI_STREAM_H_
