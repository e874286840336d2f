// beacon-serve's command line: every flag (each also from BEACON_<FLAG>), and
// the parsed configuration the serving process is built from. Parsing checks
// everything that can be checked before a model is loaded, so a bad flag
// fails in milliseconds with the flag's name (exit status 2).
#ifndef BEACON_APPS_SERVE_CONFIG_H_
#define BEACON_APPS_SERVE_CONFIG_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/structured_flags.h"
#include "engine/runtime.h"
#include "engine/serving/serve_request.h"
#include "scheduler/scheduler.h"
#include "server/grpc/grpc_front_end.h"
#include "server/http/http_server.h"
#include "server/ops/metric_names.h"
#include "util/cli_args.h"

namespace beacon {

void DeclareServeFlags(cli::Args* args);

struct ServeConfig {
  std::string host;
  std::string model;                       // --model, as given
  std::string served_model;                // the OpenAI model id
  RuntimeOptions runtime;                  // model, tokenizer, threads, device
  std::string reasoning_parser = "auto";   // resolved against the tokenizer at start-up
  StructuredConfig structured;             // --tool-call-parser, --grammar-*, --max-tools, ...
  std::string generation_config = "auto";  // --generation-config, resolved at start-up
  std::string override_generation_config;  // --override-generation-config (JSON)
  SchedulerConfig scheduler;
  ServeLimits limits;        // request validation, KV defaults and limits
  GrpcFrontEndOptions grpc;  // credentials included
  HttpServerOptions http;
  // --admin-port: /health, /ready and /metrics on a listener of their own,
  // with its own small connection budget, for probes and scrapers (absent:
  // off; they stay on the HTTP port either way).
  std::optional<HttpServerOptions> admin;
  std::vector<std::string> api_keys;                      // none: no authentication
  bool prefix_cache_salt_per_key = false;                 // --prefix-cache-salt-per-key
  std::string metrics_api_key;                            // empty: /metrics is open
  MetricsNaming metrics_naming = MetricsNaming::kBeacon;  // --metrics-prefix (server/ops/metric_names.h)
  int64_t kv_pool_tokens = 0;
  int32_t kv_block_size = 16;
  double gpu_memory_utilization = 0;  // > 0: the KV pool sized from the device's memory (apps/serve_kv_pool.h)
  bool prefix_cache = true;           // --prefix-cache
  // Engine failure (EngineLoop::SetFailurePolicy): failed steps in a row
  // after which the process exits 1 (0: never); and the failure drill
  // (engine/fault_injection.h): steps after which every step fails (-1: off).
  int32_t max_failed_steps = 3;
  int64_t debug_fail_steps_after = -1;
  int64_t debug_hang_steps_after = -1;
  int64_t debug_load_delay_s = 0;  // drill: a model load this much slower (SIGTERM while loading)
  int64_t step_timeout_s = 300;    // 0: no step watchdog
  int grpc_prepare_threads = 4;    // GrpcServiceOptions::prepare_threads
  int grpc_prepare_queue = 256;
  int64_t drain_timeout_s = 0;
  int64_t drain_delay_s = 0;
};

// Installs the log backend from --log-level/--log-format first (so the
// errors that follow are logged in the chosen format), then parses the rest.
// INVALID_ARGUMENT naming the flag; NOT_FOUND for an unreadable key or
// certificate file.
absl::StatusOr<ServeConfig> ParseServeConfig(const cli::Args& args);

}  // namespace beacon

#endif  // BEACON_APPS_SERVE_CONFIG_H_
