// The second pass of the model evaluation over one prompt: every compressed
// configuration replays the full cache's greedy trace teacher-forced (each
// step feeds trace token t to every sequence, whatever it would have
// chosen), in one ragged batch with a full-cache reference sequence, and is
// compared with the reference at every step:
//
//   kl      KL(p || q) of the next-token distributions, reference p, replay q
//   top1    argmax q == argmax p
//   recall  the share of the reference's attention probability (this step,
//           per query head, over positions 0..t) on the positions the
//           replay's cache held when it computed this step -- i.e. before
//           the step's AfterDecodeStep, which may then evict -- averaged
//           over query heads and layers
//
// "post" variants average only the steps after the configuration's first
// eviction (before it, a replay's cache equals the full one and every
// metric is exact). The loop itself (the reference, each replay's
// SequenceCompressor, one pass per step) is ReplayBatch's (replay_batch.h).
#ifndef BEACON_EVAL_REPLAY_H_
#define BEACON_EVAL_REPLAY_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime.h"
#include "eval/free_run.h"
#include "eval/metrics.h"
#include "eval/policy_grid.h"

namespace beacon::eval {

struct ReplayStats {
  Mean kl, top1, recall;                 // over every teacher-forced step
  Mean kl_post, top1_post, recall_post;  // over the steps after the first eviction
  // 1 + the leading steps whose greedy choice equals the trace's next token
  // (the first trace token comes from the shared prefill): the free-running
  // agreement length, derived. It must equal FreeRunResult::agreement; the
  // tool checks that the two passes agree.
  int32_t agreement = 0;
  int32_t peak_slots = 0;
  int64_t evictions = 0;
  // With a twin (PolicySpec::twin): after every step on which this spec or
  // its twin evicted, the Jaccard index of the two caches' kept positions
  // per (layer, KV head), averaged over them. 1 = the same slots kept.
  Mean kept_jaccard;
};

struct ReplayResult {
  std::vector<ReplayStats> stats;  // per spec
  // Steps where the reference's own greedy choice differs from the trace
  // (0 for a batch-invariant engine: the trace was made by the same model).
  int32_t reference_mismatches = 0;
};

// REQUIRES trace.size() >= 2, prompt + trace within the model's context.
absl::StatusOr<ReplayResult> RunReplay(Runtime* rt, const std::vector<int32_t>& prompt,
                                       const std::vector<int32_t>& trace, std::span<const PolicySpec> specs,
                                       int32_t prefill_chunk, const StepProgress& progress);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_REPLAY_H_
