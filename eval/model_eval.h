// beacon-eval model: how faithfully each KV policy, at each budget,
// reproduces the full cache's behaviour on a real model. Per prompt
// (chat-formatted with the model's template):
//   1. free_run.h: the full cache's greedy trace of `tokens` tokens and, in
//      the same batches, each configuration's free-running greedy agreement
//      length;
//   2. replay.h: every configuration teacher-forced on that trace in one
//      batch with a full-cache reference: KL, top-1 agreement, attention
//      recall.
// Results average over prompts (each prompt weighs the same).
#ifndef BEACON_EVAL_MODEL_EVAL_H_
#define BEACON_EVAL_MODEL_EVAL_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime.h"
#include "eval/prompt_set.h"
#include "nlohmann/json.hpp"

namespace beacon::eval {

struct ModelEvalOptions {
  std::vector<std::string> policies;
  std::vector<int32_t> budgets;
  int32_t interval = 128;  // decode steps between evictions
  // MakePolicyGrid's: empty = beacon at its default; else one beacon
  // configuration per value ("beacon/pq=on", "beacon/pq=off").
  std::vector<bool> beacon_prompt_queries;
  std::vector<bool> beacon_bf16_state;  // likewise ("beacon/state=f32", "beacon/state=bf16")
  int32_t tokens = 2048;                // trace length T per prompt
  int32_t prefill_chunk = 512;          // prompt tokens per sequence per forward step
  // Non-empty: each finished prompt is saved there (eval/model_checkpoint.h)
  // and, with `resume`, a prompt saved under the same key is reused.
  std::string checkpoint_dir;
  bool resume = false;
  // What the caller adds to the checkpoint key: the model and the runtime
  // settings that change results (RunModelEval adds T, the interval, the
  // configurations and the prompt).
  nlohmann::json checkpoint_key = nlohmann::json::object();
};

struct ModelResult {
  std::string policy;
  int32_t budget = 0;
  double kl = 0, top1 = 0, recall = 0;                 // over all T-1 teacher-forced steps
  double kl_post = 0, top1_post = 0, recall_post = 0;  // over the steps after the first eviction; NaN if none
  double agreement = 0;                                // free-running agreement length (tokens)
  double peak_slots = 0;                               // peak KV slots per KV head (prompt included)
  double evictions = 0;                                // eviction rounds over the trace
  double post_steps = 0;                               // steps after the first eviction
  double kept_jaccard = std::nan("");                  // ReplayStats::kept_jaccard; NaN without a twin
};

struct PromptSummary {
  std::string id;
  int32_t prompt_tokens = 0;
  double trace_seconds = 0;          // pass 1: trace + free runs
  double replay_seconds = 0;         // pass 2: teacher-forced replays
  int32_t reference_mismatches = 0;  // replay reference vs trace (0 expected)
  int32_t agreement_mismatches = 0;  // configurations whose free-run and derived agreement differ (0 expected)
  double distinct_4grams = 0;        // distinct / all 4-grams of the trace: 1 = no repetition, near 0 = a loop
  bool reused = false;               // read from a checkpoint, not computed by this run
  std::string text;                  // the trace, decoded
  std::vector<ModelResult> results;  // this prompt's, per configuration
};

struct ModelEvalReport {
  std::vector<ModelResult> results;  // policies x budgets, policy-major
  std::vector<PromptSummary> prompts;
  double seconds = 0;
};

// Progress lines go to `log` (stderr in the tool). REQUIRES rt has a
// tokenizer. INVALID_ARGUMENT for a bad grid or a prompt that does not fit
// the context with `tokens` more.
absl::StatusOr<ModelEvalReport> RunModelEval(Runtime* rt, const std::vector<EvalPrompt>& prompts,
                                             const ModelEvalOptions& options, std::FILE* log);

// Distinct / all n-grams of `ids` (1 for fewer than n tokens).
double DistinctNgramRatio(const std::vector<int32_t>& ids, int n);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_MODEL_EVAL_H_
