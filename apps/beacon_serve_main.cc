// beacon-serve: the BeaconKV serving process. Loads a model, starts the
// engine loop (scheduler + KV + model on one thread), the beacon.v1 gRPC API
// (with grpc.health.v1 and reflection) and the HTTP port (OpenAI API,
// /health, /ready, /metrics), optionally an admin port (probes and metrics
// only), and drains gracefully on SIGTERM/SIGINT.
//
// Every flag can also come from the environment: --kv-policy from
// BEACON_KV_POLICY, --grpc-port from BEACON_GRPC_PORT, ... (flags win;
// apps/serve_config.h).
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "apps/serve_config.h"
#include "apps/serve_kv_pool.h"
#include "engine/fault_injection.h"
#include "engine/grammar/grammar_compiler.h"
#include "engine/runtime.h"
#include "engine/serving/generation_config.h"
#include "engine/tools/tool_format.h"
#include "kv/serving/kv_policy_limits.h"
#include "server/grpc/grpc_front_end.h"
#include "server/grpc/grpc_service.h"
#include "server/grpc/model_info.h"
#include "server/http/http_server.h"
#include "server/openai/openai_routes.h"
#include "server/ops/http_routes.h"
#include "server/ops/metrics.h"
#include "server/ops/process_guards.h"
#include "util/cli_args.h"
#include "util/log.h"
#include "util/run_main.h"
#include "util/signal_watch.h"

namespace beacon {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const absl::Status& s) {
  logging::Error("%s", std::string(s.message()));
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

// Policies the backend cannot run (the CUDA backend evicts with BeaconKV
// only) leave the allowed list, so such requests are refused at validation
// naming kv_policy, never half-run; a default it cannot run is a start-up
// error (INVALID_ARGUMENT naming --kv-policy).
absl::Status RestrictToRunnablePolicies(const Backend& backend, ServeLimits* limits) {
  if (absl::Status s = backend.CheckPolicy(limits->kv_default); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--kv-policy: ", s.message()));
  }
  std::vector<KvPolicyKind>& allowed = limits->kv_limits.allowed_policies;
  std::vector<KvPolicyKind> runnable = allowed;
  if (runnable.empty()) runnable.assign(KvPolicyKinds().begin(), KvPolicyKinds().end());  // empty = every policy
  const size_t listed = runnable.size();
  std::erase_if(runnable, [&](KvPolicyKind p) { return !backend.CheckPolicy(KvPolicyOptions::DefaultsFor(p)).ok(); });
  if (runnable.size() != listed) allowed = runnable;
  return absl::OkStatus();
}

// Warns when the open-file limit is below what the connection caps need:
// HTTP at its caps, a few hundred gRPC connections and ~60 of our own.
void CheckOpenFileLimit(const OpenFileLimit& nofile, const HttpServerOptions& http) {
  const uint64_t fds_wanted = static_cast<uint64_t>(http.max_connections) + http.probe_connections + 512;
  if (nofile.soft < fds_wanted) {
    logging::Warn(
        "the open-file limit is %d (hard limit); connection caps and gRPC want about %d: raise it (docs/deploy.md, "
        "file descriptors)",
        nofile.soft, fds_wanted);
  }
}

// The model and what is built on it, in the order they depend on each other.
struct Engine {
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<FailingStepsBackend> drill;  // --debug-fail-steps-after, --debug-hang-steps-after
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<ServerMetrics> metrics;
  std::unique_ptr<EngineLoop> loop;
  std::unique_ptr<GrammarCompiler> grammars;  // null with --grammar-threads 0
  int64_t pool_slots = 0;
};

absl::StatusOr<Engine> StartEngine(ServeConfig* c) {
  Engine e;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(c->runtime);
  if (!rt.ok()) return rt.status();
  e.runtime = *std::move(rt);
  if (absl::Status s = RestrictToRunnablePolicies(*e.runtime->backend(), &c->limits); !s.ok()) return s;
  if (e.runtime->tokenizer() == nullptr) {
    return absl::InvalidArgumentError(
        "--model: this model has no tokenizer (dummy weights are served with --tokenizer FILE)");
  }
  const ModelConfig& config = e.runtime->config();
  c->limits.context_length = config.context_length;
  absl::StatusOr<ReasoningSyntax> reasoning = ResolveReasoningParser(c->reasoning_parser, *e.runtime->tokenizer());
  if (!reasoning.ok()) return reasoning.status();
  c->limits.reasoning = *reasoning;
  absl::StatusOr<ToolSyntax> tools =
      ResolveToolSyntax(c->structured.tool_call_parser, e.runtime->tokenizer()->chat_template_source());
  if (!tools.ok()) return tools.status();
  c->limits.tool_syntax = *tools;
  if (c->structured.grammar_threads > 0) {
    absl::StatusOr<std::unique_ptr<GrammarCompiler>> grammars =
        GrammarCompiler::Create(*e.runtime->tokenizer(), config.vocab_size, c->structured.grammar);
    if (!grammars.ok()) return grammars.status();
    e.grammars = *std::move(grammars);
    c->limits.grammars = e.grammars.get();
  }
  logging::Info("tool calls: %s (%s); structured output: %s", std::string(ToolCallFormatName(tools->format)),
                tools->traits.renders_tools ? "listed by the chat template" : "described in the system message",
                e.grammars != nullptr ? absl::StrCat(c->structured.grammar_threads, " compile threads") : "off");
  absl::StatusOr<DefaultSampling> defaults =
      ResolveGenerationConfig(c->generation_config, c->model, c->override_generation_config);
  if (!defaults.ok()) return defaults.status();
  c->limits.defaults = *defaults;
  logging::Info("sampling defaults (%s): temperature=%g top_p=%g top_k=%d min_p=%g repetition_penalty=%g",
                defaults->source, defaults->temperature, defaults->top_p, defaults->top_k, defaults->min_p,
                defaults->repetition_penalty);
  KvPoolConfig pool;
  pool.tokens = c->kv_pool_tokens;
  pool.block_size = c->kv_block_size;
  pool.device_share = c->gpu_memory_utilization;
  pool.max_running = c->scheduler.max_running;
  pool.step_tokens = c->scheduler.max_step_tokens;
  absl::StatusOr<std::unique_ptr<KvCache>> cache = MakeServeKvPool(e.runtime.get(), c->limits, pool);
  if (!cache.ok()) return cache.status();
  e.cache = *std::move(cache);
  // kv_budget_bytes converts with the model's shape and the cache's rows.
  c->limits.kv_model = PolicyInfoFor(config);
  c->limits.kv_row_bytes = static_cast<int64_t>(e.cache->shape().row_bytes());
  e.pool_slots = int64_t{e.cache->pool().num_blocks()} * c->kv_block_size;
  MetricsInfo minfo;
  minfo.model = c->model;
  minfo.served_model_name = c->served_model;
  minfo.naming = c->metrics_naming;
  minfo.architecture = std::string(ModelFamilyName(config.family));
  minfo.block_size = c->kv_block_size;
  minfo.pool_tokens = e.pool_slots;
  minfo.kv_bytes_per_token = static_cast<int64_t>(e.cache->BytesPerToken());
  minfo.kv_cache_dtype = std::string(KvCacheDTypeName(e.cache->dtype()));
  minfo.default_policy = c->limits.kv_default.policy;
  minfo.default_budget = c->limits.kv_default.compresses() ? c->limits.kv_default.budget : 0;
  minfo.admission = std::string(AdmissionModeName(c->scheduler.admission));
  e.metrics = std::make_unique<ServerMetrics>(minfo);
  std::optional<uint64_t> salt;
  if (c->prefix_cache) salt = GenerationEngine::PrefixCacheSaltFor(c->model, config, *e.cache);
  Backend* backend = e.runtime->backend();
  if (c->debug_fail_steps_after >= 0) {
    logging::Warn("failure drill: every engine step after the first %lld fails (--debug-fail-steps-after)",
                  static_cast<long long>(c->debug_fail_steps_after));
    e.drill = std::make_unique<FailingStepsBackend>(backend, c->debug_fail_steps_after);
    backend = e.drill.get();
  } else if (c->debug_hang_steps_after >= 0) {
    logging::Warn("watchdog drill: the engine step after the first %lld never returns (--debug-hang-steps-after)",
                  static_cast<long long>(c->debug_hang_steps_after));
    e.drill =
        std::make_unique<FailingStepsBackend>(backend, c->debug_hang_steps_after, FailingStepsBackend::Fault::kHang);
    backend = e.drill.get();
  }
  e.loop = std::make_unique<EngineLoop>(backend, e.cache.get(), e.runtime->tokenizer(), config, c->scheduler,
                                        e.metrics.get(), salt);
  return e;
}

// Whether the replica can serve: not once the engine is broken, nor while
// draining, nor while the gRPC listener fails its self-checks.
Readiness ReplicaReadiness(const std::atomic<bool>& ready, GrpcFrontEnd* grpc_server, const EngineLoop* loop) {
  return [&ready, grpc_server, loop]() -> absl::Status {
    if (loop->failed()) return loop->failure();
    if (!ready.load()) return absl::UnavailableError("draining");
    if (!grpc_server->serving()) {
      return absl::UnavailableError("the gRPC listener does not answer its self-check (see the log)");
    }
    return absl::OkStatus();
  };
}

// GET /metrics. Prometheus scrapes without credentials unless
// --metrics-api-key is set (--api-key does not cover /metrics: scrapers
// rarely hold client keys).
void AddMetricsRoute(Router* routes, const ServeConfig& c, Engine& e) {
  ServerMetrics* metrics = e.metrics.get();
  EngineLoop* loop = e.loop.get();
  routes->Handle(
      "GET", "/metrics",
      RequireApiKey(
          ApiKeys({c.metrics_api_key}),
          [metrics, loop](const HttpRequest&, HttpResponder& r) {
            r.Reply(HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", {}, metrics->Render(loop->Stats())});
          }),
      RouteKind::kProbe);
}

// The HTTP port's routes: operational (/health, /ready, stats), the OpenAI
// API and /metrics. With --admin-port, /v1/engine/stats and /metrics are
// served there only: both show every tenant's traffic (queues, prefix-cache
// hits, token rates), which clients of the API port need not see (issue 46).
// Scrapers follow them there: the Kubernetes PodMonitor and the inference
// gateway's endpoint picker (--model-server-metrics-port) scrape the admin
// port (deploy/k8s).
Router MakeRoutes(const ServeConfig& c, Engine& e, const GrpcServiceOptions& gopts, Readiness readiness) {
  Router routes;
  const bool admin_port = c.admin.has_value();
  AddOperationalRoutes(&routes, e.loop.get(), std::move(readiness), ApiKeys(c.api_keys), /*with_stats=*/!admin_port);
  OpenAiOptions oai;
  oai.served_model = c.served_model;
  oai.door = gopts.door;  // the same limits, keys, tenants and refusals' counter
  AddOpenAiRoutes(&routes, e.loop.get(), e.runtime->tokenizer(), oai);
  if (!admin_port) AddMetricsRoute(&routes, c, e);
  return routes;
}

// The admin port's (--admin-port): the same probes and metrics, none of the
// API, on a listener client traffic cannot fill (issue 35: a client flooding
// the HTTP port from the address kubelet probes from would fail its probes).
Router MakeAdminRoutes(const ServeConfig& c, Engine& e, Readiness readiness) {
  Router routes;
  AddOperationalRoutes(&routes, e.loop.get(), std::move(readiness), ApiKeys(c.api_keys));
  AddMetricsRoute(&routes, c, e);
  return routes;
}

// Stop being ready; after --drain-delay-s (load balancers polling /ready stop
// routing here meanwhile) refuse new work; let running streams finish within
// --drain-timeout-s, then cancel what is left.
void Drain(const ServeConfig& c, EngineLoop* loop, GrpcFrontEnd* grpc_server, std::atomic<bool>* ready) {
  ready->store(false);
  grpc_server->SetServingStatus(false);
  if (c.drain_delay_s > 0) std::this_thread::sleep_for(std::chrono::seconds(c.drain_delay_s));
  loop->BeginDrain();
  const auto drain_end = Clock::now() + std::chrono::seconds(c.drain_timeout_s);
  while (loop->Stats().inflight > 0 && Clock::now() < drain_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int32_t left = loop->Stats().inflight;
  if (left > 0) {
    logging::Warn("drain timeout: cancelling %d requests", left);
    loop->CancelAll();
    const auto cancel_end = Clock::now() + std::chrono::seconds(2);
    while (loop->Stats().inflight > 0 && Clock::now() < cancel_end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

// The engine is broken (EngineLoop, "Engine failure"): every request has
// ended with its error, or is stuck in a step that never returns (the step
// watchdog). Stop being ready, let the front ends' handlers write those
// errors (each HTTP handler returns after its response's last write; gRPC's
// Shutdown waits for its calls), and exit 1 so that the orchestrator
// restarts the replica; a drain would only wait on an engine that cannot
// run. Each wait is bounded (2 s): a client that does not read cannot hold
// the exit.
int ExitBroken(EngineLoop* loop, GrpcFrontEnd* grpc_server, HttpServer* http, HttpServer* admin,
               std::atomic<bool>* ready) {
  ready->store(false);
  grpc_server->SetServingStatus(false);
  logging::Error("%s: exiting with status 1 so that this replica is restarted", loop->failure().message());
  auto wait = [](const std::function<bool()>& done) {
    const auto end = Clock::now() + std::chrono::seconds(2);
    while (!done() && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  wait([loop] { return loop->Stats().inflight == 0; });  // every request has its final record
  wait([http] { return http->busy_handlers() == 0; });   // and its HTTP response is written
  if (loop->step_hung()) {
    // The engine thread is inside a step that does not return: neither it,
    // nor a handler or a gRPC call waiting on one of its requests, can be
    // joined. The requests of that step end with their connections.
    logging::Error("the hung engine step cannot be stopped: exiting without joining it");
    std::fflush(stderr);
    std::_Exit(1);
  }
  grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  http->Stop();
  if (admin != nullptr) admin->Stop();
  loop->Stop();
  return 1;
}

int Main(int argc, char** argv) {
  // Signals are taken synchronously by the main thread (sigwait below); every
  // thread started from here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);  // the engine loop's "broken" (EngineLoop::SetFailurePolicy)
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  cli::Args args;
  DeclareServeFlags(&args);
  if (absl::Status s = args.Parse(argc, argv); !s.ok()) return Fail(s);
  if (args.help()) {
    std::printf("%s", args.Help("usage: beacon-serve [--model PATH] [options]\n"
                                "Every option is also read from BEACON_<OPTION> (e.g. BEACON_KV_POLICY=beacon, "
                                "BEACON_PREFIX_CACHE=false); the command line wins.")
                          .c_str());
    return 0;
  }
  if (absl::Status s = args.LoadEnvironment("BEACON_"); !s.ok()) return Fail(s);
  absl::StatusOr<ServeConfig> config = ParseServeConfig(args);
  if (!config.ok()) return Fail(config.status());
  ServeConfig& c = *config;

  // Before any listener: every connection holds a descriptor.
  absl::StatusOr<OpenFileLimit> nofile = RaiseOpenFileLimit();
  if (!nofile.ok()) return Fail(nofile.status());
  CheckOpenFileLimit(*nofile, c.http);
  LimitProtobufLogging();

  const auto t0 = Clock::now();
  absl::StatusOr<Engine> engine;
  {
    // Loading can take minutes (a large model, a slow volume). A SIGTERM
    // meanwhile (a rollout, a scale-down) ends the process at once: nothing
    // is served yet, so nothing drains, and waiting for the load would
    // outlast the pod's grace period. SIGUSR1 has no engine to mean yet.
    SignalWatch while_loading(signals, [](int sig) {
      if (sig == SIGUSR1) return;
      logging::Info("%s while loading the model: exiting (nothing to drain)", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      std::fflush(nullptr);
      std::_Exit(0);  // the loader's threads hold no state that outlives the process
    });
    if (c.debug_load_delay_s > 0) {
      logging::Info("--debug-load-delay-s: loading in %d s", static_cast<int>(c.debug_load_delay_s));
      std::this_thread::sleep_for(std::chrono::seconds(c.debug_load_delay_s));
    }
    engine = StartEngine(&c);
  }
  if (!engine.ok()) return Fail(engine.status());
  Engine& e = *engine;

  GrpcServiceOptions gopts;
  gopts.door.limits = c.limits;
  gopts.door.api_keys = ApiKeys(c.api_keys);
  gopts.door.prefix_cache_salt_per_key = c.prefix_cache_salt_per_key;
  ServerMetrics* metrics = e.metrics.get();
  gopts.door.on_rejected = [metrics](const absl::Status& s) { metrics->OnFrontEndRejected(s); };
  gopts.prepare_threads = c.grpc_prepare_threads;
  gopts.prepare_queue = c.grpc_prepare_queue;
  gopts.model_info = MakeModelInfo(c.model, e.runtime->config(), *e.runtime->tokenizer(), c.limits, c.scheduler,
                                   c.kv_block_size, e.pool_slots);
  EngineLoop* loop = e.loop.get();
  // A broken engine wakes the main thread, which exits non-zero (below).
  std::atomic<bool> engine_broken{false};
  loop->SetFailurePolicy(c.max_failed_steps, [&engine_broken](const absl::Status&) {
    engine_broken.store(true);
    kill(getpid(), SIGUSR1);
  });
  loop->SetStepTimeout(absl::Seconds(c.step_timeout_s));
  const Tokenizer* tokenizer = e.runtime->tokenizer();
  absl::StatusOr<std::unique_ptr<GrpcFrontEnd>> grpc_fe = GrpcFrontEnd::Start(c.grpc, [loop, tokenizer, &gopts]() {
    std::vector<std::unique_ptr<grpc::Service>> services;
    services.push_back(std::make_unique<BeaconGrpcService>(loop, tokenizer, gopts));
    return services;
  });
  if (!grpc_fe.ok()) return Fail(grpc_fe.status());
  GrpcFrontEnd* const grpc_server = grpc_fe->get();

  std::atomic<bool> ready{true};  // false once a drain starts
  absl::StatusOr<std::unique_ptr<HttpServer>> http =
      HttpServer::Start(c.http, MakeRoutes(c, e, gopts, ReplicaReadiness(ready, grpc_server, loop)));
  std::unique_ptr<HttpServer> admin;
  if (http.ok() && c.admin.has_value()) {
    absl::StatusOr<std::unique_ptr<HttpServer>> a =
        HttpServer::Start(*c.admin, MakeAdminRoutes(c, e, ReplicaReadiness(ready, grpc_server, loop)));
    if (a.ok()) {
      admin = *std::move(a);
    } else {
      (*http)->Stop();
      http = absl::Status(a.status().code(), absl::StrCat("--admin-port: ", a.status().message()));
    }
  }
  if (!http.ok()) {
    grpc_server->Shutdown(std::chrono::system_clock::now());
    return Fail(http.status());
  }
  const std::string admin_at = admin ? absl::StrCat(" admin=", c.admin->host, ":", admin->port()) : "";
  logging::Info(
      "ready grpc=%s:%d http=%s:%d%s model=%s reasoning_parser=%s kv_policy=%s kv_pool_tokens=%d "
      "kv_cache_dtype=%s kv_bytes_per_token=%d admission=%s prefix_cache=%s open_files_limit=%d (%.1f s)",
      c.host, grpc_server->port(), c.host, (*http)->port(), admin_at, c.model,
      std::string(ReasoningParserName(c.limits.reasoning.parser)), std::string(c.limits.kv_default.policy_name()),
      e.pool_slots, std::string(KvCacheDTypeName(e.cache->dtype())), static_cast<int>(e.cache->BytesPerToken()),
      std::string(AdmissionModeName(c.scheduler.admission)), c.prefix_cache ? "on" : "off", nofile->soft,
      std::chrono::duration<double>(Clock::now() - t0).count());

  int sig = 0;
  do {
    sigwait(&signals, &sig);
  } while (sig == SIGUSR1 && !engine_broken.load());  // another process's SIGUSR1: ignored
  if (engine_broken.load()) return ExitBroken(loop, grpc_server, http->get(), admin.get(), &ready);
  logging::Info("%s: draining (%d s at most)", sig == SIGTERM ? "SIGTERM" : "SIGINT", c.drain_timeout_s);
  Drain(c, loop, grpc_server, &ready);
  grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  (*http)->Stop();
  if (admin) admin->Stop();
  loop->Stop();
  logging::Info("stopped");
  return 0;
}

}  // namespace
}  // namespace beacon

int main(int argc, char** argv) { return beacon::RunMain("beacon-serve", &beacon::Main, argc, argv); }
