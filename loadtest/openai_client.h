// The OpenAI backends of the load generator: streamed /v1/completions
// (`openai`) or /v1/chat/completions (`openai-chat`) over HTTP/1.1 with
// server-sent events, against any OpenAI-compatible server (beacon-serve,
// vLLM, SGLang, llama.cpp's server). One connection per request, over
// `connections` I/O threads; the wire format is openai_stream.h.
#ifndef BEACON_LOADTEST_OPENAI_CLIENT_H_
#define BEACON_LOADTEST_OPENAI_CLIENT_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "loadtest/client.h"
#include "loadtest/http_client.h"

namespace beacon::loadtest {

class OpenAiStreamClient final : public StreamClient {
 public:
  // GET /v1/models: the model to name (options.model, else the first listed)
  // and its max_model_len where the server gives one.
  static absl::StatusOr<std::unique_ptr<OpenAiStreamClient>> Connect(const ClientOptions& options);
  ~OpenAiStreamClient() override;

  void Start(const RequestSpec& spec, bool warmup, Clock::time_point intended_start, Clock::time_point run_start,
             DoneFn done, std::function<void(int)> on_tokens = nullptr) override;
  void CancelAll() override;
  // POST /tokenize {"prompt"} -> "count" (vLLM's and beacon-serve's route).
  absl::StatusOr<int32_t> CountTokens(const std::string& text) override;

 private:
  OpenAiStreamClient() = default;

  HttpUrl url_;
  std::unique_ptr<HttpStreamPool> pool_;
  std::mutex mu_;
  std::unordered_map<int64_t, std::shared_ptr<HttpStream>> calls_;  // GUARDED_BY(mu_), by serial
  int64_t next_serial_ = 0;                                         // GUARDED_BY(mu_)
  std::atomic<int64_t> inflight_{0};
};

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_OPENAI_CLIENT_H_
