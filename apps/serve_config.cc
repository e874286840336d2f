#include "apps/serve_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "apps/serve_kv_pool.h"
#include "cli/device_flags.h"
#include "cli/kv_flags.h"
#include "cli/tokenizer_flags.h"
#include "server/ops/log_backend.h"
#include "util/log.h"

namespace beacon {
namespace {

// --log-level and --log-format: spdlog as the log backend (server/ops/log_backend.h).
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

// An integer flag and its range. Most are stored in 32 bits, so the
// default maximum is INT32_MAX: a value past it is refused, never wrapped
// (--max-running 4294967297 once became 1; issue 46).
struct IntFlag {
  const char* name;
  int64_t min;
  int64_t* out;
  int64_t max = std::numeric_limits<int32_t>::max();
};

absl::Status ParseInts(const cli::Args& args, std::initializer_list<IntFlag> flags) {
  for (const IntFlag& f : flags) {
    absl::StatusOr<int64_t> v = args.Int(f.name);
    if (!v.ok()) return v.status();
    if (*v < f.min) return absl::InvalidArgumentError(absl::StrCat("--", f.name, " must be >= ", f.min, ", got ", *v));
    if (*v > f.max) return absl::InvalidArgumentError(absl::StrCat("--", f.name, " must be <= ", f.max, ", got ", *v));
    *f.out = *v;
  }
  return absl::OkStatus();
}

// The gRPC listener's flags (--grpc-*, --[no-]grpc-reflection, TLS mode).
absl::Status ParseGrpcOptions(const cli::Args& args, const std::string& host, int64_t port, GrpcFrontEndOptions* o) {
  int64_t idle_s, age_s, handshake_s, check_ms, streams, send_bytes, quota_bytes;
  if (absl::Status s =
          ParseInts(args, {{"grpc-max-connection-idle-s", 0, &idle_s},
                           {"grpc-max-connection-age-s", 0, &age_s},
                           {"grpc-handshake-timeout-s", 1, &handshake_s},
                           {"grpc-self-check-ms", 10, &check_ms},
                           {"grpc-max-concurrent-streams", 1, &streams},
                           {"grpc-max-send-message-bytes", 1024, &send_bytes},
                           {"grpc-memory-quota-bytes", int64_t{16} << 20, &quota_bytes, int64_t{1} << 40}});
      !s.ok()) {
    return s;
  }
  o->host = host;
  o->port = static_cast<int>(port);
  o->tls = args.Has("tls-cert");
  o->reflection = args.Flag("grpc-reflection");
  o->health_services = {"beacon.v1.BeaconService"};
  o->max_connection_idle = std::chrono::seconds(idle_s);
  o->max_connection_age = std::chrono::seconds(age_s);
  o->handshake_timeout = std::chrono::seconds(handshake_s);
  o->check_interval = std::chrono::milliseconds(check_ms);
  o->max_concurrent_streams = static_cast<int>(streams);
  o->max_send_message_bytes = static_cast<int>(send_bytes);
  o->memory_quota_bytes = quota_bytes;
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

// The admin listener (--admin-*): probes and scrapes only, so its budget is
// small and it has no per-client cap (kubelet probes come from one address).
absl::Status ParseAdminOptions(const cli::Args& args, const std::string& host, std::optional<HttpServerOptions>* o) {
  if (!args.Has("admin-port") || args.Str("admin-port").empty()) return absl::OkStatus();
  int64_t port, conns;
  if (absl::Status s = ParseInts(args, {{"admin-port", 0, &port}, {"admin-max-connections", 1, &conns}}); !s.ok()) {
    return s;
  }
  if (port > 65535) return absl::InvalidArgumentError("--admin-port: must be <= 65535");
  HttpServerOptions a;
  a.host = args.Str("admin-host").empty() ? host : args.Str("admin-host");
  a.port = static_cast<int>(port);
  a.threads = 1;
  a.max_body_bytes = 4096;  // its routes take no body
  a.max_connections = static_cast<int>(std::min<int64_t>(conns, 1 << 16));
  a.max_connections_per_client = 0;
  a.probe_connections = 4;
  a.header_timeout = std::chrono::seconds(5);
  a.idle_timeout = std::chrono::seconds(30);
  *o = a;
  return absl::OkStatus();
}

// --api-key / --api-key-file, and TLS (--tls-cert with --tls-key).
absl::Status ParseSecurity(const cli::Args& args, ServeConfig* c) {
  for (const std::string& key : args.All("api-key")) {  // repeatable: a tenant each
    if (!key.empty()) c->api_keys.push_back(key);
  }
  if (args.Has("api-key-file")) {
    // One key per line (a tenant each); blank lines and '#' comments skipped.
    absl::StatusOr<std::string> file = ReadFile("api-key-file", args.Str("api-key-file"));
    if (!file.ok()) return file.status();
    size_t keys = 0;
    for (absl::string_view line : absl::StrSplit(*file, '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (line.empty() || line.front() == '#') continue;
      c->api_keys.emplace_back(line);
      ++keys;
    }
    if (keys == 0) return absl::InvalidArgumentError("--api-key-file: the file holds no key");
  }
  // Several keys are several tenants: kept apart unless the flag says
  // otherwise (--no-prefix-cache-salt-per-key; issue 46).
  const bool per_key_given = args.Has("prefix-cache-salt-per-key");
  c->prefix_cache_salt_per_key = per_key_given ? args.Flag("prefix-cache-salt-per-key") : c->api_keys.size() >= 2;
  c->limits.enable_prompt_tokens_details = args.Flag("enable-prompt-tokens-details");
  if (per_key_given && c->prefix_cache_salt_per_key && c->api_keys.empty()) {
    return absl::InvalidArgumentError(
        "--prefix-cache-salt-per-key: needs API keys (--api-key or --api-key-file) to tell tenants apart");
  }
  c->metrics_api_key = args.Str("metrics-api-key");
  absl::StatusOr<MetricsNaming> naming = ParseMetricsNaming(args.Str("metrics-prefix"));
  if (!naming.ok()) return naming.status();
  c->metrics_naming = *naming;
  c->grpc.credentials = grpc::InsecureServerCredentials();
  if (args.Has("tls-cert") != args.Has("tls-key")) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (args.Has("tls-cert")) {
    absl::StatusOr<std::string> cert = ReadFile("tls-cert", args.Str("tls-cert"));
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile("tls-key", args.Str("tls-key"));
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    c->grpc.credentials = grpc::SslServerCredentials(ssl);
  }
  return absl::OkStatus();
}

// --kv-* defaults and the limits a request's KV fields must stay within.
absl::Status ParseKvLimits(const cli::Args& args, int64_t min_budget, int64_t max_budget, ServeLimits* limits) {
  if (absl::Status s = ParseKvOptions(args, &limits->kv_default); !s.ok()) return s;
  absl::StatusOr<std::vector<KvPolicyKind>> allowed = ParseKvPolicies(args.Str("kv-allowed-policies"));
  if (!allowed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--kv-allowed-policies: ", allowed.status().message()));
  }
  limits->kv_limits.allowed_policies = *std::move(allowed);
  limits->kv_limits.min_budget = static_cast<int32_t>(min_budget);
  limits->kv_limits.max_budget = static_cast<int32_t>(max_budget);
  absl::StatusOr<bool> spread = ParseSpreadEvictionPhase(args);
  if (!spread.ok()) return spread.status();
  limits->spread_eviction_phase = *spread;
  return limits->kv_limits.Validate();
}

}  // namespace

void DeclareServeFlags(cli::Args* a) {
  a->Declare("model", false, "models/default.gguf", "GGUF file, HF directory or dummy:config.json");
  a->Declare("host", false, "0.0.0.0", "address to listen on (gRPC and HTTP)");
  a->Declare("grpc-port", false, "50051", "gRPC port (0 = pick a free one; the chosen port is logged)");
  a->Declare("http-port", false, "8080", "HTTP port: OpenAI API, /metrics, /health, /ready (0 = pick a free one)");
  a->Declare("admin-port", false, "",
             "also serve /health, /ready and /metrics on this port, apart from client traffic, for probes and "
             "scrapers (0 = pick a free one; default: off)");
  a->Declare("admin-host", false, "", "address of the admin port (default: --host)");
  a->Declare("admin-max-connections", false, "16", "connections the admin port serves at once; beyond them 503");
  a->Declare("threads", false, "0", "CPU threads of the engine (0 = all)");
  a->Declare("log-level", false, "info",
             "trace, debug (also each request's arrival), info (one line per request), "
             "warning, error or off");
  a->Declare("log-format", false, "text", "text (for people) or json (one object per line, for log collectors)");
  DeclareDeviceFlags(a);
  DeclareTokenizerFlags(a);
  a->Declare("reasoning-parser", false, "auto",
             "how chat output is split into reasoning_content and content: auto (by the model's <think> tokens "
             "and template), none, deepseek_r1 or qwen3");
  DeclareStructuredFlags(a);
  a->Declare("generation-config", false, "auto",
             "sampling defaults for fields a request leaves out: auto (the model's generation_config.json or "
             "GGUF general.sampling keys, else OpenAI's: temperature 1), none (OpenAI's), or a "
             "generation_config.json (or its directory)");
  a->Declare("override-generation-config", false, "",
             "JSON replacing single defaults, e.g. '{\"temperature\": 0}' (temperature, top_p, top_k, min_p, "
             "repetition_penalty)");
  a->Declare("logprobs-mode", false, "raw",
             "the distribution logprobs report: raw (the model's logits) or processed (after penalties, "
             "logit_bias and temperature)");
  a->Declare("max-logprobs", false, "20", "most alternatives (top_logprobs) a request may ask for per token, 0-20");
  a->Declare("max-tokenize-tokens", false, "0",
             "most token ids a Tokenize / Detokenize (gRPC, /tokenize, /detokenize) takes or makes "
             "(0: the model's context length)");
  a->Declare("max-detokenize-bytes", false, "4194304", "most bytes of text a Detokenize makes");
  a->Declare("http-threads", false, "2", "HTTP IO threads");
  a->Declare("http-max-connections", false, "512", "HTTP connections served at once; beyond them 503");
  a->Declare("http-max-connections-per-client", false, "64",
             "HTTP connections one client address may hold; beyond them 503 (0 = no limit; raise it behind a proxy)");
  a->Declare("http-probe-connections", false, "32",
             "extra HTTP connections for /health, /ready and /metrics only, when the others are taken");
  a->Declare("http-header-timeout-s", false, "10", "seconds a request's line and headers may take to arrive");
  a->Declare("http-idle-timeout-s", false, "60", "seconds an HTTP connection may wait idle between requests");
  a->Declare("kv-pool-tokens", false, "32768", "KV slots in the pool (per layer and KV head)");
  a->Declare("gpu-memory-utilization", false, "",
             "size the KV pool from the GPU's memory instead: the fraction (0-1] of the device the server may use in "
             "all (weights, buffers, BeaconKV state and the pool), as vLLM's option (--device cuda; not with "
             "--kv-pool-tokens)");
  a->Declare("kv-block-size", false, "16", "KV slots per block");
  a->Declare("prefix-cache", true, "true",
             "reuse the KV of prompt prefixes other requests computed (automatic prefix caching)");
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
  a->Declare("api-key", false, "",
             "require 'authorization: Bearer KEY' (gRPC metadata / HTTP header); repeat it for several keys");
  a->Declare("api-key-file", false, "",
             "read API keys from this file, one per line (each a tenant; '#' comments); with --api-key, both are "
             "accepted");
  a->Declare("max-failed-steps", false, "3",
             "engine steps failing in a row after which the engine counts as broken: /ready turns 503 and the "
             "process exits 1 for its orchestrator to restart it (0 = never)");
  a->Declare("debug-fail-steps-after", false, "",
             "failure drill: every engine step after the first N fails as a device error would (default: off)");
  a->Declare("debug-hang-steps-after", false, "",
             "watchdog drill: the engine step after the first N never returns, as on a device that stopped "
             "answering (default: off)");
  a->Declare("debug-load-delay-s", false, "0",
             "shutdown drill: wait this long before loading the model, as a large model on a slow disk would "
             "(SIGTERM meanwhile exits at once)");
  a->Declare("step-timeout-s", false, "300",
             "an engine step running longer than this breaks the engine as failed steps do: /ready turns 503 and "
             "the process exits 1, without waiting for the hung step (0 = never; set it well above the slowest "
             "step, beacon_engine_step_seconds)");
  a->Declare("prefix-cache-salt-per-key", true, "",
             "requests under different API keys never share prefix-cache blocks (so one tenant cannot time "
             "another's prompts); a request's cache_salt further splits its key's share (default: on with two "
             "or more API keys; --no-prefix-cache-salt-per-key shares the cache between them)");
  a->Declare("enable-prompt-tokens-details", true, "false",
             "report every request's cached prompt tokens (OpenAI usage.prompt_tokens_details.cached_tokens, "
             "gRPC usage.cached_tokens); off, only a request in its own prefix-cache partition (a cache_salt, "
             "or its API key under --prefix-cache-salt-per-key) sees them: on the shared cache the count tells "
             "a client which prefixes others sent recently (vLLM's flag, off there too)");
  a->Declare("metrics-api-key", false, "",
             "require 'authorization: Bearer KEY' on /metrics (default: /metrics is open, as for scrapers)");
  a->Declare("metrics-prefix", false, "beacon",
             "metric names: beacon (beacon_*), or vllm (vLLM's names and finished_reason values for the families "
             "vLLM has, so its dashboards and autoscaling rules work unchanged; docs/observability.md)");
  a->Declare("grpc-max-concurrent-streams", false, "128",
             "gRPC streams one connection may hold open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; "
             "a client queues the rest)");
  a->Declare("grpc-max-send-message-bytes", false, "16777216", "largest gRPC reply message");
  a->Declare("grpc-memory-quota-bytes", false, "1073741824",
             "memory gRPC may take for its buffers across all connections (a ResourceQuota; past it gRPC "
             "stops reading from sockets rather than growing)");
  a->Declare("grpc-prepare-threads", false, "4",
             "threads that render chat templates and tokenize gRPC requests, off gRPC's callback threads");
  a->Declare("grpc-prepare-queue", false, "256",
             "gRPC calls that may wait for those threads; past it a call is refused RESOURCE_EXHAUSTED at once");
  a->Declare("grpc-max-connection-idle-s", false, "120",
             "close gRPC connections with no call in flight for this long (0 = never)");
  a->Declare("grpc-max-connection-age-s", false, "0", "send GOAWAY to gRPC connections this old (0 = never)");
  a->Declare("grpc-handshake-timeout-s", false, "10", "close gRPC connections that do not finish the handshake");
  a->Declare("grpc-self-check-ms", false, "1000",
             "interval of the gRPC listener's self-check (a health call through the port; feeds /ready)");
  a->Declare("grpc-reflection", true, "true", "serve gRPC reflection (the API schema)");
  a->Refuse("disable-grpc-reflection", "--disable-grpc-reflection was renamed --no-grpc-reflection");
  a->Declare("tls-cert", false, "", "PEM certificate chain: serve gRPC over TLS");
  a->Declare("tls-key", false, "", "PEM private key of --tls-cert");
  a->Declare("served-model-name", false, "", "model id of the OpenAI API (default: --model's file name, no extension)");
  DeclareKvFlags(a, "beacon");
}

absl::StatusOr<ServeConfig> ParseServeConfig(const cli::Args& args) {
  if (absl::Status s = ConfigureLogging(args); !s.ok()) return s;
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError("unexpected argument '" + args.positional()[0] + "'");
  }
  ServeConfig c;
  int64_t grpc_port, http_port, threads, block_size, min_budget, max_budget, max_running, max_waiting, step_tokens,
      chunk, def_max, max_limit, max_logprobs, tokenize_tokens, detokenize_bytes;
  if (absl::Status s = ParseInts(args, {{"grpc-port", 0, &grpc_port},
                                        {"http-port", 0, &http_port},
                                        {"threads", 0, &threads},
                                        {"kv-pool-tokens", 1, &c.kv_pool_tokens},
                                        {"kv-block-size", 1, &block_size},
                                        {"kv-min-budget", 1, &min_budget},
                                        {"kv-max-budget", 1, &max_budget},
                                        {"max-running", 1, &max_running},
                                        {"max-waiting", 1, &max_waiting},
                                        {"max-step-tokens", 1, &step_tokens},
                                        {"prefill-chunk", 1, &chunk},
                                        {"default-max-tokens", 1, &def_max},
                                        {"max-tokens-limit", 0, &max_limit},
                                        {"max-logprobs", 0, &max_logprobs},
                                        {"max-tokenize-tokens", 0, &tokenize_tokens},
                                        {"max-detokenize-bytes", 1, &detokenize_bytes, int64_t{1} << 30},
                                        {"drain-timeout-s", 0, &c.drain_timeout_s},
                                        {"drain-delay-s", 0, &c.drain_delay_s}});
      !s.ok()) {
    return s;
  }
  if (grpc_port > 65535 || http_port > 65535) return absl::InvalidArgumentError("ports must be <= 65535");
  c.kv_block_size = static_cast<int32_t>(block_size);
  c.host = args.Str("host");
  if (absl::Status s = ParseGrpcOptions(args, c.host, grpc_port, &c.grpc); !s.ok()) return s;
  if (absl::Status s = ParseHttpOptions(args, c.host, http_port, &c.http); !s.ok()) return s;
  if (absl::Status s = ParseAdminOptions(args, c.host, &c.admin); !s.ok()) return s;

  c.scheduler.max_running = static_cast<int32_t>(max_running);
  c.scheduler.max_waiting = static_cast<int32_t>(max_waiting);
  c.scheduler.max_step_tokens = static_cast<int32_t>(step_tokens);
  c.scheduler.prefill_chunk = static_cast<int32_t>(chunk);
  c.prefix_cache = args.Flag("prefix-cache");
  int64_t max_failed = 0;
  if (absl::Status s = ParseInts(args, {{"max-failed-steps", 0, &max_failed}}); !s.ok()) return s;
  int64_t prep_threads = 0, prep_queue = 0;
  if (absl::Status s = ParseInts(
          args, {{"grpc-prepare-threads", 1, &prep_threads, 1024}, {"grpc-prepare-queue", 1, &prep_queue, 1 << 20}});
      !s.ok()) {
    return s;
  }
  c.grpc_prepare_threads = static_cast<int>(prep_threads);
  c.grpc_prepare_queue = static_cast<int>(prep_queue);
  c.max_failed_steps = static_cast<int32_t>(std::min<int64_t>(max_failed, 1 << 30));
  for (auto [flag, value] : {std::pair<const char*, int64_t*>{"debug-fail-steps-after", &c.debug_fail_steps_after},
                             {"debug-hang-steps-after", &c.debug_hang_steps_after}}) {
    if (args.Has(flag) && !args.Str(flag).empty()) {
      if (absl::Status s = ParseInts(args, {{flag, 0, value}}); !s.ok()) return s;
    }
  }
  if (c.debug_fail_steps_after >= 0 && c.debug_hang_steps_after >= 0) {
    return absl::InvalidArgumentError("--debug-fail-steps-after and --debug-hang-steps-after: give one drill");
  }
  if (absl::Status s = ParseInts(
          args, {{"step-timeout-s", 0, &c.step_timeout_s}, {"debug-load-delay-s", 0, &c.debug_load_delay_s, 3600}});
      !s.ok()) {
    return s;
  }
  absl::StatusOr<AdmissionMode> mode = ParseAdmissionMode(args.Str("admission"));
  if (!mode.ok()) return mode.status();
  c.scheduler.admission = *mode;
  if (absl::Status s = c.scheduler.Validate(); !s.ok()) return s;

  if (absl::Status s = ParseKvLimits(args, min_budget, max_budget, &c.limits); !s.ok()) return s;
  c.limits.default_max_tokens = static_cast<int32_t>(def_max);
  c.limits.max_tokens_limit = static_cast<int32_t>(max_limit);
  if (max_logprobs > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-logprobs: ", max_logprobs, " is more than ", kMaxTopLogprobs));
  }
  c.limits.max_logprobs = static_cast<int32_t>(max_logprobs);
  c.limits.max_tokenize_tokens = static_cast<int32_t>(tokenize_tokens);
  c.limits.max_detokenize_bytes = detokenize_bytes;
  absl::StatusOr<LogprobsMode> lp_mode = ParseLogprobsMode(args.Str("logprobs-mode"));
  if (!lp_mode.ok()) return absl::InvalidArgumentError(absl::StrCat("--", lp_mode.status().message()));
  c.limits.logprobs_mode = *lp_mode;
  c.generation_config = args.Str("generation-config");
  c.override_generation_config = args.Str("override-generation-config");
  if (absl::Status s = ParseSecurity(args, &c); !s.ok()) return s;

  c.model = args.Str("model");
  c.runtime.model = c.model;
  c.runtime.threads = static_cast<int>(std::min<int64_t>(threads, 1 << 16));
  if (absl::Status s = ParseDeviceFlags(args, &c.runtime); !s.ok()) return s;
  absl::StatusOr<double> share = ParseGpuMemoryUtilization(args, c.runtime.device);
  if (!share.ok()) return share.status();
  c.gpu_memory_utilization = *share;
  ParseTokenizerFlags(args, &c.runtime);
  c.reasoning_parser = args.Str("reasoning-parser");
  if (c.reasoning_parser != "auto" && c.reasoning_parser != "none" && c.reasoning_parser != "deepseek_r1" &&
      c.reasoning_parser != "qwen3") {
    return absl::InvalidArgumentError(
        absl::StrCat("--reasoning-parser: '", c.reasoning_parser, "' is not one of auto, none, deepseek_r1, qwen3"));
  }
  if (absl::Status s = ParseStructuredFlags(args, &c.limits, &c.structured); !s.ok()) return s;
  c.served_model = args.Str("served-model-name");
  if (c.served_model.empty()) {
    c.served_model = std::filesystem::path(c.model).filename().string();
    if (size_t dot = c.served_model.rfind('.'); dot != std::string::npos && dot > 0) c.served_model.resize(dot);
  }
  return c;
}

}  // namespace beacon
