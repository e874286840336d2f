// The first pass of the model evaluation over one prompt: the full-cache
// greedy trace and, in the same ragged batches, every compressed
// configuration generating greedily from the same prompt, each dropped at
// its first token that differs from the full cache's token of that step.
//
// Every sequence is a Generation (the engine's own per-sequence state, with
// its SequenceCompressor), so eviction runs exactly as in serving. The
// engine's forward pass is batch-invariant (matmul.h: a token's result never
// depends on the batch it shares), so batching changes no token.
#ifndef BEACON_EVAL_FREE_RUN_H_
#define BEACON_EVAL_FREE_RUN_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime.h"
#include "eval/policy_grid.h"

namespace beacon::eval {

struct FreeRunResult {
  std::vector<int32_t> trace;      // the full cache's greedy tokens (ignore_eos), `tokens` of them
  std::vector<int32_t> agreement;  // per spec: tokens generated equal to the trace before the first
                                   // mismatch (== tokens when none)
};

// (decode steps done, decode steps in all, sequences still in the batch).
using StepProgress = std::function<void(int32_t, int32_t, int)>;

// REQUIRES rt has a tokenizer. INVALID_ARGUMENT for an empty prompt, tokens
// < 2 or a prompt + tokens past the model's context; backend errors as they
// come.
absl::StatusOr<FreeRunResult> RunTraceAndFreeRuns(Runtime* rt, const std::vector<int32_t>& prompt,
                                                  std::span<const PolicySpec> specs, int32_t tokens,
                                                  int32_t prefill_chunk, const StepProgress& progress);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_FREE_RUN_H_
