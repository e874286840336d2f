// beacon-serve: the BeaconKV serving process. Loads a model, starts the
// engine loop (scheduler + KV + model on one thread), the beacon.v1 gRPC API
// (with grpc.health.v1 and reflection) and the HTTP port (/health, /ready),
// and drains gracefully on SIGTERM/SIGINT.
//
// Every flag can also come from the environment: --kv-policy from
// BEACON_KV_POLICY, --grpc-port from BEACON_GRPC_PORT, ... (flags win).
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/device_flags.h"
#include "engine/runtime.h"
#include "kv/kv_flags.h"
#include "scheduler/scheduler.h"
#include "server/grpc_front_end.h"
#include "server/grpc_service.h"
#include "server/http_routes.h"
#include "server/http_server.h"
#include "server/log_backend.h"
#include "server/metrics.h"
#include "server/model_info.h"
#include "server/openai_routes.h"
#include "server/process_guards.h"
#include "util/cli_args.h"
#include "util/log.h"

namespace beacon {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const absl::Status& s) {
  logging::Error("%s", std::string(s.message()));
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

// --log-level and --log-format: spdlog as the log backend (server/log_backend.h).
absl::Status ConfigureLogging(const cli::Args& args) {
  absl::StatusOr<logging::Level> level = logging::ParseLevel(args.Str("log-level"));
  if (!level.ok()) return absl::InvalidArgumentError(absl::StrCat("--log-level: ", level.status().message()));
  absl::StatusOr<LogFormat> format = ParseLogFormat(args.Str("log-format"));
  if (!format.ok()) return absl::InvalidArgumentError(absl::StrCat("--log-format: ", format.status().message()));
  InstallLogBackend(LogConfig{*level, *format, "beacon-serve"});
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--", flag, ": cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void DeclareFlags(cli::Args* a) {
  a->Declare("model", false, "models/default.gguf", "GGUF file, HF directory or dummy:config.json");
  a->Declare("host", false, "0.0.0.0", "address to listen on (gRPC and HTTP)");
  a->Declare("grpc-port", false, "50051", "gRPC port (0 = pick a free one; the chosen port is logged)");
  a->Declare("http-port", false, "8080", "HTTP port: OpenAI API, /metrics, /health, /ready (0 = pick a free one)");
  a->Declare("threads", false, "0", "CPU threads of the engine (0 = all)");
  a->Declare("log-level", false, "info",
             "trace, debug (also each request's arrival), info (one line per request), "
             "warning, error or off");
  a->Declare("log-format", false, "text", "text (for people) or json (one object per line, for log collectors)");
  DeclareDeviceFlags(a);
  a->Declare("http-threads", false, "2", "HTTP IO threads");
  a->Declare("http-max-connections", false, "512", "HTTP connections served at once; beyond them 503");
  a->Declare("http-max-connections-per-client", false, "64",
             "HTTP connections one client address may hold; beyond them 503 (0 = no limit; raise it behind a proxy)");
  a->Declare("http-probe-connections", false, "32",
             "extra HTTP connections for /health, /ready and /metrics only, when the others are taken");
  a->Declare("http-header-timeout-s", false, "10", "seconds a request's line and headers may take to arrive");
  a->Declare("http-idle-timeout-s", false, "60", "seconds an HTTP connection may wait idle between requests");
  a->Declare("kv-pool-tokens", false, "32768", "KV slots in the pool (per layer and KV head)");
  a->Declare("kv-block-size", false, "16", "KV slots per block");
  a->Declare("kv-allowed-policies", false, "", "comma-separated policies a request may choose (default: all)");
  a->Declare("kv-min-budget", false, "32", "smallest kv budget a request may ask for");
  a->Declare("kv-max-budget", false, "65536", "largest kv budget a request may ask for");
  // The scheduler's defaults are SchedulerConfig's (scheduler/scheduler.h), written once.
  const SchedulerConfig sched;
  a->Declare("max-running", false, std::to_string(sched.max_running), "sequences in the running batch at most");
  a->Declare("max-waiting", false, std::to_string(sched.max_waiting),
             "waiting queue bound; past it RESOURCE_EXHAUSTED");
  a->Declare("max-step-tokens", false, std::to_string(sched.max_step_tokens),
             "tokens per engine step (decode + prefill chunks)");
  a->Declare("prefill-chunk", false, std::to_string(sched.prefill_chunk), "prompt tokens per sequence per step");
  a->Declare("admission", false, std::string(AdmissionModeName(sched.admission)),
             "reserve (peak KV footprint) or optimistic (preempt by recompute)");
  a->Declare("default-max-tokens", false, "256", "max_tokens of a request that gives none");
  a->Declare("max-tokens-limit", false, "0", "largest max_tokens accepted (0 = the context length)");
  a->Declare("drain-timeout-s", false, "30", "on SIGTERM, seconds running streams get to finish");
  a->Declare("drain-delay-s", false, "0",
             "on SIGTERM, seconds to keep accepting requests after /ready turns 503 (for load balancers "
             "that poll /ready; Kubernetes uses a preStop sleep instead)");
  a->Declare("api-key", false, "", "require 'authorization: Bearer KEY' (gRPC metadata / HTTP header)");
  a->Declare("api-key-file", false, "", "read the API key from this file");
  a->Declare("metrics-api-key", false, "",
             "require 'authorization: Bearer KEY' on /metrics (default: /metrics is open, as for scrapers)");
  a->Declare("grpc-max-connection-idle-s", false, "120",
             "close gRPC connections with no call in flight for this long (0 = never)");
  a->Declare("grpc-max-connection-age-s", false, "0", "send GOAWAY to gRPC connections this old (0 = never)");
  a->Declare("grpc-handshake-timeout-s", false, "10", "close gRPC connections that do not finish the handshake");
  a->Declare("grpc-self-check-ms", false, "1000",
             "interval of the gRPC listener's self-check (a health call through the port; feeds /ready)");
  a->Declare("disable-grpc-reflection", true, "", "do not serve gRPC reflection (the API schema)");
  a->Declare("tls-cert", false, "", "PEM certificate chain: serve gRPC over TLS");
  a->Declare("tls-key", false, "", "PEM private key of --tls-cert");
  a->Declare("served-model-name", false, "", "model id of the OpenAI API (default: --model's file name, no extension)");
  a->Declare("help", true, "", "show this help");
  DeclareKvFlags(a, "beacon");
}

struct IntFlag {
  const char* name;
  int64_t min;
  int64_t* out;
};

absl::Status ParseInts(const cli::Args& args, std::initializer_list<IntFlag> flags) {
  for (const IntFlag& f : flags) {
    absl::StatusOr<int64_t> v = args.Int(f.name);
    if (!v.ok()) return v.status();
    if (*v < f.min) return absl::InvalidArgumentError(absl::StrCat("--", f.name, " must be >= ", f.min, ", got ", *v));
    *f.out = *v;
  }
  return absl::OkStatus();
}

// The gRPC listener's flags (--grpc-*, --disable-grpc-reflection, TLS mode).
absl::Status ParseGrpcOptions(const cli::Args& args, const std::string& host, int64_t port, GrpcFrontEndOptions* o) {
  int64_t idle_s, age_s, handshake_s, check_ms;
  if (absl::Status s = ParseInts(args, {{"grpc-max-connection-idle-s", 0, &idle_s},
                                        {"grpc-max-connection-age-s", 0, &age_s},
                                        {"grpc-handshake-timeout-s", 1, &handshake_s},
                                        {"grpc-self-check-ms", 10, &check_ms}});
      !s.ok()) {
    return s;
  }
  o->host = host;
  o->port = static_cast<int>(port);
  o->tls = args.Has("tls-cert");
  o->reflection = !args.Flag("disable-grpc-reflection");
  o->health_services = {"beacon.v1.BeaconService"};
  o->max_connection_idle = std::chrono::seconds(idle_s);
  o->max_connection_age = std::chrono::seconds(age_s);
  o->handshake_timeout = std::chrono::seconds(handshake_s);
  o->check_interval = std::chrono::milliseconds(check_ms);
  return absl::OkStatus();
}

// The HTTP listener's flags (--http-*).
absl::Status ParseHttpOptions(const cli::Args& args, const std::string& host, int64_t port, HttpServerOptions* o) {
  int64_t threads, conns, per_client, probes, header_s, idle_s;
  if (absl::Status s = ParseInts(args, {{"http-threads", 1, &threads},
                                        {"http-max-connections", 1, &conns},
                                        {"http-max-connections-per-client", 0, &per_client},
                                        {"http-probe-connections", 0, &probes},
                                        {"http-header-timeout-s", 1, &header_s},
                                        {"http-idle-timeout-s", 1, &idle_s}});
      !s.ok()) {
    return s;
  }
  auto as_int = [](int64_t v) { return static_cast<int>(std::min<int64_t>(v, int64_t{1} << 30)); };
  o->host = host;
  o->port = static_cast<int>(port);
  o->threads = as_int(threads);
  o->max_connections = as_int(conns);
  o->max_connections_per_client = as_int(per_client);
  o->probe_connections = as_int(probes);
  o->header_timeout = std::chrono::seconds(header_s);
  o->idle_timeout = std::chrono::seconds(idle_s);
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  // Signals are taken synchronously by the main thread (sigwait below); every
  // thread started from here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  cli::Args args;
  DeclareFlags(&args);
  if (absl::Status s = args.Parse(argc, argv); !s.ok()) return Fail(s);
  if (args.Flag("help")) {
    std::printf("usage: beacon-serve [options]   (each also from BEACON_<OPTION>)\n%s", args.Usage().c_str());
    return 0;
  }
  args.ApplyEnvironment("BEACON_");
  if (absl::Status s = ConfigureLogging(args); !s.ok()) return Fail(s);
  if (!args.positional().empty()) {
    return Fail(absl::InvalidArgumentError("unexpected argument '" + args.positional()[0] + "'"));
  }
  int64_t grpc_port, http_port, threads, pool_tokens, block_size, min_budget, max_budget, max_running, max_waiting,
      step_tokens, chunk, def_max, max_limit, drain_s, drain_delay_s;
  if (absl::Status s = ParseInts(args, {{"grpc-port", 0, &grpc_port},
                                        {"http-port", 0, &http_port},
                                        {"threads", 0, &threads},
                                        {"kv-pool-tokens", 1, &pool_tokens},
                                        {"kv-block-size", 1, &block_size},
                                        {"kv-min-budget", 1, &min_budget},
                                        {"kv-max-budget", 1, &max_budget},
                                        {"max-running", 1, &max_running},
                                        {"max-waiting", 1, &max_waiting},
                                        {"max-step-tokens", 1, &step_tokens},
                                        {"prefill-chunk", 1, &chunk},
                                        {"default-max-tokens", 1, &def_max},
                                        {"max-tokens-limit", 0, &max_limit},
                                        {"drain-timeout-s", 0, &drain_s},
                                        {"drain-delay-s", 0, &drain_delay_s}});
      !s.ok()) {
    return Fail(s);
  }
  if (grpc_port > 65535 || http_port > 65535) return Fail(absl::InvalidArgumentError("ports must be <= 65535"));
  const std::string host = args.Str("host");
  GrpcFrontEndOptions fopts;
  if (absl::Status s = ParseGrpcOptions(args, host, grpc_port, &fopts); !s.ok()) return Fail(s);
  HttpServerOptions hopts;
  if (absl::Status s = ParseHttpOptions(args, host, http_port, &hopts); !s.ok()) return Fail(s);

  SchedulerConfig sched;
  sched.max_running = static_cast<int32_t>(max_running);
  sched.max_waiting = static_cast<int32_t>(max_waiting);
  sched.max_step_tokens = static_cast<int32_t>(step_tokens);
  sched.prefill_chunk = static_cast<int32_t>(chunk);
  absl::StatusOr<AdmissionMode> mode = ParseAdmissionMode(args.Str("admission"));
  if (!mode.ok()) return Fail(mode.status());
  sched.admission = *mode;
  if (absl::Status s = sched.Validate(); !s.ok()) return Fail(s);

  ServeLimits limits;
  if (absl::Status s = ParseKvOptions(args, &limits.kv_default); !s.ok()) return Fail(s);
  absl::StatusOr<std::vector<KvPolicyKind>> allowed_policies = ParseKvPolicies(args.Str("kv-allowed-policies"));
  if (!allowed_policies.ok()) {
    return Fail(
        absl::InvalidArgumentError(absl::StrCat("--kv-allowed-policies: ", allowed_policies.status().message())));
  }
  limits.kv_limits.allowed_policies = *std::move(allowed_policies);
  limits.kv_limits.min_budget = static_cast<int32_t>(min_budget);
  limits.kv_limits.max_budget = static_cast<int32_t>(max_budget);
  if (absl::Status s = limits.kv_limits.Validate(); !s.ok()) return Fail(s);
  limits.default_max_tokens = static_cast<int32_t>(def_max);
  limits.max_tokens_limit = static_cast<int32_t>(max_limit);

  std::string api_key = args.Str("api-key");
  if (args.Has("api-key-file")) {
    absl::StatusOr<std::string> key = ReadFile("api-key-file", args.Str("api-key-file"));
    if (!key.ok()) return Fail(key.status());
    api_key = std::string(absl::StripAsciiWhitespace(*key));
  }
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (args.Has("tls-cert") != args.Has("tls-key")) {
    return Fail(absl::InvalidArgumentError("--tls-cert and --tls-key go together"));
  }
  if (args.Has("tls-cert")) {
    absl::StatusOr<std::string> cert = ReadFile("tls-cert", args.Str("tls-cert"));
    absl::StatusOr<std::string> key = ReadFile("tls-key", args.Str("tls-key"));
    if (!cert.ok()) return Fail(cert.status());
    if (!key.ok()) return Fail(key.status());
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    creds = grpc::SslServerCredentials(ssl);
  }

  // Before any listener: every connection holds a descriptor.
  absl::StatusOr<OpenFileLimit> nofile = RaiseOpenFileLimit();
  if (!nofile.ok()) return Fail(nofile.status());
  // HTTP at its caps, a few hundred gRPC connections and ~60 of our own.
  const uint64_t fds_wanted = static_cast<uint64_t>(hopts.max_connections) + hopts.probe_connections + 512;
  if (nofile->soft < fds_wanted) {
    logging::Warn(
        "the open-file limit is %d (hard limit); connection caps and gRPC want about %d: raise it (docs/deploy.md, "
        "file descriptors)",
        nofile->soft, fds_wanted);
  }
  LimitProtobufLogging();

  const auto t0 = Clock::now();
  RuntimeOptions ro;
  ro.model = args.Str("model");
  ro.threads = static_cast<int>(threads);
  if (absl::Status s = ParseDeviceFlags(args, &ro); !s.ok()) return Fail(s);
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(ro);
  if (!rt.ok()) return Fail(rt.status());
  // Policies the backend cannot run (the CUDA backend evicts with BeaconKV
  // only) leave the allowed list, so such requests are refused at validation
  // naming kv_policy, never half-run; a default it cannot run is a start-up error.
  if (absl::Status s = (*rt)->backend()->CheckPolicy(limits.kv_default); !s.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--kv-policy: ", s.message())));
  }
  {
    std::vector<KvPolicyKind>& allowed = limits.kv_limits.allowed_policies;
    std::vector<KvPolicyKind> runnable = allowed;
    if (runnable.empty()) {  // empty = every policy
      runnable.assign(KvPolicyKinds().begin(), KvPolicyKinds().end());
    }
    const size_t listed = runnable.size();
    std::erase_if(runnable,
                  [&](KvPolicyKind p) { return !(*rt)->backend()->CheckPolicy(KvPolicyOptions::DefaultsFor(p)).ok(); });
    if (runnable.size() != listed) allowed = runnable;
  }
  if ((*rt)->tokenizer() == nullptr) {
    return Fail(absl::InvalidArgumentError("--model: this model has no tokenizer (dummy weights cannot be served)"));
  }
  const ModelConfig& config = (*rt)->config();
  std::string served_model = args.Str("served-model-name");
  if (served_model.empty()) {
    served_model = std::filesystem::path(args.Str("model")).filename().string();
    if (size_t dot = served_model.rfind('.'); dot != std::string::npos && dot > 0) served_model.resize(dot);
  }
  limits.context_length = config.context_length;
  absl::StatusOr<std::unique_ptr<KvCache>> made_cache = (*rt)->MakeKvCache(pool_tokens, static_cast<int>(block_size));
  if (!made_cache.ok()) return Fail(made_cache.status());
  std::unique_ptr<KvCache> cache = *std::move(made_cache);
  const int64_t pool_slots = int64_t{cache->pool().num_blocks()} * block_size;
  MetricsInfo minfo;
  minfo.model = args.Str("model");
  minfo.architecture = std::string(ModelFamilyName(config.family));
  minfo.block_size = static_cast<int32_t>(block_size);
  minfo.pool_tokens = pool_slots;
  minfo.kv_bytes_per_token = static_cast<int64_t>(cache->BytesPerToken());
  minfo.default_policy = limits.kv_default.policy;
  minfo.default_budget = limits.kv_default.compresses() ? limits.kv_default.budget : 0;
  minfo.admission = std::string(AdmissionModeName(sched.admission));
  ServerMetrics metrics(minfo);
  EngineLoop loop((*rt)->backend(), cache.get(), (*rt)->tokenizer(), config, sched, &metrics);

  GrpcServiceOptions gopts;
  gopts.limits = limits;
  gopts.api_key = api_key;
  gopts.on_rejected = [&metrics](const absl::Status& s) { metrics.OnFrontEndRejected(s); };
  gopts.model_info = MakeModelInfo(args.Str("model"), config, *(*rt)->tokenizer(), limits, sched,
                                   static_cast<int>(block_size), pool_slots);

  fopts.credentials = creds;
  absl::StatusOr<std::unique_ptr<GrpcFrontEnd>> grpc_fe = GrpcFrontEnd::Start(fopts, [&loop, &rt, &gopts]() {
    std::vector<std::unique_ptr<grpc::Service>> services;
    services.push_back(std::make_unique<BeaconGrpcService>(&loop, (*rt)->tokenizer(), gopts));
    return services;
  });
  if (!grpc_fe.ok()) return Fail(grpc_fe.status());
  GrpcFrontEnd* const grpc_server = grpc_fe->get();
  const int bound_grpc = grpc_server->port();

  std::atomic<bool> ready{true};  // false once a drain starts
  Router routes;
  AddOperationalRoutes(
      &routes, &loop,
      [&ready, grpc_server]() -> absl::Status {
        if (!ready.load()) return absl::UnavailableError("draining");
        if (!grpc_server->serving()) {
          return absl::UnavailableError("the gRPC listener does not answer its self-check (see the log)");
        }
        return absl::OkStatus();
      },
      api_key);
  OpenAiOptions oai;
  oai.served_model = served_model;
  oai.limits = limits;
  oai.api_key = api_key;
  oai.on_rejected = gopts.on_rejected;
  AddOpenAiRoutes(&routes, &loop, (*rt)->tokenizer(), oai);
  // Prometheus scrapes without credentials unless --metrics-api-key is set
  // (--api-key does not cover /metrics: scrapers rarely hold client keys).
  routes.Handle(
      "GET", "/metrics",
      RequireApiKey(
          args.Str("metrics-api-key"),
          [&metrics, &loop](const HttpRequest&, HttpResponder& r) {
            r.Reply(HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", {}, metrics.Render(loop.Stats())});
          }),
      RouteKind::kProbe);
  absl::StatusOr<std::unique_ptr<HttpServer>> http = HttpServer::Start(hopts, std::move(routes));
  if (!http.ok()) {
    grpc_server->Shutdown(std::chrono::system_clock::now());
    return Fail(http.status());
  }
  logging::Info(
      "ready grpc=%s:%d http=%s:%d model=%s kv_policy=%s kv_pool_tokens=%d admission=%s open_files_limit=%d (%.1f s)",
      host, bound_grpc, host, (*http)->port(), args.Str("model"), std::string(limits.kv_default.policy_name()),
      int64_t{cache->pool().num_blocks()} * block_size, std::string(AdmissionModeName(sched.admission)), nofile->soft,
      std::chrono::duration<double>(Clock::now() - t0).count());

  int sig = 0;
  sigwait(&signals, &sig);
  logging::Info("%s: draining (%d s at most)", sig == SIGTERM ? "SIGTERM" : "SIGINT", drain_s);
  // Drain: stop being ready; after --drain-delay-s (load balancers polling
  // /ready stop routing here meanwhile) refuse new work; let running
  // streams finish.
  ready.store(false);
  grpc_server->SetServingStatus(false);
  if (drain_delay_s > 0) std::this_thread::sleep_for(std::chrono::seconds(drain_delay_s));
  loop.BeginDrain();
  const auto drain_end = Clock::now() + std::chrono::seconds(drain_s);
  while (loop.Stats().inflight > 0 && Clock::now() < drain_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int32_t left = loop.Stats().inflight;
  if (left > 0) {
    logging::Warn("drain timeout: cancelling %d requests", left);
    loop.CancelAll();
    const auto cancel_end = Clock::now() + std::chrono::seconds(2);
    while (loop.Stats().inflight > 0 && Clock::now() < cancel_end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  (*http)->Stop();
  loop.Stop();
  logging::Info("stopped");
  return 0;
}

}  // namespace
}  // namespace beacon

int main(int argc, char** argv) { return beacon::Main(argc, argv); }
