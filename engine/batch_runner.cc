#include "engine/batch_runner.h"

#include <vector>

#include "engine/step_executor.h"

namespace beacon {

namespace {

// One step of the unfinished generations through `executor`; false when none is left.
absl::StatusOr<bool> StepUnfinished(StepExecutor* executor, std::span<Generation* const> gens,
                                    const BatchRunnerOptions& options,
                                    const std::function<void(size_t, const TokenEvent&)>& on_token) {
  std::vector<ExecItem> items;
  std::vector<size_t> owner;
  for (size_t i = 0; i < gens.size(); ++i) {
    if (gens[i]->finished()) continue;
    items.push_back({gens[i], options.prefill_chunk});
    owner.push_back(i);
  }
  if (items.empty()) return false;
  std::vector<ExecResult> results;
  if (absl::Status s = executor->Run(items, &results); !s.ok()) return s;
  for (size_t j = 0; j < results.size(); ++j) {
    if (results[j].event.id >= 0 && on_token) on_token(owner[j], results[j].event);
  }
  return true;
}

}  // namespace

absl::StatusOr<bool> RunStep(Backend* backend, std::span<Generation* const> gens, const BatchRunnerOptions& options,
                             const std::function<void(size_t, const TokenEvent&)>& on_token) {
  StepExecutor executor(backend);
  return StepUnfinished(&executor, gens, options, on_token);
}

absl::Status RunToCompletion(Backend* backend, std::span<Generation* const> gens, const BatchRunnerOptions& options,
                             const std::function<void(size_t, const TokenEvent&)>& on_token) {
  StepExecutor executor(backend);  // its buffers serve every step
  for (;;) {
    absl::StatusOr<bool> more = StepUnfinished(&executor, gens, options, on_token);
    if (!more.ok()) return more.status();
    if (!*more) return absl::OkStatus();
  }
}

}  // namespace beacon
