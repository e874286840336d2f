// Steps a fixed set of generations together until all finish: each step runs
// one ragged batch (decoding sequences contribute one token, prefilling ones a
// prompt chunk) and hands every sequence its logits.
//
// This is the static-batch driver of beacon-run and the tests; the
// continuous-batching scheduler (scheduler/) replaces it for serving. Both
// run every step through the one StepExecutor (engine/step_executor.h), so
// the step is the same, device sampling included.
#ifndef BEACON_ENGINE_BATCH_RUNNER_H_
#define BEACON_ENGINE_BATCH_RUNNER_H_

#include <cstdint>
#include <functional>
#include <span>

#include "absl/status/status.h"
#include "engine/backend.h"
#include "engine/generation.h"

namespace beacon {

struct BatchRunnerOptions {
  int32_t prefill_chunk = 512;  // prompt tokens per sequence per step
};

// Calls on_token(index into gens, event) for every sampled token, in order.
// Returns the first backend error (the generations stay as they were before
// the failed step).
absl::Status RunToCompletion(Backend* backend, std::span<Generation* const> gens, const BatchRunnerOptions& options,
                             const std::function<void(size_t, const TokenEvent&)>& on_token);

// One step of the above; returns false when every generation had finished.
absl::StatusOr<bool> RunStep(Backend* backend, std::span<Generation* const> gens, const BatchRunnerOptions& options,
                             const std::function<void(size_t, const TokenEvent&)>& on_token);

}  // namespace beacon

#endif  // BEACON_ENGINE_BATCH_RUNNER_H_
