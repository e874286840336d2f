// Service-level objectives on request latency, shared by beacon-loadtest
// (loadtest/stats.h judges measured requests) and the capacity planner
// (planner/slo.h adds an attainment and judges simulated runs). Part of
// `beacon_workload`, which needs no gRPC.
//
// Syntax: `ttft_ms=..,tpot_ms=..,e2e_ms=..`, any non-empty subset, each key at
// most once, values > 0 milliseconds; whitespace around items, keys and values
// is ignored.
#ifndef BEACON_WORKLOAD_SLO_H_
#define BEACON_WORKLOAD_SLO_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace beacon::workload {

// Upper bounds a good request meets; unset ones are not checked. TPOT is not
// checked for requests of fewer than 2 output tokens (callers' contract).
struct Slo {
  std::optional<double> ttft_ms, tpot_ms, e2e_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2e_ms; }
  std::string ToString() const;  // "ttft_ms=500,tpot_ms=50" ("" when empty); ParseSlo reads it back
};

// Parses the syntax above. Errors are INVALID_ARGUMENT starting "--slo".
absl::StatusOr<Slo> ParseSlo(absl::string_view spec);

}  // namespace beacon::workload

#endif  // BEACON_WORKLOAD_SLO_H_
