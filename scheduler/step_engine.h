// The narrow interface between the scheduler and whatever runs the model: the
// real engine (engine/serving/generation_engine.h: forward pass, sampling, KV
// compression) or a simulated one (tests, the capacity planner). The
// scheduler decides what runs, keeps each request's one record (SchedRequest)
// and owns every sequence's KV (its KvCacheManager: blocks, sharing, the
// prefix cache); each step it hands the engine plain data (a ScheduledSeq per
// sequence: which one, how many tokens, how many of the prefill are already
// in its KV, the KV to write), and the engine runs it and reports back what
// happened (a SeqResult per sequence: sampled or not, when, and the state).
// The engine never calls back into the scheduler or its KV manager.
//
// The step's vocabulary, scheduler to backend (docs/design.md, "One step"):
//   ScheduledSeq  -> ExecItem  -> ForwardEntry   (what to run)
//   SeqResult    <-  ExecResult <- logits/tokens (what it did)
// each translated once, by GenerationEngine (ScheduledSeq <-> ExecItem) and
// the StepExecutor (ExecItem <-> ForwardEntry).
//
// Thread ownership: the engine thread.
#ifndef BEACON_SCHEDULER_STEP_ENGINE_H_
#define BEACON_SCHEDULER_STEP_ENGINE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "kv/serving/kv_cache_manager.h"
#include "scheduler/request.h"

namespace beacon {

// One sequence's share of a step: `n_tokens` prompt (or recompute) tokens
// while prefilling, or 1 while decoding.
struct ScheduledSeq {
  RequestId id = 0;
  int32_t n_tokens = 0;
  bool prefill = false;
  // Prefill only: tokens of this run of the prefill (the prompt, or a
  // recompute) already in the sequence's KV before this chunk. On a run's
  // first chunk that is the prefix the scheduler took by reference at
  // admission (the prefix cache, a sample group's prompt; 0 for none): the
  // engine starts past it. An engine whose own count disagrees fails the step.
  int32_t computed = 0;
  // The sequence's KV, which the step writes (owned by the scheduler's
  // KvCacheManager; the same object from Add to the request's end).
  SequenceKv* kv = nullptr;
};

// What a step did to one sequence. `state` is the request's state after the
// step, one of:
//   kRunning          still running (mid-prefill, or sampled a token);
//   kFinishedStopped  sampled a token and hit EOS / a stop token / a stop string;
//   kFinishedLength   sampled a token and hit max_tokens or the context;
//   kFinishedError    the engine failed this sequence (its KV is released).
// The other states are the scheduler's to set: an engine that reports one
// breaks the protocol, and the scheduler fails the step.
struct SeqResult {
  RequestId id = 0;
  bool sampled = false;  // a new token was produced this step
  RequestState state = RequestState::kRunning;
  // When the sampled token was produced, on the engine's clock (the real
  // engine: SchedClock::now() as it streams the token; the planner: its
  // virtual clock; the plain SimEngine, which has no clock: the epoch). The
  // scheduler stamps the request's first and last token times from it.
  SchedClock::time_point at{};
};

class StepEngine {
 public:
  virtual ~StepEngine() = default;

  // Runs one step over `work` (ids the scheduler admitted) and appends one
  // outcome per entry, in order (same ids). A non-OK status fails the whole
  // step: the scheduler then fails every sequence in `work` and removes
  // them; so does an OK step whose outcomes break that contract.
  virtual absl::Status Run(std::span<const ScheduledSeq> work, std::vector<SeqResult>* outcomes) = 0;

  // The sequence lost its KV (the scheduler has released it) and will be
  // recomputed. Returns how many tokens it must run again before it decodes
  // (prompt + output so far - 1, or the prompt if nothing was sampled yet);
  // the last recompute chunk samples nothing. A compressing sequence evicts
  // after every recompute chunk that ends past the prompt, so it holds at
  // most max(prompt, bound) + one chunk while recomputing.
  virtual int32_t Preempt(RequestId id) = 0;
  // The request is over: `request` is its one record, whose state is
  // terminal and says why (finished, cancelled, timed out, failed); its
  // timings, counts and reservation are there too. Free what the engine
  // holds for it and report its end (the real engine builds the client's
  // final record from `request` and its generation); its KV is still
  // readable here, and the scheduler frees it right after. Called exactly once per request the engine was given,
  // from Step(), Abort() or the scheduler's destructor (AbortAll).
  virtual void Remove(const SchedRequest& request) = 0;
};

}  // namespace beacon

#endif  // BEACON_SCHEDULER_STEP_ENGINE_H_
