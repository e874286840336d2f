// beacon-eval synthetic: every (policy, budget) driven over synthetic
// revisiting traces (synthetic_trace.h) exactly as the engine drives it --
// through a SequenceCompressor on a real KvCache -- and scored by how much
// of each query's true attention mass falls on the positions it kept.
//
// Per trace position, for each run: the policy observes the pre-RoPE
// queries; the rotated keys are written to the run's cache with their
// positions; on decode steps (after the prompt) the policy, if it asks, sees
// the attention probabilities over its own cache's slots, as the backend
// would show it; then the recall of that step is measured over the slots the
// step attended to, and AfterDecodeStep may evict. The prompt is one prefill
// (queries observed, no attention shown), followed by AfterDecodeStep, as
// Generation does after sampling the first token.
#ifndef BEACON_EVAL_SYNTHETIC_EVAL_H_
#define BEACON_EVAL_SYNTHETIC_EVAL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "eval/synthetic_trace.h"

namespace beacon::eval {

struct SyntheticEvalOptions {
  std::vector<std::string> policies;  // KV policy names (not "full")
  std::vector<int32_t> budgets;
  int32_t interval = 128;  // decode steps between evictions
  // MakePolicyGrid's: empty = beacon at its default; else one beacon
  // configuration per value ("beacon/pq=on", "beacon/pq=off").
  std::vector<bool> beacon_prompt_queries;
  int traces = 4;               // traces of seeds seed, seed + 1, ...; results average over them
  SyntheticTraceOptions trace;  // trace.seed is the first seed
};

struct SyntheticResult {
  std::string policy;
  int32_t budget = 0;
  double revisit_recall = 0.0;  // mean over revisit queries (and query heads, traces)
  double all_recall = 0.0;      // mean over every decode query
  double plan_kept_end = 0.0;   // share of plan-span keys still cached at the end, over KV heads
  double peak_slots = 0.0;      // mean over traces
  double evictions = 0.0;       // mean over traces
  int64_t revisit_queries = 0;  // revisit steps measured, all traces
};

// Called after each trace: (trace index, number of traces).
using SyntheticProgress = std::function<void(int, int)>;

// Results in policies x budgets order (budget-major within a policy).
// INVALID_ARGUMENT for bad trace options, an unknown policy or a budget the
// policy options reject.
absl::StatusOr<std::vector<SyntheticResult>> RunSyntheticEval(const SyntheticEvalOptions& options,
                                                              const SyntheticProgress& progress);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_SYNTHETIC_EVAL_H_
