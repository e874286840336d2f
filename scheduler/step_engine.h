// The narrow interface between the scheduler and whatever runs the model: the
// real engine (engine/serving/generation_engine.h: forward pass, sampling, KV
// compression) or a simulated one (tests, the capacity planner). The
// scheduler decides what runs; the engine runs it and reports back what
// happened. What KV every sequence holds, and what it may share, the
// scheduler asks the engine's KvCacheManager (the same class for both).
//
// Thread ownership: the engine thread.
#ifndef BEACON_SCHEDULER_STEP_ENGINE_H_
#define BEACON_SCHEDULER_STEP_ENGINE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "kv/kv_cache_manager.h"
#include "scheduler/request.h"

namespace beacon {

// One sequence's share of a step: `n_tokens` prompt (or recompute) tokens
// while prefilling, or 1 while decoding.
struct SeqWork {
  RequestId id = 0;
  int32_t n_tokens = 0;
  bool prefill = false;
};

// What a step did to one sequence. `state` is the request's state after the
// step, one of:
//   kRunning          still running (mid-prefill, or sampled a token);
//   kFinishedStopped  sampled a token and hit EOS / a stop token / a stop string;
//   kFinishedLength   sampled a token and hit max_tokens or the context;
//   kFinishedError    the engine failed this sequence (its KV is released).
// The other states are the scheduler's to set: an engine that reports one
// breaks the protocol, and the scheduler fails the step.
struct SeqOutcome {
  RequestId id = 0;
  bool sampled = false;  // a new token was produced this step
  RequestState state = RequestState::kRunning;
};

class StepEngine {
 public:
  virtual ~StepEngine() = default;

  // Runs one step over `work` (ids the scheduler admitted) and appends one
  // outcome per entry, in order (same ids). A non-OK status fails the whole
  // step: the scheduler then fails every sequence in `work` and removes
  // them; so does an OK step whose outcomes break that contract.
  virtual absl::Status Run(std::span<const SeqWork> work, std::vector<SeqOutcome>* outcomes) = 0;

  // Gives back the sequence's KV; it will be recomputed. Returns how many
  // tokens it must run again before it decodes (prompt + output so far - 1,
  // or the prompt if nothing was sampled yet); the last recompute chunk
  // samples nothing. A compressing sequence evicts after every recompute
  // chunk that ends past the prompt, so it holds at most
  // max(prompt, bound) + one chunk while recomputing.
  virtual int32_t Preempt(RequestId id) = 0;
  // The request is over: `request.state` is terminal and says why (finished,
  // cancelled, timed out, failed). Free everything it holds. The scheduler
  // calls this exactly once per request it accepted, from Step(), Abort()
  // or its destructor's drain (AbortAll).
  virtual void Remove(const SchedRequest& request) = 0;

  // The KV cache manager this engine writes every sequence's KV through
  // (kv/kv_cache_manager.h; the engine owns it). The scheduler asks it
  // directly: pool facts, BlocksToAppend, OwnBlocks, and prefix sharing at
  // admission (Probe, then Adopt: the engine finds the taken slots in the
  // sequence's KV when its first prefill chunk runs, and starts past them).
  virtual KvCacheManager& kv() = 0;
};

}  // namespace beacon

#endif  // BEACON_SCHEDULER_STEP_ENGINE_H_
