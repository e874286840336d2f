#include "loadtest/openai_client.h"

#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "loadtest/grpc_client.h"
#include "loadtest/openai_stream.h"

namespace beacon::loadtest {
namespace {

using json = nlohmann::json;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

absl::StatusOr<std::unique_ptr<OpenAiStreamClient>> OpenAiStreamClient::Connect(const ClientOptions& options) {
  std::unique_ptr<OpenAiStreamClient> c(new OpenAiStreamClient());
  c->options_ = options;
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(options.server);
  if (!url.ok()) return url.status();
  c->url_ = *url;
  absl::StatusOr<HttpReply> models =
      HttpFetch(c->url_, "GET", "/v1/models", "", options.api_key, options.connect_timeout_s);
  if (!models.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot reach an OpenAI-compatible server at ", c->url_.ToString(),
                                               " (--server): ", models.status().message()));
  }
  if (models->status != 200) {
    return absl::UnavailableError(absl::StrCat("GET ", c->url_.ToString(), "/v1/models: HTTP ", models->status, ": ",
                                               models->body.substr(0, 300)));
  }
  json j = json::parse(models->body, nullptr, false);
  const json* chosen = nullptr;
  if (!j.is_discarded() && j.contains("data") && j["data"].is_array()) {
    for (const json& m : j["data"]) {
      if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
      if (options.model.empty() || m["id"].get<std::string>() == options.model) {
        chosen = &m;
        break;
      }
    }
  }
  if (chosen == nullptr && options.model.empty()) {
    return absl::UnavailableError(absl::StrCat("GET ", c->url_.ToString(), "/v1/models lists no model: give --model"));
  }
  // A --model the list lacks is still sent: some servers list an alias only.
  c->info_.set_model(chosen != nullptr ? (*chosen)["id"].get<std::string>() : options.model);
  if (chosen != nullptr && chosen->contains("max_model_len") && (*chosen)["max_model_len"].is_number_integer()) {
    c->info_.set_context_length((*chosen)["max_model_len"].get<int32_t>());
  }
  absl::StatusOr<std::unique_ptr<HttpStreamPool>> pool = HttpStreamPool::Create(c->url_, options.connections);
  if (!pool.ok()) return pool.status();
  c->pool_ = *std::move(pool);
  return c;
}

OpenAiStreamClient::~OpenAiStreamClient() {
  while (inflight_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  pool_.reset();
}

void OpenAiStreamClient::Start(const RequestSpec& spec, bool warmup, Clock::time_point intended_start,
                               Clock::time_point run_start, DoneFn done, std::function<void(int)> on_tokens) {
  RequestResult base = StartedResult(spec, warmup, intended_start, run_start);
  absl::StatusOr<std::string> body = OpenAiBody(spec, options_.backend, info_.model(), options_.continuous_usage);
  if (!body.ok()) {  // options.cc rejects these workloads before the run; reported, not sent
    base.grpc_code = static_cast<int>(body.status().code());
    base.error = std::string(body.status().message());
    base.prompt_tokens = 0;
    done(std::move(base));
    return;
  }
  auto reader = std::make_shared<SseReader>(std::move(base));
  int64_t serial = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    serial = next_serial_++;
  }
  inflight_.fetch_add(1);
  HttpStreamHandlers h;
  h.on_status = [reader](int status) { reader->OnStatus(status); };
  h.on_body = [reader, intended_start, on_tokens](absl::string_view bytes) {
    const int n = reader->OnBytes(bytes, Seconds(Clock::now() - intended_start));
    if (n > 0 && on_tokens) on_tokens(n);
  };
  h.on_done = [this, reader, intended_start, serial, done = std::move(done)](const absl::Status& s) {
    RequestResult r = reader->Finish(s, Seconds(Clock::now() - intended_start));
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.erase(serial);
    }
    done(std::move(r));
    inflight_.fetch_sub(1);
  };
  std::lock_guard<std::mutex> lock(mu_);
  // Registered under the lock, so on_done (which erases under it) cannot run first.
  calls_[serial] =
      pool_->Post(OpenAiPath(options_.backend), *std::move(body), options_.api_key, options_.timeout_s, std::move(h));
}

void OpenAiStreamClient::CancelAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [serial, call] : calls_) call->Cancel();
}

absl::StatusOr<int32_t> OpenAiStreamClient::CountTokens(const std::string& text) {
  json body = {{"prompt", text}};
  if (!info_.model().empty()) body["model"] = info_.model();
  absl::StatusOr<HttpReply> r =
      HttpFetch(url_, "POST", "/tokenize", body.dump(), options_.api_key, options_.connect_timeout_s);
  if (!r.ok()) return r.status();
  json j = json::parse(r->body, nullptr, false);
  if (r->status != 200 || j.is_discarded() || !j.contains("count") || !j["count"].is_number_integer()) {
    return absl::UnavailableError(
        absl::StrCat("POST ", url_.ToString(), "/tokenize: HTTP ", r->status,
                     " without a token count (the server needs vLLM's /tokenize route): ", r->body.substr(0, 200)));
  }
  return j["count"].get<int32_t>();
}

}  // namespace beacon::loadtest
