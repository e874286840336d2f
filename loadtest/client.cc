#include "loadtest/client.h"

#include "absl/strings/str_cat.h"
#include "loadtest/grpc_client.h"
#include "loadtest/openai_client.h"

namespace beacon::loadtest {

absl::string_view BackendName(Backend b) {
  switch (b) {
    case Backend::kGrpc: return "grpc";
    case Backend::kOpenAi: return "openai";
    case Backend::kOpenAiChat: return "openai-chat";
  }
  return "grpc";
}

absl::StatusOr<Backend> ParseBackend(absl::string_view name) {
  for (Backend b : {Backend::kGrpc, Backend::kOpenAi, Backend::kOpenAiChat}) {
    if (name == BackendName(b)) return b;
  }
  return absl::InvalidArgumentError(absl::StrCat("--backend must be grpc, openai or openai-chat, got '", name, "'"));
}

absl::StatusOr<std::unique_ptr<StreamClient>> ConnectClient(const ClientOptions& options) {
  if (options.backend == Backend::kGrpc) {
    absl::StatusOr<std::unique_ptr<GrpcStreamClient>> c = GrpcStreamClient::Connect(options);
    if (!c.ok()) return c.status();
    return std::unique_ptr<StreamClient>(std::move(*c));
  }
  absl::StatusOr<std::unique_ptr<OpenAiStreamClient>> c = OpenAiStreamClient::Connect(options);
  if (!c.ok()) return c.status();
  return std::unique_ptr<StreamClient>(std::move(*c));
}

RequestResult StartedResult(const RequestSpec& spec, bool warmup, Clock::time_point intended_start,
                            Clock::time_point run_start) {
  RequestResult r;
  r.index = spec.index;
  r.warmup = warmup;
  r.kv = spec.kv.Label();
  r.start_s = std::chrono::duration<double>(intended_start - run_start).count();
  r.prompt_tokens = static_cast<int32_t>(spec.tokens.size());
  r.max_tokens = spec.max_tokens;
  return r;
}

void RecordArrival(RequestResult* r, double t, int32_t n, double* last_token_s) {
  if (r->output_tokens == 0) {
    r->ttft_s = t;
    for (int32_t i = 1; i < n; ++i) r->itl_s.push_back(0.0);  // arrived with the first
  } else {
    for (int32_t i = 0; i < n; ++i) r->itl_s.push_back((t - *last_token_s) / n);
  }
  *last_token_s = t;
  r->output_tokens += n;
}

}  // namespace beacon::loadtest
