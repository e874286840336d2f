// The files of `beacon-eval model` (docs/fidelity.md) from a
// ModelEvalReport:
//   model_results.{csv,md,json}  the means over prompts, each IntervalMetrics()
//                                metric with its bootstrap interval over prompts
//                                (columns <metric>_lo, <metric>_hi, <metric>_n);
//   model_per_prompt.csv         the raw data: one row per prompt and
//                                configuration;
//   model_comparison.csv         beacon against every other policy at each
//                                budget: the paired difference over prompts,
//                                its interval, and win / tie / lose.
// The column keys of model_results.csv are what tools/plot_fidelity.py reads.
#ifndef BEACON_EVAL_MODEL_REPORT_H_
#define BEACON_EVAL_MODEL_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "eval/model_eval.h"
#include "eval/model_intervals.h"
#include "eval/report.h"

namespace beacon::eval {

struct ModelReportOptions {
  int resamples = 2000;  // bootstrap resamples per interval
  uint64_t seed = 1;     // of the bootstrap
  std::string subject = "beacon";
};

struct ModelReportTables {
  ResultTable summary;     // model_results
  ResultTable per_prompt;  // model_per_prompt
  ResultTable comparison;  // model_comparison
  std::string markdown;    // model_results.md
};

// `heading`: the markdown's first paragraph (model, prompts, T, time).
// REQUIRES !report.prompts.empty().
ModelReportTables BuildModelReport(const ModelEvalReport& report, const ModelReportOptions& options,
                                   const std::string& heading);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_MODEL_REPORT_H_
