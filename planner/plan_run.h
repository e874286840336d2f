// One simulated deployment: beacon::Scheduler (the code beacon-serve runs)
// over a CostEngine, on a virtual clock advanced by each step's modelled
// time, fed by a synthetic workload.
//
// Arrivals wait in the run's own FIFO and are handed to the scheduler as its
// waiting queue drains below max_running, so Scheduler::Step (which scans
// every queued request for deadlines) stays O(batch) even when thousands
// wait; admission is FCFS and admits at most max_running per step, so this
// changes no decision. A Poisson arrival that finds max_waiting requests
// already waiting is rejected, as beacon-serve's queue bound rejects it
// (RESOURCE_EXHAUSTED); closed-loop clients bound the queue themselves.
//
// Thread ownership: the caller's; one run per call.
#ifndef BEACON_PLANNER_PLAN_RUN_H_
#define BEACON_PLANNER_PLAN_RUN_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "kv/policy/kv_policy.h"
#include "planner/cost_engine.h"
#include "planner/cost_model.h"
#include "planner/gpu_profile.h"
#include "planner/workload.h"
#include "scheduler/scheduler.h"

namespace beacon::planner {

// The KV pool of one replica.
struct PoolSpec {
  double mem_fraction = 0.9;  // of the GPU's memory for weights + reserve + KV (vLLM's gpu_memory_utilization)
  double kv_pool_bytes = 0;   // > 0: this many bytes of KV instead
  int32_t block_size = 16;    // slots per block (beacon-serve --kv-block-size)
};

struct ResolvedPool {
  double bytes = 0;  // KV bytes available (whole blocks)
  int32_t blocks = 0;
  int32_t block_size = 16;
  double bytes_per_block = 0;
  // Sized from the GPU's memory (PoolSpec::mem_fraction), not given: the
  // memory a configuration needs besides KV comes out of it (PoolForPolicy).
  bool from_memory = false;
  // Taken out of the pool by PoolForPolicy for the policy's device state.
  double policy_state_bytes = 0;
};

// INVALID_ARGUMENT when the weights and reserve leave no room for KV, or the
// pool would exceed the block pool's int32 range.
absl::StatusOr<ResolvedPool> ResolvePool(const PoolSpec& spec, const GpuProfile& gpu, const ModelCost& model);

// The pool one configuration gets. beacon-serve reserves BeaconKV's
// per-sequence device state for --max-running sequences at start-up, on
// the device that holds the pool (apps/serve_kv_pool.cc,
// ReserveBeaconStates), and the eviction scratch. When the pool was sized
// from the GPU's memory, that reservation (ReservedPolicyBytes:
// max_running x PolicyStateBytesPerSequence + EvictScratchBytes) comes out of it:
// the pool shrinks by whole blocks. A pool given in bytes (kv_pool_bytes,
// like beacon-serve's --kv-pool-tokens) is kept: the state is then on top,
// as RunResult::reserved_policy_state_bytes reports. INVALID_ARGUMENT when
// the reservation leaves no block.
absl::StatusOr<ResolvedPool> PoolForPolicy(const ResolvedPool& pool, const KvPolicyOptions& kv, const ModelCost& model,
                                           int32_t max_running);

struct RunInputs {
  ModelCost model;
  GpuProfile gpu;
  ResolvedPool pool;
  SchedulerConfig sched;
  KvPolicyOptions kv;
  WorkloadSpec workload;
  bool prefix_cache = true;  // beacon-serve --prefix-cache (matters with a shared prefix)
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
  int64_t n = 0;
};
// Linear interpolation between order statistics (NumPy's default). Sorts `v`.
Percentiles ComputePercentiles(std::vector<double>& v);

// One finished request's latencies (virtual seconds).
struct RequestSample {
  double arrival_s = 0, finish_s = 0;
  double ttft_s = 0, tpot_s = 0, e2e_s = 0;
  int32_t output_tokens = 0;
  bool ok = false;  // finished by stop or length (not failed)
};

struct RunResult {
  // Memory.
  int64_t footprint_slots = 0;        // peak slots reserved per request (mean request's sizes)
  int32_t admitted_by_footprint = 0;  // min(max_running, pool blocks / footprint blocks)
  double peak_kv_bytes = 0;           // most KV blocks in use at once (mid-step included) x block bytes
  double peak_total_bytes = 0;        // weights + peak KV (runtime reserve excluded)
  // Policy state outside the pool at peak (PolicyStateBytesPerSequence x
  // peak_running): not in peak_total_bytes, which stays comparable with the
  // published figures; add it for what a replica's GPU must hold.
  double peak_policy_state_bytes = 0;
  // What beacon-serve reserves for it: ReservedPolicyBytes, the states of
  // max_running sequences and the eviction scratch (PoolForPolicy took it
  // out of a pool sized from memory).
  double reserved_policy_state_bytes = 0;
  double evict_scratch_bytes = 0;  // EvictScratchBytes, part of the reservation
  int32_t peak_running = 0;        // admitted concurrency: most sequences holding KV at once
  double mean_decode_batch = 0;    // time-weighted
  // Work.
  int32_t completed = 0, rejected = 0, failed = 0, preemptions = 0;
  int64_t output_tokens = 0;
  double makespan_s = 0;  // first arrival to last finish, virtual
  double output_tokens_per_s = 0;
  double requests_per_s = 0;
  Percentiles ttft_s, tpot_s, e2e_s;
  // Prefix cache: prompt tokens looked up at admission, and found cached.
  int64_t prefix_queries = 0, prefix_hits = 0;
  std::vector<RequestSample> requests;  // every request that was accepted, in id order
  EngineStats engine;
  double wall_s = 0;  // real seconds the simulation took
};

struct Progress {
  int32_t done = 0, total = 0;
  double virtual_s = 0, wall_s = 0;
  int32_t running = 0, waiting = 0;
};
using ProgressFn = std::function<void(const Progress&)>;

// Errors: INVALID_ARGUMENT for bad inputs or a request whose footprint
// exceeds the whole pool (the scheduler's message); INTERNAL if the
// simulation stalls or the engine fails a step.
absl::StatusOr<RunResult> RunPlan(const RunInputs& in, const ProgressFn& progress = nullptr);

}  // namespace beacon::planner

#endif  // BEACON_PLANNER_PLAN_RUN_H_
