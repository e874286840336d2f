#include "loadtest/grpc_client.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "proto/beacon/v1/finish_reason_name.h"

namespace beacon::loadtest {
namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

v1::GenerateRequest ToProto(const RequestSpec& spec) {
  v1::GenerateRequest req;
  req.set_request_id(absl::StrCat("loadtest-", spec.index));
  if (!spec.tokens.empty()) {
    req.mutable_tokens()->mutable_ids()->Add(spec.tokens.begin(), spec.tokens.end());
  } else if (!spec.chat.empty()) {
    for (const auto& [role, content] : spec.chat) {
      v1::ChatMessage* m = req.mutable_chat()->add_messages();
      m->set_role(role);
      m->set_content(content);
    }
  } else {
    req.set_text(spec.text);
  }
  req.mutable_stopping()->set_max_tokens(spec.max_tokens);
  req.mutable_stopping()->set_ignore_eos(spec.ignore_eos);
  req.mutable_sampling()->set_temperature(spec.temperature);
  if (spec.temperature > 0) req.mutable_sampling()->set_seed(spec.seed);
  if (spec.kv.policy != "default") req.mutable_kv()->set_policy(spec.kv.policy);
  if (spec.kv.budget > 0) req.mutable_kv()->set_budget(spec.kv.budget);
  return req;
}

// One streamed Generate. Owns itself: deleted in OnDone, after reporting.
// gRPC serialises a reactor's reactions, so its fields need no lock.
class GenerateCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  GenerateCall(GrpcStreamClient* owner, RequestResult base, Clock::time_point intended, GrpcStreamClient::DoneFn done,
               std::function<void(int)> on_tokens)
      : owner_(owner),
        result_(std::move(base)),
        intended_(intended),
        done_(std::move(done)),
        on_tokens_(std::move(on_tokens)) {}

  void Go(v1::BeaconService::Stub* stub, v1::GenerateRequest req, const ClientOptions& opt) {
    req_ = std::move(req);
    if (!opt.api_key.empty()) ctx_.AddMetadata("authorization", "Bearer " + opt.api_key);
    ctx_.set_deadline(std::chrono::system_clock::now() +
                      std::chrono::microseconds(static_cast<int64_t>(opt.timeout_s * 1e6)));
    stub->async()->Generate(&ctx_, &req_, this);
    StartRead(&msg_);
    StartCall();
  }

  void Cancel() { ctx_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    const double t = Seconds(Clock::now() - intended_);
    const int n = msg_.token_ids_size();
    if (n > 0) {
      RecordArrival(&result_, t, n, &last_token_s_);
      if (on_tokens_) on_tokens_(n);
    }
    if (msg_.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      result_.finish_reason = v1::FinishReasonName(msg_.finish_reason());
      result_.server_completion_tokens = msg_.usage().completion_tokens();
      if (result_.prompt_tokens == 0) result_.prompt_tokens = msg_.usage().prompt_tokens();
      if (!msg_.error().empty()) result_.error = msg_.error();
    }
    StartRead(&msg_);
  }

  void OnDone(const grpc::Status& s) override {
    result_.e2e_s = Seconds(Clock::now() - intended_);
    result_.grpc_code = static_cast<int>(s.error_code());
    if (!s.ok()) result_.error = s.error_message();
    // Refused before running (no message at all): the server ran none of it.
    if (!s.ok() && result_.output_tokens == 0 && result_.finish_reason.empty()) result_.prompt_tokens = 0;
    owner_->Unregister(this);
    done_(std::move(result_));
    delete this;
  }

 private:
  GrpcStreamClient* owner_;
  RequestResult result_;
  Clock::time_point intended_;
  GrpcStreamClient::DoneFn done_;
  std::function<void(int)> on_tokens_;
  grpc::ClientContext ctx_;
  v1::GenerateRequest req_;
  v1::GenerateResponse msg_;
  double last_token_s_ = 0;
};

absl::StatusOr<std::unique_ptr<GrpcStreamClient>> GrpcStreamClient::Connect(const ClientOptions& options) {
  std::unique_ptr<GrpcStreamClient> c(new GrpcStreamClient());
  c->options_ = options;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!options.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_ca_pem;
    creds = grpc::SslCredentials(ssl);
  }
  for (int32_t i = 0; i < options.connections; ++i) {
    grpc::ChannelArguments args;
    // A channel of its own subchannel pool, and args that differ per channel,
    // so each channel opens its own TCP connection instead of sharing one.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("beacon.loadtest.channel", i);
    args.SetMaxReceiveMessageSize(64 << 20);
    c->stubs_.push_back(v1::BeaconService::NewStub(grpc::CreateCustomChannel(options.server, creds, args)));
  }
  for (size_t i = 0; i < c->stubs_.size(); ++i) {
    grpc::ClientContext ctx;
    if (!options.api_key.empty()) ctx.AddMetadata("authorization", "Bearer " + options.api_key);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(options.connect_timeout_s * 1e3)));
    v1::ModelInfo info;
    grpc::Status s = c->stubs_[i]->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
    if (!s.ok()) {
      return absl::UnavailableError(absl::StrCat("cannot reach beacon-serve at ", options.server, " (--server): ",
                                                 GrpcCodeName(s.error_code()), ": ", s.error_message()));
    }
    if (i == 0) c->info_ = std::move(info);
  }
  return c;
}

GrpcStreamClient::~GrpcStreamClient() {
  while (inflight_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void GrpcStreamClient::Start(const RequestSpec& spec, bool warmup, Clock::time_point intended_start,
                             Clock::time_point run_start, DoneFn done, std::function<void(int)> on_tokens) {
  RequestResult base = StartedResult(spec, warmup, intended_start, run_start);
  auto* call = new GenerateCall(this, std::move(base), intended_start, std::move(done), std::move(on_tokens));
  Register(call);
  v1::BeaconService::Stub* stub = stubs_[next_stub_.fetch_add(1) % stubs_.size()].get();
  call->Go(stub, ToProto(spec), options_);
}

void GrpcStreamClient::CancelAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (GenerateCall* c : calls_) c->Cancel();
}

void GrpcStreamClient::Register(GenerateCall* call) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.insert(call);
  inflight_.fetch_add(1);
}

void GrpcStreamClient::Unregister(GenerateCall* call) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(call);
  inflight_.fetch_sub(1);
}

absl::StatusOr<int32_t> GrpcStreamClient::CountTokens(const std::string& text) {
  grpc::ClientContext ctx;
  if (!options_.api_key.empty()) ctx.AddMetadata("authorization", "Bearer " + options_.api_key);
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(options_.connect_timeout_s * 1e3)));
  v1::TokenizeRequest req;
  req.set_text(text);
  v1::TokenizeResponse resp;
  grpc::Status s = stubs_[0]->Tokenize(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("Tokenize at ", options_.server, ": ", GrpcCodeName(s.error_code()), ": ", s.error_message()));
  }
  return resp.ids_size();
}

}  // namespace beacon::loadtest
