// What `beacon-eval needle` writes (docs/fidelity.md "Needle"): the per-case
// raw rows, the calibration per D, the success rate of every (policy,
// budget, D) cell with its intervals over cases, and beacon's paired
// difference from every other policy. Pure functions of the case results,
// so the tool can rewrite every file after each case (a run stopped early
// leaves consistent, if smaller, results).
#ifndef BEACON_EVAL_NEEDLE_REPORT_H_
#define BEACON_EVAL_NEEDLE_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "eval/bootstrap.h"
#include "eval/needle.h"
#include "eval/report.h"
#include "nlohmann/json.hpp"

namespace beacon::eval {

struct NeedleCell {
  std::string policy;
  int32_t budget = 0;
  int32_t distance = 0;
  int cases = 0;  // kept cases at this D
  int successes = 0;
  double rate = 0;             // successes / cases
  Interval bootstrap, wilson;  // 95%, over cases
  int evicted_cases = 0;       // cases on which the configuration evicted at all
  double mean_evictions = 0;
};

struct NeedleCalibration {
  int32_t distance = 0;
  int tried = 0, kept = 0, full_wrong = 0, filler_restates = 0;
  int inconsistent = 0;  // kept cases whose batch full cache disagreed with pass 1 (0 expected)
};

// Beacon minus `other` at one (budget, D), paired over the kept cases.
struct NeedleComparison {
  std::string other;
  int32_t budget = 0;
  int32_t distance = 0;
  int cases = 0;
  double difference = 0;  // beacon's rate - other's
  Interval bootstrap;     // 95% paired bootstrap of the per-case difference
  // "wins" / "loses" when the interval excludes 0, else "ties"; "= full"
  // when neither evicted on any case.
  std::string verdict;
};

struct NeedleSummary {
  std::vector<NeedleCalibration> calibration;  // per D, in the given order
  std::vector<NeedleCell> cells;               // D outer, then the rows' configuration order
  std::vector<NeedleComparison> comparisons;   // when "beacon" is among the policies
};

// `resamples` bootstrap resamples per interval, seeded with `seed`.
NeedleSummary SummarizeNeedle(const std::vector<NeedleCaseResult>& results, const std::vector<int32_t>& distances,
                              int resamples, uint64_t seed);

// One row per (kept case, configuration): case, D, kind, answer, policy,
// budget, success, evictions, ran, generated text.
ResultTable NeedleRawTable(const std::vector<NeedleCaseResult>& results);
ResultTable NeedleCellTable(const NeedleSummary& summary);
ResultTable NeedleCalibrationTable(const NeedleSummary& summary);
// Every (case, D) with its status, full-cache answer and filler text.
nlohmann::json NeedleCasesJson(const std::vector<NeedleCaseResult>& results);
// The summary as markdown: calibration, one policy x D table per budget
// ("rate [bootstrap lo, hi]"), the paired comparisons. `heading` goes on
// top as given.
std::string NeedleMarkdown(const NeedleSummary& summary, const std::string& heading);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_NEEDLE_REPORT_H_
