// Iteration-level continuous batching (docs/design.md, "A request's path").
//
// Every Step():
//   1. expires requests whose deadline passed (state kFinishedTimeLimit);
//   2. schedules: every decoding sequence gets one token, then prefilling
//      sequences get prompt chunks, then waiting requests are admitted FCFS
//      and get chunks, all within `max_step_tokens` and `max_running`;
//   3. runs the step on the StepEngine and applies the outcomes; outcomes
//      that do not match the work (too few, other ids, a state only the
//      scheduler sets) fail the step like an engine error.
// Requests that finish are handed to StepEngine::Remove with their final
// state; then their KV is freed.
//
// The scheduler owns the KV cache manager (kv/serving/kv_cache_manager.h): every
// sequence's KV from Add to its end, the pool's accounting, prefix sharing.
// It admits against it, preempts by releasing it, and hands each step's
// sequences their KV in the ScheduledSeq, as vLLM's scheduler owns its
// KVCacheManager and sends the worker block tables.
//
// Capacity (what fits in the KV pool) is kept apart from the token budget
// (what fits in one step):
//   - kReserve (default): a request is admitted only when its peak footprint
//     (SchedRequest::peak_slots, in blocks) fits beside the footprints
//     already reserved. Under a compressing policy the footprint is constant
//     in the output length, so the same pool admits many more long-output
//     requests. Admitted sequences can never run out of blocks.
//   - kOptimistic: admitted when the pool has room for the prompt now (plus a
//     watermark); when a decode step would not fit, the newest running
//     sequence is preempted (its KV freed, recomputed later), as vLLM does.
// FCFS: the head of the queue blocks those behind it, so no request starves.
//
// Shared prefixes (a sample group's prompt, the prefix cache): for a request
// holding no KV the scheduler asks its KV manager what whole leading blocks
// it can take by reference (KvCacheManager::Probe), takes them (Adopt) and
// tells the engine in the first chunk's ScheduledSeq::computed; a sample group's later member waits
// at the head of the queue until the first has run the prompt. Admission
// counts a shared block once, by looking at the pool as it is:
//   committed = sum over running r of max(0, reserved_r - own_r)
// is what the running sequences may still allocate (reserved_r: blocks at
// peak beyond those r took by reference; own_r: blocks it allocated so far),
// and a request is admitted when committed + its own reservation + the idle
// cached blocks it would take fit in FreeBlocks() (free + idle cached).
// Blocks held by several sequences are simply in use, counted by none of
// them, so a block stays counted for as long as anyone holds it. Without
// sharing this is exactly "sum of footprints <= pool".
//
// Thread ownership: the engine thread.
#ifndef BEACON_SCHEDULER_SCHEDULER_H_
#define BEACON_SCHEDULER_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kv/serving/kv_cache_manager.h"
#include "kv/store/kv_cache.h"
#include "scheduler/request.h"
#include "scheduler/step_engine.h"

namespace beacon {

enum class AdmissionMode { kReserve, kOptimistic };
std::string_view AdmissionModeName(AdmissionMode m);
absl::StatusOr<AdmissionMode> ParseAdmissionMode(std::string_view name);

struct SchedulerConfig {
  int32_t max_running = 64;       // sequences in the running set at most
  int32_t max_waiting = 1024;     // waiting queue bound; past it Add() fails
  int32_t max_step_tokens = 512;  // tokens per step (decode + prefill)
  int32_t prefill_chunk = 256;    // prompt tokens per sequence per step
  AdmissionMode admission = AdmissionMode::kReserve;
  // kOptimistic: fraction of the pool kept free when admitting.
  double watermark = 0.01;

  // INVALID_ARGUMENT naming the field.
  absl::Status Validate() const;
};

// What one Step() did, for the caller's bookkeeping and metrics.
struct StepReport {
  int32_t decode_seqs = 0;
  int32_t prefill_seqs = 0;
  int32_t tokens = 0;  // tokens run (prefill + decode)
  int32_t admitted = 0;
  int32_t preempted = 0;
  int32_t finished = 0;        // any terminal state, expiries included
  bool ran = false;            // an engine step ran
  absl::Status engine_status;  // the engine's error, if the step failed
  // Token latencies of the step, from the engine's SeqResult::at: each first
  // token's time since its request's arrival, and each later token's since
  // the same request's previous one (for the TTFT and ITL histograms).
  std::vector<double> ttft_seconds;
  std::vector<double> itl_seconds;
};

class Scheduler {
 public:
  // `cache` (the KV pool the engine computes into) and `engine` must
  // outlive the scheduler.
  Scheduler(const SchedulerConfig& config, KvCache* cache, StepEngine* engine);
  // Aborts (kFinishedCancelled) whatever is still queued or running.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request and registers its KV (none held yet); returns the
  // sequence's KV, which the engine's own record of the request may keep
  // (stable until the request ends). The engine is told of the id by the
  // caller, after this. Errors, after which nothing of the request is kept:
  //   RESOURCE_EXHAUSTED  the waiting queue is full (preempted requests,
  //                       which wait again, do not count);
  //   INVALID_ARGUMENT    its footprint exceeds the whole pool: it could never
  //                       run; or the KV spec is invalid (KvCacheManager::Add);
  //   ALREADY_EXISTS      the id is live.
  absl::StatusOr<SequenceKv*> Add(const SchedRequest& request, KvSeqSpec kv);
  // Drops a request the engine refused after Add: no Remove() call; its KV
  // (none yet) is forgotten. False if the id is unknown.
  bool Forget(RequestId id);

  // Ends a request now with `final_state` (terminal), wherever it is: its KV
  // is freed before Abort returns. False if the id is unknown (already over).
  bool Abort(RequestId id, RequestState final_state);
  // Aborts every request (drain timeout, shutdown).
  void AbortAll(RequestState final_state);

  // One iteration; `now` drives deadlines and timings.
  StepReport Step(SchedClock::time_point now);

  bool HasWork() const { return !waiting_.empty() || !running_.empty(); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  // Reserve mode: blocks in use plus those the running sequences may still
  // allocate (shared ones once; the sum of footprints without sharing); 0
  // in optimistic mode.
  int32_t reserved_blocks() const;
  const SchedulerConfig& config() const { return config_; }
  // The scheduler's record of a live request; null when unknown or over.
  const SchedRequest* Find(RequestId id) const;
  // Blocks a footprint of `slots` takes.
  int32_t BlocksFor(int64_t slots) const;
  // Every sequence's KV and the pool's accounting; EnablePrefixCache before
  // the first Add. Read-only for everyone else (stats).
  KvCacheManager& kv() { return kv_; }
  const KvCacheManager& kv() const { return kv_; }

 private:
  // A step in the making: its work and what is left of its budgets.
  struct Batch {
    std::vector<ScheduledSeq> work;
    int32_t token_budget = 0;  // tokens the step may still take
    int32_t step_blocks = 0;   // optimistic mode: blocks the step's work takes
  };

  // Step's phases: expire, plan, run, apply (or fail the step).
  void Expire(SchedClock::time_point now, StepReport* report);
  Batch Plan(SchedClock::time_point now, StepReport* report);
  // The engine's Run, with its outcomes checked against the work (one per
  // entry, same ids, a state the engine may report): INTERNAL otherwise.
  absl::Status RunEngine(std::span<const ScheduledSeq> work, std::vector<SeqResult>* outcomes);
  // REQUIRES outcomes passed RunEngine's checks.
  void Apply(std::span<const ScheduledSeq> work, std::span<const SeqResult> outcomes, StepReport* report);
  // Ends every sequence of a failed step with kFinishedError.
  void FailStep(std::span<const ScheduledSeq> work, const absl::Status& status, StepReport* report);

  // Plan's parts. Optimistic mode: preempts the newest sequences until the
  // running sequences' next work fits the free blocks; returns those blocks.
  int32_t PreemptUntilStepFits(StepReport* report);
  // Every decoding sequence one token (oldest first), then prefill chunks.
  void ScheduleRunning(Batch* plan, StepReport* report);
  // Admits waiting requests FCFS while capacity, the running cap and the
  // token budget allow, each with its first chunk.
  void AdmitWaiting(SchedClock::time_point now, Batch* plan, StepReport* report);
  bool TryAdmit(SchedRequest* r, int32_t* step_blocks);
  // What the running sequences may still allocate under their reservations.
  int32_t CommittedBlocks() const;
  void PreemptNewest(StepReport* report);
  void Finish(RequestId id, RequestState state);

  SchedulerConfig config_;
  StepEngine* engine_;
  KvCacheManager kv_;  // before requests_ (whose ids it holds KV for); destroyed after the drain
  absl::flat_hash_map<RequestId, SchedRequest> requests_;
  std::deque<RequestId> waiting_;   // FCFS; preempted requests go to the front
  std::vector<RequestId> running_;  // admission order
  int32_t preempted_waiting_ = 0;   // entries of waiting_ in state kPreempted
  uint64_t next_admit_seq_ = 0;
};

}  // namespace beacon

#endif  // BEACON_SCHEDULER_SCHEDULER_H_
