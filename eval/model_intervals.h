// Intervals for the `beacon-eval model` tables (docs/fidelity.md): every
// figure is a mean over prompts, so its uncertainty is the prompts'
// spread. Each mean gets a percentile bootstrap interval over prompts
// (eval/bootstrap.h), and a policy is compared with another by the
// interval of the paired per-prompt difference: both ran on the same
// traces, so the pairing removes the prompts' own difficulty, which
// dominates the spread of either mean.
#ifndef BEACON_EVAL_MODEL_INTERVALS_H_
#define BEACON_EVAL_MODEL_INTERVALS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "eval/bootstrap.h"
#include "eval/model_eval.h"

namespace beacon::eval {

// A metric of ModelResult that the tables report with an interval.
struct ModelMetric {
  const char* key;             // the ResultTable column ("kl_post", ...)
  double ModelResult::*field;  // where it lives
  bool higher_is_better;
};

// kl_post (lower is better), top1_post, recall_post, agreement.
const std::vector<ModelMetric>& IntervalMetrics();

struct MeanInterval {
  double mean = 0.0;
  Interval ci;  // NaN ends when no prompt has the metric
  int n = 0;    // prompts that have it (a "post" metric needs an eviction)
};

// The mean of `metric` of configuration `c` over the prompts that have it,
// with its bootstrap interval. REQUIRES every prompt has configuration c.
MeanInterval PromptInterval(const std::vector<PromptSummary>& prompts, size_t c, const ModelMetric& metric,
                            int resamples, uint64_t seed);

struct PairedDifference {
  std::string subject, other;  // configurations' policies
  int32_t budget = 0;
  std::string metric;
  MeanInterval diff;  // mean over prompts of subject - other
  // "win": the interval excludes 0 on the subject's better side; "lose":
  // on its worse side; "tie": it contains 0; "-": no prompt has both.
  std::string verdict;
};

// `subject` (e.g. "beacon") against every other policy of the same budget,
// for every IntervalMetrics() metric, in the prompts' configuration order.
// Configurations are matched by ModelResult::policy and budget; a subject
// missing from the results gives an empty list.
std::vector<PairedDifference> CompareWithPaired(const std::vector<PromptSummary>& prompts, const std::string& subject,
                                                int resamples, uint64_t seed);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_MODEL_INTERVALS_H_
