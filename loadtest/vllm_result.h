// A run's results in the shape of vLLM's benchmark_serving / `vllm bench
// serve` result JSON (--json-format vllm), so tooling written for those
// files reads ours: flat fields (duration, completed, request_throughput,
// request_goodput, output_throughput, total_token_throughput, ...), per-request
// lists (input_lens, output_lens, ttfts, itls, errors) and, for each of ttft,
// tpot, itl and e2el, mean_/median_/std_/p90_/p99_<metric>_ms.
//
// Figures cover the measured requests (warm-up excluded), as our own JSON's
// summary does; request_goodput is null without --slo, as vLLM's is without
// --goodput. Latency lists hold seconds, the figures milliseconds (vLLM's units).
#ifndef BEACON_LOADTEST_VLLM_RESULT_H_
#define BEACON_LOADTEST_VLLM_RESULT_H_

#include <nlohmann/json.hpp>
#include <vector>

#include "loadtest/config.h"
#include "loadtest/stats.h"
#include "proto/beacon/v1/beacon.pb.h"

namespace beacon::loadtest {

nlohmann::json VllmResultJson(const Config& config, const v1::ModelInfo& info, const RunSummary& summary,
                              const std::vector<RequestResult>& results);

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_VLLM_RESULT_H_
