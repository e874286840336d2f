// What beacon-plan reports: per configuration (KV policy and budget) the
// memory, admitted concurrency, throughput and latency of the simulated run,
// and for an SLO the sustainable rate and replicas; as a text table, JSON,
// CSV series for plots, and PNG plots when the beacon_plot library is built.
#ifndef BEACON_PLANNER_REPORT_H_
#define BEACON_PLANNER_REPORT_H_

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kv/policy/kv_policy.h"
#include "planner/plan_run.h"
#include "planner/slo.h"

namespace beacon::planner {

struct ConfigResult {
  std::string label;  // "full", "beacon b=2048"
  KvPolicyOptions kv;
  ResolvedPool pool;  // PoolForPolicy: the replica's pool less this policy's reserved state
  RunResult run;
  bool has_capacity = false;
  CapacityResult capacity;
  int64_t replicas = 0;  // for PlanReport::target_rate; -1: out of reach
};

// The published efficiency table (docs/design.md, "Published settings and
// numbers") against the model.
struct Reproduction {
  double published_full_gb = 77.0, published_beacon_gb = 13.3;
  double published_full_tps = 82.3, published_beacon_tps = 356.4;
  double modelled_full_gib = 0, modelled_beacon_gib = 0;  // weights + peak KV, GiB
  double modelled_full_gb = 0, modelled_beacon_gb = 0;    // the same in 1e9 bytes
  double kv_only_full_gb = 0, kv_only_beacon_gb = 0;      // peak KV alone, 1e9 bytes
  double modelled_full_tps = 0, modelled_beacon_tps = 0;
  double full_error = 0, beacon_error = 0;  // modelled GiB / published - 1
  bool within_5pct = false;
  double memory_ratio() const { return modelled_full_gib / modelled_beacon_gib; }
  double throughput_ratio() const { return modelled_beacon_tps / modelled_full_tps; }
  std::vector<std::string> assumptions;
};

struct PlanReport {
  ModelCost model;
  GpuProfile gpu;
  ResolvedPool pool;
  SchedulerConfig sched;
  WorkloadSpec workload;
  bool prefix_cache = true;  // beacon-serve --prefix-cache
  SloSpec slo;
  double target_rate = 0;         // requests/s over all replicas (0: not asked)
  std::vector<double> rate_grid;  // rates for the replicas-against-rate series
  std::vector<ConfigResult> configs;
  std::optional<Reproduction> reproduction;
};

std::string FormatTable(const PlanReport& r);
nlohmann::json ToJson(const PlanReport& r);

// Writes `dir`/budget_sweep.csv (throughput and memory against budget) and,
// with an SLO, `dir`/replicas_vs_rate.csv; and the PNG plots of both
// (plots.h). Returns the files written in `written`.
absl::Status WritePlotFiles(const PlanReport& r, const std::string& dir, std::vector<std::string>* written);

}  // namespace beacon::planner

#endif  // BEACON_PLANNER_REPORT_H_
