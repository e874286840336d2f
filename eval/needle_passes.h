// The two model passes of one needle case at one distance D
// (eval/needle.h):
//
//   1. RunFullCache: the full cache alone reads the prompt, is fed the fact
//      sentence token by token, samples D filler tokens itself (seeded,
//      end-of-generation, special and NeedleStream::filler_banned tokens
//      masked so the story does not end), is fed the cue, and decodes the answer greedily. This makes
//      the case's filler and is its calibration.
//   2. RunCompressed: every configuration, plus the full cache as entry 0,
//      in one ragged batch per step, teacher-forced over fact + filler + cue
//      (each step feeds the same token to every sequence), then each decodes
//      its own greedy answer. Each configuration has its own
//      SequenceCompressor, built as Generation builds it, AfterDecodeStep
//      after the prefill and after every step (as eval/replay.cc), so each
//      policy observes and evicts exactly as in serving.
//
// Every passage token is a decode step in both passes, and the engine's
// forward pass is batch-invariant (kernels/cpu/matmul.h), so pass 2's full
// cache must reproduce pass 1's answer token for token: the tool checks it.
#ifndef BEACON_EVAL_NEEDLE_PASSES_H_
#define BEACON_EVAL_NEEDLE_PASSES_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime.h"
#include "engine/sampler.h"
#include "eval/policy_grid.h"
#include "kv/policy/kv_policy.h"

namespace beacon::eval {

// One case's tokens, the filler aside.
struct NeedleStream {
  std::vector<int32_t> prompt;  // the chat-formatted user turn (prefilled)
  std::vector<int32_t> fact;    // decode steps right after the prompt
  std::vector<int32_t> cue;     // decode steps right after the filler
  int32_t answer_tokens = 1;    // greedy tokens decoded after the cue
  // Tokens the filler may not sample besides end-of-generation and special
  // ones: the first word token of a name answer, so that the story cannot
  // take the name for a character and restate the fact a few tokens before
  // the cue (eval/needle.cc picks them).
  std::vector<int32_t> filler_banned;

  // Forward steps after the prefill for `distance` filler tokens: every
  // passage token, then every answer token but the last.
  int32_t Feeds(int32_t distance) const {
    return static_cast<int32_t>(fact.size() + cue.size()) + distance + answer_tokens - 1;
  }
  // Slots of the full cache at the end.
  int32_t TotalTokens(int32_t distance) const { return static_cast<int32_t>(prompt.size()) + Feeds(distance) + 1; }
};

struct FullCacheRun {
  std::vector<int32_t> filler;  // the D sampled tokens
  std::vector<int32_t> answer;  // answer_tokens greedy tokens after the cue
};

// Pass 1. INVALID_ARGUMENT for an empty prompt, fact or cue, distance < 1,
// answer_tokens < 1 or a stream past the model's context. REQUIRES rt has a
// tokenizer (for the mask).
absl::StatusOr<FullCacheRun> RunFullCache(Runtime* rt, const NeedleStream& stream, int32_t distance,
                                          const SamplingParams& filler_sampling, int32_t prefill_chunk);

struct ConfigAnswer {
  std::vector<int32_t> answer;  // answer_tokens greedy tokens
  int64_t evictions = 0;        // eviction rounds over the stream
  int32_t peak_slots = 0;       // peak KV slots per head, prompt included
};

// Pass 2. Returns the full cache's answer first, then one per spec, in
// order. INVALID_ARGUMENT as RunFullCache, and for an empty filler.
absl::StatusOr<std::vector<ConfigAnswer>> RunCompressed(Runtime* rt, const NeedleStream& stream,
                                                        const std::vector<int32_t>& filler,
                                                        std::span<const PolicySpec> specs, int32_t prefill_chunk);

// Whether a sequence with these options, a prompt of n_prompt tokens and
// `feeds` forward steps after it evicts before its last forward step (an
// eviction after the last step changes no output). One that does not is the
// full cache token for token (its cache holds every slot and the forward
// pass is batch-invariant), so the tool need not run it. Mirrors
// SequenceCompressor::AfterDecodeStep's calls (after the prefill, then after
// each step), asking the same EvictionSchedule.
bool EvictsBeforeLastStep(const KvPolicyOptions& options, int32_t n_prompt, int32_t feeds);

}  // namespace beacon::eval

#endif  // BEACON_EVAL_NEEDLE_PASSES_H_
