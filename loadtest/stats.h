// What one load-test request measured, and the figures a run reports from
// them: percentiles, throughput, and goodput under a service-level objective.
//
// Conventions (those of `vllm bench serve`):
// - latencies are measured on the client, from the request's intended start
//   (its scheduled arrival in an open loop, so a client that falls behind
//   cannot hide queueing) to the arrival of the stream's messages;
// - TTFT: start to the first token; E2E: start to the end of the stream;
//   TPOT: (E2E - TTFT) / (output tokens - 1), for requests of 2+ tokens;
//   ITL: one value per output token after the first. Tokens that arrive
//   together in one message share the gap since the previous message evenly,
//   so a request's ITLs sum to (last token - first token);
// - latency figures cover successful requests; throughput divides by the
//   measured window, the first measured start to the last measured end;
// - warm-up requests are run but excluded from every figure except the
//   `all_*` totals (which exist to compare against the server's counters).
#ifndef BEACON_LOADTEST_STATS_H_
#define BEACON_LOADTEST_STATS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "workload/slo.h"

namespace beacon::loadtest {

struct RequestResult {
  int64_t index = 0;
  bool warmup = false;
  std::string kv;      // KvChoice::Label() of the request
  double start_s = 0;  // intended start, seconds since the run began
  double ttft_s = -1;  // < 0: no token arrived
  double e2e_s = 0;
  std::vector<double> itl_s;  // output_tokens - 1 values once tokens arrived
  // Prompt tokens: the ids sent, or the server's count for text/chat input;
  // 0 for a request refused before it ran (an error status, no message).
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;              // ids streamed
  int32_t max_tokens = 0;                 // what the request asked for
  int32_t server_completion_tokens = -1;  // usage.completion_tokens; -1 without a final message
  int grpc_code = 0;                      // grpc::StatusCode
  std::string error;                      // the status message when grpc_code != 0
  std::string finish_reason;              // "length", "eos", ...; "" without a final message

  // The stream ended OK with a natural finish (stop, length, eos,
  // stop_sequence): not cut by a time limit, cancellation or engine error.
  bool Ok() const;
  // (e2e - ttft) / (output_tokens - 1); 0 with fewer than 2 tokens.
  double TpotS() const;
};

// The gRPC status code's name, e.g. "RESOURCE_EXHAUSTED".
std::string GrpcCodeName(int code);

// The p-th percentile (p in [0, 100]) of `values` by linear interpolation
// between closest ranks (NumPy's default): rank p/100 * (n - 1). 0 when empty.
double Percentile(std::vector<double> values, double p);

struct Summary {
  int64_t count = 0;
  double mean = 0, median = 0, p90 = 0, p99 = 0, max = 0;
  static Summary Of(const std::vector<double>& values);
};

// The SLO and its parser live in workload/slo.h (shared with the planner).
using workload::ParseSlo;
using workload::Slo;

// Ok() and within every bound of `slo` (TPOT is not checked for requests
// of fewer than 2 tokens).
bool MeetsSlo(const RequestResult& r, const Slo& slo);

struct RunSummary {
  int64_t requests = 0;   // measured (warm-up excluded)
  int64_t succeeded = 0;  // Ok()
  int64_t failed = 0;
  std::map<std::string, int64_t> errors;          // gRPC code name, or "finish:<reason>" for an OK stream cut short
  std::map<std::string, int64_t> finish_reasons;  // of streams that ended with a final message
  double duration_s = 0;                          // the measured window
  int64_t prompt_tokens = 0, output_tokens = 0;   // measured requests, tokens actually streamed
  double request_throughput = 0;                  // succeeded / duration
  double output_throughput = 0;                   // output tokens / duration
  double total_token_throughput = 0;              // (prompt + output) / duration
  Summary ttft_ms, tpot_ms, itl_ms, e2e_ms;
  Slo slo;
  int64_t good = 0;       // meeting the SLO (= succeeded when the SLO is empty)
  double goodput = 0;     // good / duration
  double attainment = 0;  // good / requests
  // Every request of the run, warm-up included.
  int64_t all_requests = 0, all_prompt_tokens = 0, all_output_tokens = 0;
};

RunSummary Summarize(const std::vector<RequestResult>& results, const Slo& slo);

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_STATS_H_
