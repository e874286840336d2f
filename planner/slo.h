// Service-level objectives and the replicas they need.
//
// An SLO is beacon-loadtest's bounds (workload/slo.h, one parser for both
// tools): upper bounds on TTFT, TPOT and end-to-end latency,
// `ttft_ms=..,tpot_ms=..,e2e_ms=..` (any subset), and
// an attainment: a run meets the SLO when at least that share of its
// requests finished within every bound (TPOT is not checked for one-token
// outputs) and none was rejected.
//
// The sustainable rate per replica is found by bisection between 0 and 95%
// of the replica's saturation rate: the steady-state completion rate of a
// closed loop at max_running clients (no open system sustains more, and a
// Poisson queue at full utilisation grows without bound). Replicas for a total rate R assume a load balancer
// that splits Poisson traffic evenly (each replica sees Poisson R / replicas),
// so replicas = ceil(R / sustainable rate).
//
// Each probe runs a finite number of requests from an empty server; the
// first min(max_running, requests / 4) are warm-up and not judged. A short
// run is still optimistic near saturation; more requests (--slo-requests)
// tighten it.
#ifndef BEACON_PLANNER_SLO_H_
#define BEACON_PLANNER_SLO_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "planner/plan_run.h"
#include "workload/slo.h"

namespace beacon::planner {

struct SloSpec {
  workload::Slo bounds;     // empty: no SLO
  double attainment = 0.9;  // share of requests that must meet every bound
  bool enabled() const { return !bounds.empty(); }
  std::string Describe() const;  // "ttft_ms=500,tpot_ms=50 for 90% of requests"
};

// The bounds as workload::ParseSlo (INVALID_ARGUMENT starting "--slo") and an
// attainment in (0, 1] (INVALID_ARGUMENT starting "--slo-attainment").
absl::StatusOr<SloSpec> ParseSlo(std::string_view spec, double attainment);

struct SloVerdict {
  bool met = false;
  double attainment = 0;  // share of the run's requests meeting every bound
  std::string why;        // what missed, empty when met
};
// `warmup`: the first requests (by id, i.e. arrival order) left out of the
// attainment, as beacon-loadtest's --warmup: they met an empty server.
SloVerdict CheckSlo(const RunResult& r, const SloSpec& slo, int32_t warmup = 0);

// Requests/s a closed-loop run completes in steady state: completions after
// the first one, up to the last request's arrival (while every client is
// busy), over that window; the whole run's completed / makespan when the
// run has no such window (fewer requests than clients).
double SteadyStateRate(const RunResult& r);

inline constexpr double kUtilisationCeiling = 0.95;

struct CapacityResult {
  double saturation_rate = 0;  // SteadyStateRate of the closed loop at max_running
  double max_rate = 0;         // requests/s per replica meeting the SLO (0: not even at the lowest probe)
  int32_t probes = 0;          // simulation runs spent
  SloVerdict at_max;           // the verdict at max_rate
  std::string limit;           // what failed just above max_rate
};

struct SearchOptions {
  int32_t requests = 0;    // requests per probe (0: max(the workload's, 4 x max_running));
                           // the saturation run takes at least 3 x max_running
  int32_t iterations = 8;  // bisection steps (relative precision 2^-iterations)
};

// `base` is the configuration; its workload's arrival kind and rate are
// replaced by the probes'.
absl::StatusOr<CapacityResult> FindMaxRate(const RunInputs& base, const SloSpec& slo, const SearchOptions& opt,
                                           const std::function<void(const std::string&)>& progress = nullptr);

// ceil(rate / max_rate); -1 when max_rate is 0 (the SLO is out of reach).
int64_t ReplicasFor(double rate, double max_rate);

}  // namespace beacon::planner

#endif  // BEACON_PLANNER_SLO_H_
