// ReplayBatch: one trace replayed teacher-forced (every step feeds the
// trace's token to every sequence, whatever it would have chosen) by several
// KV configurations side by side with a full-cache reference, one ragged
// forward pass per step, through the StepExecutor serving runs
// (engine/step_executor.h). Each entry is a Generation (engine/generation.h)
// whose generated tokens are forced to the trace (GenerationOptions::
// forced_tokens; past the trace each draws its own greedy token), so its
// compressor evicts exactly where a served sequence's would: after the
// prompt and after every step (SequenceCompressor::AfterDecodeStep, inside
// Generation's advance). Entry 0 is the reference: a full cache whose
// RecordingPolicy (its attention observer) keeps each step's attention.
// Entry i + 1 replays specs[i].
//
// Per-step measurements run in the executor's observer (Step's `measure`):
// after the forward pass, before the step's evictions, so they see each
// entry's KV as the pass attended to it. The fidelity replay (replay.h), the
// revisit-step re-scoring (revisit_steps.h) and the needle's compressed pass
// (needle_passes.h) measure on top of it; none repeats the loop.
//
// Thread ownership: the caller's.
#ifndef BEACON_EVAL_REPLAY_BATCH_H_
#define BEACON_EVAL_REPLAY_BATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/generation.h"
#include "engine/runtime.h"
#include "engine/step_executor.h"
#include "eval/policy_grid.h"
#include "eval/recording_policy.h"
#include "kv/policy/sequence_compressor.h"

namespace beacon::eval {

class ReplayBatch : private StepObserver {
 public:
  // Every entry runs `prompt`, then generates at most `max_new` tokens, the
  // first forced.size() of them `forced` (forced.size() <= max_new); a KV
  // pool holds them all at their peaks, with slack. `record`: the reference
  // records its attention (recorder(); off, it is a plain full cache).
  // INVALID_ARGUMENT from a spec's options or the tokens.
  static absl::StatusOr<std::unique_ptr<ReplayBatch>> Create(Runtime* rt, std::vector<int32_t> prompt,
                                                             std::vector<int32_t> forced, int32_t max_new,
                                                             std::span<const PolicySpec> specs, bool record = true);

  // The prompt through every entry together, in chunks of at most `chunk`
  // tokens. The last chunk's step makes each entry's first token and runs
  // its compressor's first AfterDecodeStep (no eviction: the prompt is within
  // any bound), as serving does; logits() then hold the last prompt token's.
  absl::Status Prefill(int32_t chunk);
  // One decode step of every entry: each feeds its last token (the trace's,
  // while forced). `measure` (may be empty) runs after the forward pass and
  // before the step's evictions, with logits() and kv() as the pass left
  // them. FAILED_PRECONDITION once an entry has finished (max_new reached).
  absl::Status Step(const std::function<void()>& measure = {});

  // The last pass's logits of an entry (0: the reference; i + 1: spec i).
  std::span<const float> logits(size_t entry) const { return executor_.logits(entry); }
  const RecordingPolicy& recorder() const { return recorder_; }
  size_t size() const { return gens_.size() - 1; }  // the specs
  const SequenceKv& kv(size_t i) const { return *gens_[i + 1]->kv(); }
  const SequenceKv& reference_kv() const { return *gens_[0]->kv(); }
  const SequenceCompressor& compressor(size_t i) const { return *gens_[i + 1]->compressor(); }
  // Entry 0 the reference, i + 1 spec i: its generated tokens.
  const std::vector<int32_t>& generated(size_t entry) const { return gens_[entry]->generated(); }

 private:
  ReplayBatch(Runtime* rt, std::unique_ptr<KvCache> cache);  // the backend runs the steps
  void AfterForward(std::span<const ExecItem> items, const StepExecutor& step) override;
  absl::Status Run(int32_t max_tokens, const std::function<void()>& measure);

  std::unique_ptr<KvCache> cache_;  // before the generations: they hold its blocks
  RecordingPolicy recorder_;
  std::vector<std::unique_ptr<Generation>> gens_;  // 0: the reference; i + 1: spec i
  StepExecutor executor_;
  std::vector<ExecItem> items_;
  std::vector<ExecResult> results_;
  const std::function<void()>* measure_ = nullptr;  // the running step's
};

}  // namespace beacon::eval

#endif  // BEACON_EVAL_REPLAY_BATCH_H_
