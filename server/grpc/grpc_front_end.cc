#include "server/grpc/grpc_front_end.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/grpc/accept_probe.h"
#include "util/log.h"

namespace beacon {
namespace {

using Clock = std::chrono::system_clock;

// Where the self-check dials: the bound address, or loopback for a wildcard.
std::string CheckHost(const std::string& host) {
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") return "127.0.0.1";
  return host;
}
std::string CheckTarget(const std::string& host, int port) {
  const std::string h = CheckHost(host);
  if (h.find(':') != std::string::npos && h.front() != '[') return absl::StrCat("[", h, "]:", port);
  return absl::StrCat(h, ":", port);
}

int Ms(std::chrono::milliseconds d) { return static_cast<int>(std::min<int64_t>(d.count(), INT32_MAX)); }

}  // namespace

SelfCheckVerdict JudgeSelfCheck(bool answered, bool accepts, std::chrono::steady_clock::duration elapsed,
                                std::chrono::milliseconds timeout) {
  if (answered) return SelfCheckVerdict::kServing;
  if (elapsed > 2 * timeout) return SelfCheckVerdict::kInconclusive;
  return accepts ? SelfCheckVerdict::kBusy : SelfCheckVerdict::kFailed;
}

GrpcFrontEnd::Instance::~Instance() {
  if (server != nullptr) server->Shutdown(Clock::now());  // no-op when already shut down
  server.reset();                                         // before the services it dispatches to
}

GrpcFrontEnd::GrpcFrontEnd(GrpcFrontEndOptions options, ServiceFactory services)
    : options_(std::move(options)), make_services_(std::move(services)) {}

absl::StatusOr<std::unique_ptr<GrpcFrontEnd>> GrpcFrontEnd::Start(GrpcFrontEndOptions options,
                                                                  ServiceFactory services) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("grpc port must be in [0, 65535], got ", options.port));
  }
  if (options.check_interval.count() < 1 || options.check_timeout.count() < 1) {
    return absl::InvalidArgumentError("grpc self-check interval and timeout must be at least 1 ms");
  }
  if (options.failures_to_restart < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("grpc failures_to_restart must be >= 1, got ", options.failures_to_restart));
  }
  if (options.handshake_timeout.count() < 1) {
    return absl::InvalidArgumentError("grpc handshake timeout must be at least 1 ms");
  }
  // Process-wide switches, read by every ServerBuilder from here on.
  grpc::EnableDefaultHealthCheckService(true);
  if (options.reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  std::unique_ptr<GrpcFrontEnd> fe(new GrpcFrontEnd(std::move(options), std::move(services)));
  std::string error;
  int bound = 0;
  std::unique_ptr<Instance> first = fe->Build(fe->options_.port, &bound, &error);
  if (first == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", fe->options_.host, ":", fe->options_.port, error));
  }
  fe->port_ = bound;
  {
    MutexLock lock(&fe->mu_);
    fe->current_ = std::move(first);
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!fe->CheckOnce()) {
    if (std::chrono::steady_clock::now() > give_up) {
      return absl::UnavailableError(absl::StrCat("gRPC on port ", bound, " does not answer its own health check"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  fe->serving_.store(true);
  fe->watchdog_ = std::thread([f = fe.get()] { f->Watch(); });
  return fe;
}

GrpcFrontEnd::~GrpcFrontEnd() { Shutdown(Clock::now()); }

std::unique_ptr<GrpcFrontEnd::Instance> GrpcFrontEnd::Build(int port, int* bound, std::string* error) {
  auto inst = std::make_unique<Instance>();
  inst->services = make_services_();
  grpc::ServerBuilder builder;
  int chosen = 0;
  builder.AddListeningPort(absl::StrCat(options_.host, ":", port), options_.credentials, &chosen);
  for (auto& s : inst->services) builder.RegisterService(s.get());
  // A replacement binds while the retired server may still hold the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 1);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, Ms(options_.handshake_timeout));
  if (options_.max_connection_idle.count() > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, Ms(options_.max_connection_idle));
  }
  if (options_.max_connection_age.count() > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, Ms(options_.max_connection_age));
    if (options_.max_connection_age_grace.count() > 0) {
      builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, Ms(options_.max_connection_age_grace));
    }
  }
  // Keepalive enforcement: a client pinging more often than every 10 s
  // without calls is sent GOAWAY (ENHANCE_YOUR_CALM) after two strikes.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  builder.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_send_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams);
  grpc::ResourceQuota quota("beacon-grpc");
  quota.Resize(static_cast<size_t>(options_.memory_quota_bytes));
  builder.SetResourceQuota(quota);
  inst->server = builder.BuildAndStart();
  if (inst->server == nullptr || chosen == 0) {
    *error = "";  // gRPC logs the cause (e.g. address in use, too many open files)
    inst->server.reset();
    return nullptr;
  }
  *bound = chosen;
  grpc::HealthCheckServiceInterface* health = inst->server->GetHealthCheckService();
  bool serving;
  {
    MutexLock lock(&mu_);
    serving = health_serving_;
  }
  if (health != nullptr) {
    for (const std::string& name : options_.health_services) health->SetServingStatus(name, serving);
    health->SetServingStatus(serving);
  }
  return inst;
}

bool GrpcFrontEnd::CheckOnce() {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options_.tls) {
    // The check proves the listener answers, not who it is: the certificate
    // may name a public host that loopback does not match.
    grpc::experimental::TlsChannelCredentialsOptions tls;
    tls.set_verify_server_certs(false);
    tls.set_check_call_host(false);
    tls.set_certificate_verifier(std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
    creds = grpc::experimental::TlsCredentials(tls);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a new connection, never a pooled one
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(CheckTarget(options_.host, port_), creds, args);
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(Clock::now() + options_.check_timeout);
  ctx.set_wait_for_ready(true);  // a connection that is not accepted times out instead of failing fast
  grpc::CompletionQueue cq;
  grpc::ByteBuffer request;  // HealthCheckRequest{service: ""} encodes to no bytes
  grpc::Slice empty;
  request = grpc::ByteBuffer(&empty, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {}
  // Any status the server itself sent proves that it accepted and served
  // the connection; the client-side failures of a dead listener are these.
  return status.error_code() != grpc::StatusCode::UNAVAILABLE &&
         status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED;
}

void GrpcFrontEnd::Watch() {
  int failures = 0;
  bool late_streak = false;
  bool busy_streak = false;
  mu_.Lock();
  while (!stopping_) {
    const absl::Time next_check = absl::Now() + absl::FromChrono(options_.check_interval);
    while (!stopping_) {
      if (wake_.WaitWithDeadline(&mu_, next_check)) break;  // timed out
    }
    if (stopping_) break;
    mu_.Unlock();
    const auto started = std::chrono::steady_clock::now();
    const bool answered = CheckOnce();
    const auto elapsed = std::chrono::steady_clock::now() - started;
    // Unanswered in time: does the listener still accept? (accept_probe.h:
    // a plain socket, since the check's own client may queue behind the
    // backlog that delayed the answer.)
    const bool accepts = !answered && elapsed <= 2 * options_.check_timeout &&
                         ProbeAccept(CheckHost(options_.host), port_, options_.check_timeout) == AcceptProbe::kAccepted;
    const SelfCheckVerdict verdict = JudgeSelfCheck(answered, accepts, elapsed, options_.check_timeout);
    mu_.Lock();
    if (stopping_) break;
    checks_.fetch_add(1);
    if (verdict == SelfCheckVerdict::kInconclusive) {
      inconclusive_.fetch_add(1);
      // Once per streak: a starved host can produce one per interval.
      if (!late_streak) {
        logging::Warn("gRPC self-check on port %d ended late (the process was starved of CPU): not counted", port_);
      }
      late_streak = true;
      continue;
    }
    late_streak = false;
    if (verdict == SelfCheckVerdict::kBusy) {
      busy_.fetch_add(1);
      // The accept loop works: whatever failed before is not the dead
      // listener a rebuild is for. Readiness stays as it was.
      failures = 0;
      if (!busy_streak) {
        logging::Warn(
            "gRPC self-check on port %d: connection accepted, call not answered within %d ms (the listener is "
            "working off a backlog of calls, e.g. a flood of reset streams): not counted",
            port_, Ms(options_.check_timeout));
      }
      busy_streak = true;
      continue;
    }
    if (busy_streak && verdict == SelfCheckVerdict::kServing) {
      logging::Info("gRPC self-check on port %d answered again after a backlog", port_);
    }
    busy_streak = false;
    if (verdict == SelfCheckVerdict::kServing) {
      if (failures >= options_.failures_to_restart) {
        logging::Warn("gRPC listener on port %d serves again", port_);
      }
      failures = 0;
      serving_.store(true, std::memory_order_release);
      continue;
    }
    ++failures;
    if (failures < options_.failures_to_restart) continue;
    if (serving_.exchange(false)) {
      logging::Error("gRPC listener on port %d failed %d self-checks: not ready, rebuilding it", port_, failures);
    }
    mu_.Unlock();
    Restart();
    mu_.Lock();
  }
  mu_.Unlock();
}

void GrpcFrontEnd::Restart() {
  int bound = 0;
  std::string error;
  std::unique_ptr<Instance> next = Build(port_, &bound, &error);
  if (next == nullptr) return;  // e.g. still out of file descriptors: the next check retries
  restarts_.fetch_add(1);
  MutexLock lock(&mu_);
  if (stopping_) return;  // `next` shuts down as it goes out of scope
  std::unique_ptr<Instance> old = std::exchange(current_, std::move(next));
  // The old listener closes as Shutdown starts; the calls it still runs get
  // up to retire_grace on their connections. Joined by Shutdown().
  retiring_.emplace_back([old = std::shared_ptr<Instance>(std::move(old)), grace = options_.retire_grace] {
    old->server->Shutdown(Clock::now() + grace);
  });
}

void GrpcFrontEnd::SetServingStatus(bool serving) {
  MutexLock lock(&mu_);
  health_serving_ = serving;
  if (current_ == nullptr) return;
  grpc::HealthCheckServiceInterface* health = current_->server->GetHealthCheckService();
  if (health == nullptr) return;
  for (const std::string& name : options_.health_services) health->SetServingStatus(name, serving);
  health->SetServingStatus(serving);
}

void GrpcFrontEnd::Shutdown(std::chrono::system_clock::time_point deadline) {
  std::call_once(shutdown_once_, [&] {
    std::unique_ptr<Instance> current;
    std::vector<std::thread> retiring;
    {
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    wake_.SignalAll();
    if (watchdog_.joinable()) watchdog_.join();
    {
      MutexLock lock(&mu_);
      current = std::move(current_);
      retiring.swap(retiring_);
    }
    if (current != nullptr) current->server->Shutdown(deadline);
    // A retired server finishes once its calls do; the caller has drained or
    // cancelled the engine's requests before shutting down.
    for (auto& t : retiring) t.join();
    serving_.store(false);
  });
}

}  // namespace beacon
