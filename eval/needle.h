// beacon-eval needle: does a compressed cache keep what gets revisited?
// A fact is stated early in the generated passage, D tokens of the model's
// own story follow, then a cue asks for the fact (eval/needle_cases.h for
// the text, eval/needle_passes.h for the two passes). Per (case, D):
//
//   1. the full cache alone makes the filler and answers: the calibration.
//      The case is kept only if the full cache's answer is right and the
//      filler never restates the answer (else the fact would not be D
//      tokens away); so every kept case measures only what compression
//      loses.
//   2. kept cases: every (policy, budget) and the full cache answer in one
//      ragged batch, teacher-forced over the same tokens. A configuration
//      that cannot evict before its last step on this case is the full
//      cache token for token (EvictsBeforeLastStep) and is not run: its row
//      copies the full cache's answer with 0 evictions.
//
// Cases run id-major (case 0 at every D, then case 1, ...), so a run
// stopped early has about as many cases at every D.
#ifndef BEACON_EVAL_NEEDLE_H_
#define BEACON_EVAL_NEEDLE_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/runtime.h"
#include "eval/needle_cases.h"

namespace beacon::eval {

struct NeedleOptions {
  std::vector<std::string> policies;  // compressing policies (MakePolicyGrid); the full cache always runs
  std::vector<int32_t> budgets;
  std::vector<int32_t> distances;  // filler tokens D between the fact and the cue
  int32_t cases = 20;              // cases tried per D: ids 0 .. cases - 1
  uint64_t seed = 1;               // MakeNeedleCase's
  int32_t interval = 128;          // decode steps between evictions
  // The filler's sampler: moderate, so the story neither loops nor turns to
  // noise. Its seed is the case's, the same at every D, so a case's filler
  // at a shorter D is the prefix of its filler at a longer one.
  float filler_temperature = 0.8f;
  float filler_top_p = 0.95f;
  // OpenAI-style, over the filler's own tokens: at temperature 0.8 alone a
  // 135M model's story falls into loops within a thousand tokens.
  float filler_frequency_penalty = 0.0f;
  // Greedy tokens past the answer's own token count (of " " + answer): the
  // score needs the character after the answer.
  int32_t answer_slack = 2;
  int32_t prefill_chunk = 512;
};

// One configuration's answer on one kept (case, D).
struct NeedleRow {
  std::string policy;  // "full" for the full cache
  int32_t budget = 0;  // 0 for the full cache
  bool success = false;
  std::string generated;  // the decoded greedy answer tokens
  int64_t evictions = 0;
  int32_t peak_slots = 0;
  bool ran = true;  // false: never evicts on this case, answer copied from the full cache
};

// One (case, D): its calibration and, if kept, every configuration's row.
struct NeedleCaseResult {
  int32_t id = 0;
  int32_t distance = 0;
  FactKind kind = FactKind::kName;
  std::string answer;
  std::string status;  // "kept", "full cache wrong" or "filler restates the answer"
  bool kept = false;
  std::string full_text;    // pass 1's greedy answer, decoded
  std::string filler_text;  // the filler, decoded
  double filler_distinct_4grams = 0;
  int32_t prompt_tokens = 0;
  int32_t total_tokens = 0;  // prompt + fact + D + cue + answer
  // Kept cases: pass 2's full cache answered token for token as pass 1 did
  // (expected always: batch invariance).
  bool full_consistent = true;
  double full_seconds = 0, batch_seconds = 0;
  std::vector<NeedleRow> rows;  // kept cases: the full cache first, then the grid's order
};

// Runs every case and calls on_case after each (case, D). Progress lines go
// to `log`. INVALID_ARGUMENT for a bad grid, no distances, a distance < 1
// or cases < 1 (all before any model work); FAILED_PRECONDITION without a
// tokenizer; backend errors as they come.
absl::Status RunNeedleEval(Runtime* rt, const NeedleOptions& options, std::FILE* log,
                           const std::function<void(const NeedleCaseResult&)>& on_case);

// The checks of RunNeedleEval that need no model, for the tool to run
// before it loads one.
absl::Status ValidateNeedleOptions(const NeedleOptions& options);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_NEEDLE_H_
