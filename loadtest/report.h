// How results leave beacon-loadtest: a human table on stdout, a JSON file
// (configuration, summary, and per-request records or per-level summaries),
// and a CSV file (one row per request for a run, per level for a sweep).
#ifndef BEACON_LOADTEST_REPORT_H_
#define BEACON_LOADTEST_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loadtest/config.h"
#include "loadtest/stats.h"
#include "loadtest/sweep.h"
#include "nlohmann/json.hpp"

namespace beacon::loadtest {

// "closed loop, concurrency 4, 12 requests (+2 warm-up), prompt fixed:32, output fixed:24, ignore_eos, kv
// full,beacon@64"
std::string DescribeRun(const Config& config);

// The end-of-run table: counts, throughput, goodput, errors, and the
// latency percentiles (ms).
std::string RunTable(const RunSummary& summary, const std::string& heading);

nlohmann::json SloJson(const Slo& slo);  // {"ttft_ms": .., ...}, the bounds set
nlohmann::json SummaryJson(const RunSummary& summary);
nlohmann::json ConfigJson(const Config& config, const v1::ModelInfo& info);
// {"config", "summary", "requests": [...]} for a run.
nlohmann::json RunJson(const Config& config, const v1::ModelInfo& info, const RunSummary& summary,
                       const std::vector<RequestResult>& results);
// One CSV row per request (warm-up included, flagged), with a header line.
std::string RequestsCsv(const std::vector<RequestResult>& results);

// One line per level as it finishes, and the final sweep table.
std::string SweepLevelLine(bool by_concurrency, const SweepLevel& level);
std::string SweepTable(const SweepResult& result);
// {"config", "slo", "levels": [{level, pass, summary}], "best", "bounded"}.
nlohmann::json SweepJson(const Config& config, const v1::ModelInfo& info, const SweepResult& result);
std::string SweepCsv(const SweepResult& result);

// The sweep a SweepJson() document describes, as far as the plots need it
// (levels with pass flags, rates and latency summaries, SLO, best). A
// document of another shape is INVALID_ARGUMENT.
absl::StatusOr<SweepResult> SweepFromJson(const nlohmann::json& doc);
// A short name for a sweep document: its --label, else its KV mix ("beacon@64").
std::string SweepName(const nlohmann::json& doc);

// Writes `content` to `path`; the error names the path.
absl::Status WriteTextFile(const std::string& path, const std::string& content);

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_REPORT_H_
