// The step executor: the one place a batch of Generations becomes a forward
// pass and the pass's output goes back to them (issue 33). beacon-serve's
// GenerationEngine, beacon-run's and the tests' static batches
// (engine/batch_runner.h) and the eval's free runs all step through it, so
// what a benchmark or an evaluation measures is the step serving runs.
//
// An observer (set_observer) sees every step between the forward pass and
// the generations' advance: the evaluation takes its per-step measurements
// there (eval/replay_batch.h), on the step serving runs, with each item's
// KV as the pass left it (nothing the step will evict is gone yet).
//
// One step: each item's Generation::NextEntry (up to `max_tokens` prompt or
// recompute tokens, or the last sampled token), one ragged forward pass, then
// each Generation's Advance in order. The draw happens where the logits are:
// on the device (Backend::ForwardSample) when the backend samples there and
// every generation allows it (no penalties, no logprobs or logit bias, no
// prompt rows), on the host otherwise. Sequences under a grammar (structured
// output) have their token masks filled before the pass, in parallel across
// them on the backend's host pool; the device draws with the masks where the
// backend samples there (Backend::ForwardSample, EntrySampling::allowed).
//
// Thread ownership: the caller's (the engine thread when serving).
#ifndef BEACON_ENGINE_STEP_EXECUTOR_H_
#define BEACON_ENGINE_STEP_EXECUTOR_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend.h"
#include "engine/generation.h"

namespace beacon {

// One sequence's share of a step.
struct ExecItem {
  Generation* gen = nullptr;  // not finished
  int32_t max_tokens = 1;     // prompt or recompute tokens to run at most (>= 1); decoding runs 1
};

// What the step did to it.
struct ExecResult {
  TokenEvent event;           // the sampled token's event; id -1 mid-prompt or mid-recompute
  int32_t fed = 0;            // tokens run
  int64_t evictions = 0;      // evictions during the step (its compressor's)
  int64_t evicted_slots = 0;  // slots they dropped
};

class StepExecutor;

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // After the forward pass of `items`, before any of them advances: their
  // logits are `step.logits(i)`.
  virtual void AfterForward(std::span<const ExecItem> items, const StepExecutor& step) = 0;
};

class StepExecutor {
 public:
  // `backend` must outlive the executor.
  explicit StepExecutor(Backend* backend) : backend_(backend) {}

  // Runs one step over `items` and sets one result per item, in order. A
  // backend error is returned as is, before any generation advanced: the
  // generations stay as they were (their KV may hold the failed pass's
  // writes past their slot counts, which the next pass overwrites).
  absl::Status Run(std::span<const ExecItem> items, std::vector<ExecResult>* results);

  // Whether the last Run drew on the device.
  bool last_on_device() const { return on_device_; }

  // Optional; must outlive the executor. While one is set every step draws
  // on the host (the observer reads the logits).
  void set_observer(StepObserver* observer) { observer_ = observer; }
  // Item i's logits row of the last Run that drew on the host (the row of
  // its last fed token); valid until the next Run.
  std::span<const float> logits(size_t item) const;

 private:
  Backend* backend_;
  StepObserver* observer_ = nullptr;
  // Reused across steps.
  std::vector<ForwardEntry> entries_;
  std::vector<size_t> first_row_;  // entries_[i]'s first logits row
  std::vector<size_t> last_row_;   // and its last
  std::vector<float> logits_;
  std::vector<EntrySampling> sampling_;
  std::vector<int32_t> sampled_;
  std::vector<size_t> masked_;  // items drawing under a grammar this step
  bool on_device_ = false;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_STEP_EXECUTOR_H_
