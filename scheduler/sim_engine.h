// A simulated StepEngine for the scheduler's tests and the capacity planner.
//
// It runs no model but keeps real KV accounting: one KvCache of a tiny shape
// (1 layer, 1 KV head, head_dim 1, the given block size) and one SequenceKv
// per sequence, so blocks come from a real BlockPool and a leak shows as
// UsedBlocks() != 0 once every request is over. Per sequence it is told what
// to simulate (SimSequenceSpec) and behaves like the real engine:
//   - a prefill chunk of n tokens takes n slots; the chunk that completes the
//     prompt samples the first token (no slot: a sampled token's K/V is
//     written by the decode step that feeds it);
//   - a decode step appends one slot, samples a token, then compresses when
//     the sequence's EvictionSchedule says so (the arithmetic the real
//     SequenceCompressor uses), truncating to its bound, so a sequence's slot
//     count never exceeds EvictionSchedule::PeakSlots;
//   - it stops (kFinishedStopped) after `output_tokens` tokens when that is
//     below `max_new_tokens`, and ends by length (kFinishedLength) at
//     `max_new_tokens`.
//     There is no context length;
//   - the KV it writes is the scheduler's (ScheduledSeq::kv, registered by
//     AddSimRequest with the scheduler's KvCacheManager over this engine's
//     KvCache); with the manager's prefix cache on, prompts carry synthetic
//     token ids (SimSequenceSpec::prefix_id), so a sequence holding no KV
//     takes the cached leading blocks of its prompt as with the real engine
//     (never the block of the last prompt token, only when PrefixShareable),
//     and the first chunk's ScheduledSeq::computed says how many;
//   - Preempt (after the scheduler released the KV) asks for prompt + generated - 1 tokens to be
//     recomputed; the recompute prefill samples nothing (the next step decodes
//     the last sampled token), as the real engine does. A compressing
//     sequence starts its compressor afresh and, as engine/generation.cc does,
//     truncates to bound after every recompute chunk that ends past the
//     prompt, so it holds at most max(prompt, bound) + one chunk (what
//     optimistic admission assumes).
// Run fails the whole step with RESOURCE_EXHAUSTED when the pool cannot hold a
// chunk or a decode slot, and with FAILED_PRECONDITION / INVALID_ARGUMENT when
// the scheduler breaks the protocol (unknown id, no KV, decode while
// prefilling, a chunk past the prefill target or from another count of the
// tokens already computed, an id twice in one step).
//
// Thread ownership: one thread (the test's or the planner's).
#ifndef BEACON_SCHEDULER_SIM_ENGINE_H_
#define BEACON_SCHEDULER_SIM_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "kv/policy/eviction_schedule.h"
#include "kv/policy/kv_policy.h"
#include "kv/serving/kv_cache_manager.h"
#include "kv/store/kv_cache.h"
#include "scheduler/request.h"
#include "scheduler/scheduler.h"
#include "scheduler/step_engine.h"

namespace beacon {

struct SimSequenceSpec {
  int32_t prompt_tokens = 1;   // >= 1
  int32_t output_tokens = 1;   // tokens until the simulated EOS (>= 1); >= max_new_tokens: ends by length
  int32_t max_new_tokens = 1;  // >= 1
  KvPolicyOptions kv;          // policy name, budget, interval, keep_prompt
  // A shared prefix: the first `prefix_tokens` prompt tokens are the same
  // for every sequence of the same nonzero `prefix_id` (a system prompt);
  // the rest, and every token of prefix_id 0, are the sequence's own.
  // Only the prefix cache (EnablePrefixCache) makes this matter.
  uint64_t prefix_id = 0;
  int32_t prefix_tokens = 0;  // <= prompt_tokens
  // The request wants prompt logprobs: every prompt token runs, so nothing
  // is taken from the prefix cache (ShareablePromptBlocks, as the engine).
  bool prompt_logprobs = false;
};

// The scheduler's view of a simulated sequence: sizes and peak footprint
// (EvictionSchedule::PeakSlots); arrival and deadline are the caller's.
SchedRequest MakeSimRequest(RequestId id, const SimSequenceSpec& spec);
// What the KV manager must know of it; `with_prompt`: the prefix cache is on
// (synthetic prompt ids, shared for SimSequenceSpec::prefix_tokens).
KvSeqSpec MakeSimKvSpec(RequestId id, const SimSequenceSpec& spec, bool with_prompt);

class SimEngine : public StepEngine {
 public:
  // What the engine saw of a request once it was removed.
  struct Record {
    RequestState state = RequestState::kWaiting;  // the final state passed to Remove
    int32_t generated = 0;                        // tokens the engine sampled
    int32_t sched_generated = 0;                  // SchedRequest::generated as passed to Remove
    int32_t max_slots = 0;                        // most KV slots it ever held
    int32_t preemptions = 0;                      // Preempt calls
    int32_t sched_preemptions = 0;                // SchedRequest::preemptions as passed to Remove
    int32_t remove_calls = 0;                     // Remove calls (the contract: exactly 1)
    SchedRequest request;                         // the scheduler's record as passed to Remove
  };

  SimEngine(int32_t num_blocks, int32_t block_size);
  ~SimEngine() override;

  // Registers a sequence before the scheduler sees it (AddSimRequest does
  // both). INVALID_ARGUMENT for bad sizes, ALREADY_EXISTS for a live or
  // removed id.
  absl::Status AddSequence(RequestId id, const SimSequenceSpec& spec);

  // StepEngine.
  absl::Status Run(std::span<const ScheduledSeq> work, std::vector<SeqResult>* outcomes) override;
  int32_t Preempt(RequestId id) override;
  void Remove(const SchedRequest& request) override;

  // The KV memory the scheduler's KvCacheManager manages over this engine:
  // a tiny shape, real blocks.
  KvCache* mutable_cache() { return &cache_; }

  // Called at the end of every successful Run, before the scheduler applies
  // the outcomes: tests check invariants mid-step here.
  void SetRunHook(std::function<void(const SimEngine&)> hook) { run_hook_ = std::move(hook); }
  // The next Run that includes `id` fails that sequence alone (kFinishedError, KV released).
  void InjectError(RequestId id) { inject_error_.push_back(id); }
  // The time its results carry (SeqResult::at) from now on; the epoch until
  // set. The simulation has no clock of its own: a test or a planner gives it one.
  void SetTime(SchedClock::time_point t) { time_ = t; }

  // Stats.
  int32_t UsedBlocks() const { return cache_.pool().num_used(); }
  int32_t TotalBlocks() const { return cache_.pool().num_blocks(); }
  const KvCache& cache() const { return cache_; }
  int32_t peak_running() const { return peak_running_; }        // most sequences holding KV after a Run
  int32_t running() const { return running_; }                  // sequences holding KV now
  int64_t steps() const { return steps_; }                      // successful Runs
  int64_t tokens() const { return tokens_; }                    // tokens run (prefill + decode)
  int64_t exhausted() const { return exhausted_; }              // Runs failed with RESOURCE_EXHAUSTED
  int64_t protocol_errors() const { return protocol_errors_; }  // Runs failed for a protocol error
  int64_t unknown_removes() const { return unknown_removes_; }  // Remove/Preempt of ids never added
  const std::vector<ScheduledSeq>& last_work() const { return last_work_; }
  const std::vector<RequestId>& first_run_order() const { return first_run_order_; }
  const std::vector<RequestId>& remove_order() const { return remove_order_; }
  const absl::flat_hash_map<RequestId, Record>& records() const { return records_; }
  // The KV its steps wrote; null once removed, or before its first step.
  const SequenceKv* kv(RequestId id) const;
  int32_t generated(RequestId id) const;  // live or removed; 0 if unknown

 private:
  struct Seq {
    SimSequenceSpec spec;
    EvictionSchedule schedule{KvPolicyOptions{}, 0};  // the same arithmetic as SequenceCompressor
    int32_t prefill_target = 0;                       // tokens before decoding (prompt, or the recompute)
    int32_t prefill_done = 0;
    bool recompute = false;    // the current prefill is a recompute: it samples nothing
    SequenceKv* kv = nullptr;  // the scheduler's, from the last ScheduledSeq
    bool holds_kv = false;     // counted in running_
    bool ever_ran = false;     // in first_run_order_
    bool finished = false;     // reported a finished state: must not run again
    int32_t generated = 0;
    int32_t max_slots = 0;
    int32_t preemptions = 0;
  };
  absl::Status RunOne(const ScheduledSeq& w, Seq& s, SeqResult* out);
  // A prefill chunk: a run that has fed nothing starts past the `computed`
  // slots its KV took by reference at admission, as the real engine's; a
  // protocol error when the counts disagree.
  absl::Status StartChunk(const ScheduledSeq& w, Seq& s);
  void Drop(Seq& s);  // holds no KV any more (running_)

  KvCache cache_;
  absl::flat_hash_map<RequestId, Seq> seqs_;
  absl::flat_hash_map<RequestId, Record> records_;
  std::function<void(const SimEngine&)> run_hook_;
  SchedClock::time_point time_{};
  std::vector<RequestId> inject_error_;
  std::vector<ScheduledSeq> last_work_;
  std::vector<RequestId> first_run_order_, remove_order_;
  int32_t running_ = 0, peak_running_ = 0;
  int64_t steps_ = 0, tokens_ = 0, exhausted_ = 0, protocol_errors_ = 0, unknown_removes_ = 0;
};

// Registers `id` with `engine` and queues it on `scheduler` (whose KV manager
// runs over engine.mutable_cache()), with `request` (default
// MakeSimRequest(id, spec)): what a test or the planner does per request.
absl::Status AddSimRequest(Scheduler& scheduler, SimEngine& engine, RequestId id, const SimSequenceSpec& spec);
absl::Status AddSimRequest(Scheduler& scheduler, SimEngine& engine, RequestId id, const SimSequenceSpec& spec,
                           const SchedRequest& request);

}  // namespace beacon

#endif  // BEACON_SCHEDULER_SIM_ENGINE_H_
