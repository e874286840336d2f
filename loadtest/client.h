// The load generator's view of a server: a StreamClient starts streamed
// generations and reports each one's RequestResult when its stream ends.
// Three backends implement it (ConnectClient picks one):
// - grpc: beacon.v1 Generate streams to beacon-serve (grpc_client.h);
// - openai / openai-chat: server-sent-event streams of /v1/completions or
//   /v1/chat/completions on any OpenAI-compatible server (openai_client.h).
//
// Token arrival times are taken with steady_clock as each message is
// received, on the client thread that delivers it.
#ifndef BEACON_LOADTEST_CLIENT_H_
#define BEACON_LOADTEST_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/stats.h"
#include "loadtest/workload.h"
#include "proto/beacon/v1/beacon.pb.h"

namespace beacon::loadtest {

using Clock = std::chrono::steady_clock;

enum class Backend {
  kGrpc,        // beacon.v1 over gRPC (beacon-serve only)
  kOpenAi,      // POST /v1/completions, stream: true
  kOpenAiChat,  // POST /v1/chat/completions, stream: true
};
// "grpc", "openai", "openai-chat".
absl::string_view BackendName(Backend b);
// The inverse of BackendName; an unknown name is INVALID_ARGUMENT naming --backend.
absl::StatusOr<Backend> ParseBackend(absl::string_view name);

struct ClientOptions {
  Backend backend = Backend::kGrpc;
  // grpc: HOST:PORT; openai*: a URL, http://HOST[:PORT][/PREFIX] (the API
  // paths, /v1/..., are appended to PREFIX).
  std::string server = "127.0.0.1:50051";
  int32_t connections = 4;        // grpc: channels (TCP connections); openai*: I/O threads
  std::string api_key;            // sent as "authorization: Bearer KEY" when set
  std::string tls_ca_pem;         // grpc: PEM roots, connect over TLS when set
  double timeout_s = 600;         // per-request deadline
  double connect_timeout_s = 10;  // for the initial model query
  std::string model;              // openai*: the "model" field; empty = the first of GET /v1/models
  bool continuous_usage = false;  // openai*: ask for usage in every chunk (vLLM's continuous_usage_stats)
};

class StreamClient {
 public:
  // REQUIRES: no call in flight (the runner waits for every call to end).
  virtual ~StreamClient() = default;

  // The server's model as far as the backend tells it: the gRPC backend has
  // the whole GetModelInfo; the OpenAI ones the model name and, where the
  // server gives it (vLLM's max_model_len), the context length.
  const v1::ModelInfo& model_info() const { return info_; }

  // Called exactly once per Start(), on a client thread, after the stream ended.
  using DoneFn = std::function<void(RequestResult)>;
  // Starts one streamed generation; never blocks on the network. Latencies
  // are measured from `intended_start`; start_s is its offset from
  // `run_start`. `on_tokens(n)` (optional) is called on each message carrying
  // n tokens.
  virtual void Start(const RequestSpec& spec, bool warmup, Clock::time_point intended_start,
                     Clock::time_point run_start, DoneFn done, std::function<void(int)> on_tokens = nullptr) = 0;

  // Cancels every call in flight; each still reports through its DoneFn.
  virtual void CancelAll() = 0;

  // The number of tokens the server's tokenizer makes of `text` (raw, no
  // chat template): for dataset reference lengths. Blocking.
  virtual absl::StatusOr<int32_t> CountTokens(const std::string& text) = 0;

 protected:
  // What every backend knows once connected (its Connect sets them).
  ClientOptions options_;
  v1::ModelInfo info_;
};

// What every backend's result starts as: the request's index, warm-up flag,
// KV label and sizes, and its intended start's offset from `run_start`
// (prompt_tokens: the token ids sent, 0 for text and chat until the server's
// usage fills it).
RequestResult StartedResult(const RequestSpec& spec, bool warmup, Clock::time_point intended_start,
                            Clock::time_point run_start);
// `n` tokens that arrived together, `t` seconds after the intended start:
// the first arrival sets TTFT (the others that came with it get ITL 0);
// later ones share the gap since the previous arrival (`last_token_s`)
// evenly, so a request's ITLs sum to last token - first token.
void RecordArrival(RequestResult* r, double t, int32_t n, double* last_token_s);

// Connects the backend options.backend names: the model query opens the
// connections before any timed request. An unreachable server or a refused
// query is an error naming the address.
absl::StatusOr<std::unique_ptr<StreamClient>> ConnectClient(const ClientOptions& options);

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_CLIENT_H_
