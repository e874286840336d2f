// The SLA sweep: the same workload at rising load levels (open-loop rates or
// closed-loop concurrencies), each judged against the SLO, to find the highest
// load the server sustains within it; and its plot.
#ifndef BEACON_LOADTEST_SWEEP_H_
#define BEACON_LOADTEST_SWEEP_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "loadtest/client.h"
#include "loadtest/config.h"
#include "loadtest/stats.h"

namespace beacon::loadtest {

struct SweepLevel {
  double level = 0;
  RunSummary summary;
  bool pass = false;
  bool interrupted = false;
};

struct SweepResult {
  bool by_concurrency = false;
  Slo slo;
  double attainment_target = 0.9;
  std::vector<SweepLevel> levels;  // in the order run (ascending)
  // The highest passing level below the first failing one: the load the
  // server sustains within the SLO. Unset when the lowest level failed.
  std::optional<double> best;
  // A level failed: `best` is a knee inside the range tried, not merely its top.
  bool bounded = false;
};

// A level passes when it measured requests and at least `target` of them met
// the SLO (errors count against it).
bool LevelPasses(const RunSummary& summary, double target);

// Sets result->best and result->bounded from the levels' pass flags.
void JudgeSweep(SweepResult* result);

// "concurrency 4" or "rate 2.5/s".
std::string LevelName(bool by_concurrency, double level);

// Runs config.levels in order, each with a fresh Workload of the same seed
// (so every level sends the same requests), stopping after
// config.stop_after_fails failing levels in a row or when `stop` fires.
// `on_level` (optional) sees each level as it finishes.
SweepResult RunSweep(StreamClient* client, const Config& config, const std::atomic<bool>* stop,
                     const std::function<void(const SweepLevel&)>& on_level);

// Three stacked panels against load: TTFT and E2E percentiles, TPOT and ITL
// percentiles (log y, SLO bounds dashed), and request throughput with
// goodput; the best level marked on each.
absl::Status WriteSweepPlot(const SweepResult& result, const std::string& path);

// Several sweeps on shared axes (e.g. `full` against `beacon` on one server):
// TTFT p90, TPOT p90 and goodput against load, one series per sweep named
// by its first member, each sweep's best level marked in its colour.
absl::Status WriteComparisonPlot(const std::vector<std::pair<std::string, SweepResult>>& sweeps,
                                 const std::string& path);

}  // namespace beacon::loadtest

#endif  // BEACON_LOADTEST_SWEEP_H_
