// The narrow interface between the scheduler and whatever runs the model: the
// real engine (server/generation_engine.h: forward pass, sampling, KV
// compression) or a simulated one (tests, the capacity planner). The
// scheduler decides what runs; the engine runs it and reports back what
// happened and how much KV it holds.
//
// Thread ownership: the engine thread.
#ifndef BEACON_SCHEDULER_STEP_ENGINE_H_
#define BEACON_SCHEDULER_STEP_ENGINE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
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

  // KV pool facts, in blocks.
  virtual int32_t TotalBlocks() const = 0;
  virtual int32_t FreeBlocks() const = 0;
  virtual int32_t BlockSize() const = 0;
  // Blocks the sequence would additionally take to append `n` tokens now.
  virtual int32_t BlocksToAppend(RequestId id, int32_t n) const = 0;

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

  // Sample groups (SchedRequest::group). The prompt slots request `id` could
  // take by reference from its group's first member now: -1 while that
  // member is still running the prompt (the request waits), 0 when nothing
  // can be shared (it runs alone: no group, the first member gone, or its
  // options forbid sharing), else a multiple of the block size.
  virtual int32_t SharedPrefixSlots(RequestId id) const { return 0; }
  // Takes them (REQUIRES SharedPrefixSlots(id) > 0 just now): the request's
  // prompt then starts past them. Returns the slots taken.
  virtual int32_t AdoptSharedPrefix(RequestId id) { return 0; }
};

}  // namespace beacon

#endif  // BEACON_SCHEDULER_STEP_ENGINE_H_
