// The names beacon-serve's metric families are exposed under, in one table,
// for the two namings --metrics-prefix selects:
//
// - beacon (default): every family under its `beacon_` name;
// - vllm: a family that measures what a vLLM family measures answers to
//   vLLM's name (`vllm:num_requests_running`, ...), and to each of vLLM's
//   names where vLLM renamed it and dashboards in use query either (KV usage:
//   `vllm:kv_cache_usage_perc` and the older `vllm:gpu_cache_usage_perc`);
//   one vLLM lacks keeps its `beacon_` name. finished_reason values become
//   vLLM's: stop (stop, eos, stop_sequence), length (length, time_limit),
//   abort (cancelled, error): engine/finish_reason.h, VllmFinishReason.
//
// Adding a family: declare a FamilyNames below with its beacon name and the
// vLLM names of the same measure (exposition names, counters with their
// `_total`: vLLM's prometheus_client Counter "vllm:prefix_cache_queries" is
// exposed as "vllm:prefix_cache_queries_total"), then register it in
// ServerMetrics with the Gauges/Counters/Histograms helpers of metrics.cc,
// which create one family per exposed name and update them together.
// docs/observability.md lists every family and its vLLM name.
#ifndef BEACON_SERVER_OPS_METRIC_NAMES_H_
#define BEACON_SERVER_OPS_METRIC_NAMES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/finish_reason.h"

namespace beacon {

enum class MetricsNaming { kBeacon, kVllm };

// "beacon" or "vllm"; anything else is INVALID_ARGUMENT naming --metrics-prefix.
absl::StatusOr<MetricsNaming> ParseMetricsNaming(absl::string_view name);
absl::string_view MetricsNamingName(MetricsNaming naming);

struct FamilyNames {
  const char* beacon;
  std::vector<const char*> vllm;  // empty: vLLM has no such family
};

// The names a family is exposed under: {beacon} in beacon mode; the vLLM
// names (or {beacon} when there are none) in vllm mode.
std::vector<std::string> ExposedNames(const FamilyNames& family, MetricsNaming naming);

// The finished_reason label of `reason` under `naming`: FinishReasonName
// (beacon) or VllmFinishReason (vllm), engine/finish_reason.h.
std::string FinishedReasonLabel(FinishReason reason, MetricsNaming naming);
// Every finished_reason value `naming` exposes (each series exists from the start).
std::vector<std::string> FinishedReasonLabels(MetricsNaming naming);

namespace metric_names {

// Gauges.
inline const FamilyNames kServerInfo{"beacon_server_info", {}};
inline const FamilyNames kNumRequestsRunning{"beacon_num_requests_running", {"vllm:num_requests_running"}};
inline const FamilyNames kNumRequestsWaiting{"beacon_num_requests_waiting", {"vllm:num_requests_waiting"}};
inline const FamilyNames kKvPoolBlocks{"beacon_kv_pool_blocks", {}};
inline const FamilyNames kKvBlocksUsed{"beacon_kv_blocks_used", {}};
inline const FamilyNames kKvBlocksFree{"beacon_kv_blocks_free", {}};
inline const FamilyNames kKvBlocksReserved{"beacon_kv_blocks_reserved", {}};
// max(used, reserved) / pool: what a KV-aware picker or autoscaler reads.
inline const FamilyNames kKvCacheUsagePerc{"beacon_kv_cache_usage_perc",
                                           {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}};
// used / pool: blocks holding data only.
inline const FamilyNames kKvCacheUsedPerc{"beacon_kv_cache_used_perc", {}};
inline const FamilyNames kNumRequestsCompressing{"beacon_num_requests_compressing", {}};
inline const FamilyNames kKvCachedTokens{"beacon_kv_cached_tokens", {}};
inline const FamilyNames kKvLogicalTokens{"beacon_kv_logical_tokens", {}};
inline const FamilyNames kKvBytesPerToken{"beacon_kv_bytes_per_token", {}};
inline const FamilyNames kEngineStepBatchSize{"beacon_engine_step_batch_size", {}};
inline const FamilyNames kEngineStepTokens{"beacon_engine_step_tokens", {}};
// 1 once the engine is broken (failed steps in a row, or a step past
// --step-timeout-s); how long the step in progress has run.
inline const FamilyNames kEngineBroken{"beacon_engine_broken", {}};
inline const FamilyNames kEngineStepRunningSeconds{"beacon_engine_step_running_seconds", {}};
inline const FamilyNames kPrefixCacheBlocks{"beacon_prefix_cache_blocks", {}};
inline const FamilyNames kPrefixCacheIdleBlocks{"beacon_prefix_cache_idle_blocks", {}};
// Counters.
inline const FamilyNames kPromptTokens{"beacon_prompt_tokens_total", {"vllm:prompt_tokens_total"}};
inline const FamilyNames kGenerationTokens{"beacon_generation_tokens_total", {"vllm:generation_tokens_total"}};
inline const FamilyNames kPreemptions{"beacon_preemptions_total", {"vllm:num_preemptions_total"}};
inline const FamilyNames kKvEvictions{"beacon_kv_evictions_total", {}};
inline const FamilyNames kKvEvictedTokens{"beacon_kv_evicted_tokens_total", {}};
inline const FamilyNames kEngineSteps{"beacon_engine_steps_total", {}};
// Tokens, as vLLM's (a lookup per admission; recomputes look up again).
inline const FamilyNames kPrefixCacheQueries{"beacon_prefix_cache_queries_total", {"vllm:prefix_cache_queries_total"}};
inline const FamilyNames kPrefixCacheHits{"beacon_prefix_cache_hits_total", {"vllm:prefix_cache_hits_total"}};
inline const FamilyNames kRequestSuccess{"beacon_request_success_total", {"vllm:request_success_total"}};
inline const FamilyNames kRequestRejected{"beacon_request_rejected_total", {}};
// Histograms.
inline const FamilyNames kTimeToFirstToken{"beacon_time_to_first_token_seconds", {"vllm:time_to_first_token_seconds"}};
// Per token. vLLM up to 0.10 observed its per-token figure as
// time_per_output_token_seconds; later as inter_token_latency_seconds.
inline const FamilyNames kInterTokenLatency{"beacon_inter_token_latency_seconds",
                                            {"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"}};
// Per request: (end - first token) / (tokens - 1).
inline const FamilyNames kTimePerOutputToken{"beacon_time_per_output_token_seconds",
                                             {"vllm:request_time_per_output_token_seconds"}};
inline const FamilyNames kE2eLatency{"beacon_e2e_request_latency_seconds", {"vllm:e2e_request_latency_seconds"}};
inline const FamilyNames kQueueTime{"beacon_request_queue_time_seconds", {"vllm:request_queue_time_seconds"}};
inline const FamilyNames kPrefillTime{"beacon_request_prefill_time_seconds", {"vllm:request_prefill_time_seconds"}};
inline const FamilyNames kDecodeTime{"beacon_request_decode_time_seconds", {"vllm:request_decode_time_seconds"}};
inline const FamilyNames kInferenceTime{"beacon_request_inference_time_seconds",
                                        {"vllm:request_inference_time_seconds"}};
inline const FamilyNames kRequestPromptTokens{"beacon_request_prompt_tokens", {"vllm:request_prompt_tokens"}};
inline const FamilyNames kRequestGenerationTokens{"beacon_request_generation_tokens",
                                                  {"vllm:request_generation_tokens"}};
inline const FamilyNames kEngineStepSeconds{"beacon_engine_step_seconds", {}};
inline const FamilyNames kRequestPeakKvTokens{"beacon_request_peak_kv_tokens", {}};
inline const FamilyNames kRequestKvCompressionRatio{"beacon_request_kv_compression_ratio", {}};

}  // namespace metric_names
}  // namespace beacon

#endif  // BEACON_SERVER_OPS_METRIC_NAMES_H_
