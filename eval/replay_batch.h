// ReplayBatch: one trace replayed teacher-forced (every step feeds the
// trace's token to every sequence, whatever it would have chosen) by several
// KV configurations side by side with a full-cache reference, one ragged
// forward pass per step. Entry 0 is the reference: a full cache whose
// RecordingPolicy keeps each step's attention. Entry i + 1 replays specs[i]
// with its own SequenceCompressor built as Generation builds it, whose
// AfterDecodeStep runs after the prefill and after every step (AfterStep),
// its policy in ForwardEntry::policy. The fidelity replay (replay.h) and the
// revisit-step re-scoring (revisit_steps.h) measure on top of it; neither
// repeats the loop.
//
// Thread ownership: the caller's.
#ifndef BEACON_EVAL_REPLAY_BATCH_H_
#define BEACON_EVAL_REPLAY_BATCH_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime.h"
#include "eval/policy_grid.h"
#include "eval/recording_policy.h"
#include "kv/policy/sequence_compressor.h"

namespace beacon::eval {

class ReplayBatch {
 public:
  // A KV pool for the reference and every replay of a `n_prompt` + `n_trace`
  // token run (each at its peak, with slack). `record`: the reference
  // records its attention (recorder(); off, it is a plain full cache).
  // INVALID_ARGUMENT from a spec's compressor.
  static absl::StatusOr<std::unique_ptr<ReplayBatch>> Create(Runtime* rt, int32_t n_prompt, int32_t n_trace,
                                                             std::span<const PolicySpec> specs, bool record = true);

  // The prompt through every entry together, in chunks of at most `chunk`
  // tokens; then each replay's AfterDecodeStep (no eviction: the prompt is
  // within any bound), as Generation does once the first token is sampled.
  // logits() then hold the last chunk's.
  absl::Status Prefill(std::span<const int32_t> prompt, int32_t chunk);
  // Feeds `token` at `position` to every entry: one forward pass.
  absl::Status Feed(int32_t token, int32_t position);
  // Feeds each entry its own token (tokens[0] the reference's, tokens[i + 1]
  // replay i's: free-running greedy answers), all at `position`.
  absl::Status FeedEach(std::span<const int32_t> tokens, int32_t position);
  // After a step's metrics: each replay's AfterDecodeStep(position + 1),
  // one at a time (an eviction returns blocks to the shared pool).
  void AfterStep(int32_t position);

  // The last pass's logits of an entry (0: the reference; i + 1: spec i).
  std::span<const float> logits(size_t entry) const;
  const RecordingPolicy& recorder() const { return recorder_; }
  size_t size() const { return replays_.size(); }
  const SequenceKv& kv(size_t i) const { return *replays_[i].kv; }
  const SequenceKv& reference_kv() const { return ref_kv_; }
  const SequenceCompressor& compressor(size_t i) const { return *replays_[i].compressor; }

 private:
  struct Replay {
    std::unique_ptr<SequenceKv> kv;
    std::unique_ptr<SequenceCompressor> compressor;
  };
  ReplayBatch(Runtime* rt, std::unique_ptr<KvCache> cache);

  Runtime* rt_;
  std::unique_ptr<KvCache> cache_;  // before the sequences: they hold its blocks
  SequenceKv ref_kv_;
  RecordingPolicy recorder_;
  std::vector<Replay> replays_;
  std::vector<ForwardEntry> entries_;  // 0: the reference; i + 1: replays_[i]
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;  // what Feed's entries point at, one per entry
};

}  // namespace beacon::eval

#endif  // BEACON_EVAL_REPLAY_BATCH_H_
