// The capacity planner's StepEngine: the scheduler's own simulated engine
// (scheduler/sim_engine.h: real BlockPool, the SequenceCompressor's eviction
// rule, preemption by recompute) for the KV accounting, composed with the
// roofline cost model (cost_model.h) for time. Each Run delegates to
// SimEngine, reads every sequence's slot count before and after (what
// attention read, what it wrote, who evicted how much), prices the step and
// advances a virtual clock by it. Nothing of the scheduler or the KV
// accounting is copied: beacon::Scheduler drives this engine exactly as it
// drives beacon-serve's GenerationEngine.
//
// Cost per Run is O(sequences in the step): no per-token state beyond
// SimEngine's block tables.
//
// Thread ownership: one thread (the planner's run loop).
#ifndef BEACON_PLANNER_COST_ENGINE_H_
#define BEACON_PLANNER_COST_ENGINE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "planner/cost_model.h"
#include "scheduler/sim_engine.h"
#include "scheduler/step_engine.h"

namespace beacon::planner {

// A point on the planner's virtual clock (seconds since the run began) as
// the scheduler's time type.
SchedClock::time_point VirtualTime(double seconds);

// One request's life in virtual seconds, as the scheduler's record ends it
// (counts) and the virtual clock timed it.
struct RequestTiming {
  double arrival_s = 0;
  double first_token_s = -1;  // end of the step that sampled its first token
  double finish_s = -1;       // end of the step it finished in (or when it was aborted)
  int32_t prompt_tokens = 0;
  int32_t generated = 0;
  int32_t max_slots = 0;  // most KV slots it held
  int32_t preemptions = 0;
  RequestState state = RequestState::kWaiting;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t decode_tokens = 0, prefill_tokens = 0;
  int64_t evictions = 0;  // sequence evictions
  int64_t compute_bound_steps = 0;
  int64_t failed_steps = 0;                                         // Runs SimEngine refused (pool exhausted, protocol)
  double busy_s = 0;                                                // sum of step times
  double memory_s = 0, compute_s = 0, overhead_s = 0, evict_s = 0;  // summed components
  double bytes = 0, flops = 0;
  double decode_seq_seconds = 0;  // sum over steps of decoding sequences x step time
  int32_t peak_used_blocks = 0;   // including slots held mid-step before an eviction
  int32_t max_decode_batch = 0;
};

class CostEngine : public StepEngine {
 public:
  CostEngine(int32_t num_blocks, int32_t block_size, const CostModel& cost);

  // Registers a request that arrived at `arrival_s` (virtual seconds).
  absl::Status AddSequence(RequestId id, const SimSequenceSpec& spec, double arrival_s);

  // StepEngine.
  absl::Status Run(std::span<const ScheduledSeq> work, std::vector<SeqResult>* outcomes) override;
  int32_t Preempt(RequestId id) override;
  void Remove(const SchedRequest& request) override;
  // The KV memory the scheduler's KvCacheManager manages (SimEngine's).
  KvCache* mutable_cache() { return sim_.mutable_cache(); }

  // The virtual clock: advanced by every Run; AdvanceTo moves it forward
  // over idle time (never back).
  double now_s() const { return now_s_; }
  void AdvanceTo(double t) {
    if (t > now_s_) now_s_ = t;
  }

  // Ids removed since the last call, in removal order.
  std::vector<RequestId> TakeFinished();
  // REQUIRES the id was added.
  const RequestTiming& timing(RequestId id) const { return timings_.at(id); }
  const absl::flat_hash_map<RequestId, RequestTiming>& timings() const { return timings_; }
  const EngineStats& stats() const { return stats_; }
  const SimEngine& sim() const { return sim_; }
  const CostModel& cost() const { return cost_; }
  // The most recent step's priced cost.
  const StepCost& last_step() const { return last_step_; }

 private:
  SimEngine sim_;
  CostModel cost_;
  double now_s_ = 0;
  absl::flat_hash_map<RequestId, RequestTiming> timings_;
  std::vector<RequestId> finished_;
  std::vector<int32_t> slots_before_;  // scratch, per work item
  EngineStats stats_;
  StepCost last_step_;
};

}  // namespace beacon::planner

#endif  // BEACON_PLANNER_COST_ENGINE_H_
