// PNG plots of a plan (beacon_plot, plot/png_plot.h): throughput and peak
// memory against the KV budget, and replicas against the request rate. The
// CSV series (report.h) hold the same data.
#ifndef BEACON_PLANNER_PLOTS_H_
#define BEACON_PLANNER_PLOTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace beacon::planner {

struct PlanReport;

// Writes `dir`/budget_sweep.png and, with an SLO, `dir`/replicas_vs_rate.png;
// appends their paths to `written`. `dir` exists.
absl::Status WritePngPlots(const PlanReport& r, const std::string& dir, std::vector<std::string>* written);

}  // namespace beacon::planner

#endif  // BEACON_PLANNER_PLOTS_H_
