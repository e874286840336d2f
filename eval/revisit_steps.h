// beacon-eval revisit-steps: the fidelity replays of `beacon-eval model`
// (eval/replay.h, docs/fidelity.md) re-scored on revisit steps only
// (issue 32). Most steps of a trace attend to the prompt and the last few
// dozen tokens, which every policy keeps; an average over all of them hides
// the steps the method is about. A step is a revisit step for budget B at
// threshold x when the full-cache reference puts at least x of its attention
// mass (averaged over layers and query heads) on generated tokens older
// than B + interval, i.e. on positions p with prompt <= p < pos - B - interval,
// which no cache of that budget can hold all of. Traces that loop
// (distinct-4-gram ratio below `min_distinct`) are dropped: there recency
// wins only because the text repeats itself.
//
// Each kept trace is replayed as `beacon-eval model` replays it: the greedy
// trace teacher-forced into every configuration and a full-cache reference
// in one ragged batch, AfterDecodeStep after every step. The trace's tokens
// are the checkpoint's decoded text encoded again; the reference's greedy
// choice is compared with every next token (reference_mismatches), so a
// re-encoding that is not the model's own greedy trace shows.
#ifndef BEACON_EVAL_REVISIT_STEPS_H_
#define BEACON_EVAL_REVISIT_STEPS_H_

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime.h"
#include "eval/metrics.h"
#include "eval/policy_grid.h"
#include "eval/recording_policy.h"
#include "eval/replay.h"

namespace beacon::eval {

// The reference's latest decode step: its attention mass on positions
// [begin, end), averaged over layers and query heads (slot == position: the
// reference never evicts). 0 for an empty range.
double ReferenceMass(const RecordingPolicy& ref, const PolicyModelInfo& model, int32_t begin, int32_t end);

struct RevisitStepStats {
  // Per threshold (in the order given): over the revisit steps of the
  // spec's budget.
  std::vector<Mean> kl, top1, recall;
  Mean kl_post, top1_post, recall_post;  // over every step after the spec's first eviction
  Mean old_mass;  // the reference's mass on old generated tokens, over every step past B + interval
};

struct RevisitStepTrace {
  std::string id;
  double distinct_4grams = 0;
  int32_t prompt_tokens = 0, trace_tokens = 0;
  int32_t reference_mismatches = 0;  // steps whose reference greedy choice is not the next trace token
  double seconds = 0;
  std::vector<RevisitStepStats> stats;  // per spec
};

// Replays one trace. REQUIRES trace.size() >= 2; thresholds non-empty, each
// in (0, 1].
absl::StatusOr<RevisitStepTrace> RunRevisitStepReplay(Runtime* rt, const std::vector<int32_t>& prompt,
                                                      const std::vector<int32_t>& trace,
                                                      std::span<const PolicySpec> specs,
                                                      const std::vector<double>& thresholds, int32_t prefill_chunk);

struct RevisitStepsOptions {
  std::string from;                   // a `beacon-eval model` output directory (its prompts/<id>.json)
  std::vector<std::string> policies;  // MakePolicyGrid's
  std::vector<int32_t> budgets;
  std::vector<double> thresholds = {0.10};
  double min_distinct = 0.10;
  std::string out_dir;
};

// The whole command: reads FROM/prompts/*.json (their settings: the
// interval, the system message), replays the kept traces on `rt` and
// writes OUT/revisit_steps.{md,json} after every trace. INVALID_ARGUMENT
// for bad options or checkpoints; progress lines to `log`.
absl::Status RunRevisitSteps(Runtime* rt, const RevisitStepsOptions& options, std::FILE* log);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_REVISIT_STEPS_H_
