#include "planner/plan_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kv/policy/sequence_compressor.h"
#include "scheduler/sim_engine.h"

namespace beacon::planner {
absl::StatusOr<ResolvedPool> ResolvePool(const PoolSpec& spec, const GpuProfile& gpu, const ModelCost& model) {
  if (spec.block_size < 1 || spec.block_size > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("kv_block_size: must be in [1, 4096], got ", spec.block_size));
  }
  double bytes = spec.kv_pool_bytes;
  if (bytes <= 0) {
    if (!(spec.mem_fraction > 0 && spec.mem_fraction <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat("mem_fraction: must be in (0, 1], got ", spec.mem_fraction));
    }
    bytes = spec.mem_fraction * gpu.memory_bytes - model.weight_bytes() - gpu.runtime_reserve_bytes;
    if (bytes <= 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "mem_fraction: %.2f of %s's %.1f GB leaves no KV pool after the weights (%.2f GB) and the runtime "
          "reserve (%.2f GB): use a larger fraction, a larger GPU or smaller weights",
          spec.mem_fraction, gpu.name, gpu.memory_bytes / 1e9, model.weight_bytes() / 1e9,
          gpu.runtime_reserve_bytes / 1e9));
    }
  }
  ResolvedPool p;
  p.from_memory = spec.kv_pool_bytes <= 0;
  p.block_size = spec.block_size;
  p.bytes_per_block = model.kv_bytes_per_token() * spec.block_size;
  const double blocks = std::floor(bytes / p.bytes_per_block);
  if (blocks < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("kv_pool: %.0f bytes hold no %d-slot block of %.0f bytes", bytes,
                                                      spec.block_size, p.bytes_per_block));
  }
  constexpr int32_t kMaxBlocks = std::numeric_limits<int32_t>::max() / 2;
  if (blocks > kMaxBlocks) {
    return absl::InvalidArgumentError(
        absl::StrFormat("kv_pool: %.0f blocks exceed the block pool's range; use a larger --kv-block-size", blocks));
  }
  p.blocks = static_cast<int32_t>(blocks);
  p.bytes = p.blocks * p.bytes_per_block;
  return p;
}

absl::StatusOr<ResolvedPool> PoolForPolicy(const ResolvedPool& pool, const KvPolicyOptions& kv, const ModelCost& model,
                                           int32_t max_running) {
  const double state =
      ReservedPolicyBytes(kv, model, max_running, int64_t{pool.blocks} * pool.block_size, pool.block_size);
  if (!pool.from_memory || state <= 0) return pool;
  ResolvedPool p = pool;
  const double lost = std::ceil(state / pool.bytes_per_block);
  if (lost >= pool.blocks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kv_pool: %s's device state for %d sequences (%.2f GB) leaves no KV block of the %.2f GB pool: lower "
        "--max-running or give more memory",
        std::string(kv.policy_name()), max_running, state / 1e9, pool.bytes / 1e9));
  }
  p.blocks = pool.blocks - static_cast<int32_t>(lost);
  p.bytes = p.blocks * p.bytes_per_block;
  p.policy_state_bytes = state;
  return p;
}

Percentiles ComputePercentiles(std::vector<double>& v) {
  Percentiles p;
  p.n = static_cast<int64_t>(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double pos = q / 100.0 * (v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - lo);
  };
  p.p50 = at(50);
  p.p90 = at(90);
  p.p99 = at(99);
  p.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / v.size();
  return p;
}

namespace {

// The mean admission footprint of the workload's requests and how many of
// them the pool admits at once by that footprint (the planner's estimate,
// set beside what the run measures).
void EstimateFootprint(const RunInputs& in, const std::vector<PlannedRequest>& reqs, RunResult* res) {
  double sum = 0;
  for (const PlannedRequest& r : reqs) {
    sum += static_cast<double>(std::min<int64_t>(
        SequenceCompressor::PeakSlots(in.kv, r.prompt_tokens, r.max_new_tokens), in.model.context_length));
  }
  res->footprint_slots = std::llround(sum / static_cast<double>(reqs.size()));
  const int64_t blocks = (res->footprint_slots + in.pool.block_size - 1) / in.pool.block_size;
  res->admitted_by_footprint =
      static_cast<int32_t>(std::min<int64_t>(in.sched.max_running, in.pool.blocks / std::max<int64_t>(1, blocks)));
}

// Per-request samples, latency percentiles, throughput and memory peaks from
// the finished run.
void Summarize(const RunInputs& in, const CostEngine& engine, const KvCacheManager& kv, int32_t n, RunResult* out) {
  RunResult& res = *out;
  std::vector<double> ttft, tpot, e2e;
  double first_arrival = std::numeric_limits<double>::max(), last_finish = 0;
  for (int32_t id = 0; id < n; ++id) {
    auto it = engine.timings().find(id);
    if (it == engine.timings().end()) continue;  // rejected
    const RequestTiming& t = it->second;
    first_arrival = std::min(first_arrival, t.arrival_s);
    last_finish = std::max(last_finish, t.finish_s);
    res.output_tokens += t.generated;
    RequestSample q;
    q.arrival_s = t.arrival_s;
    q.finish_s = t.finish_s;
    q.output_tokens = t.generated;
    q.ok = t.state == RequestState::kFinishedStopped || t.state == RequestState::kFinishedLength;
    if (q.ok) {
      ++res.completed;
      q.ttft_s = t.first_token_s - t.arrival_s;
      q.e2e_s = t.finish_s - t.arrival_s;
      ttft.push_back(q.ttft_s);
      e2e.push_back(q.e2e_s);
      if (t.generated > 1) {
        q.tpot_s = (t.finish_s - t.first_token_s) / (t.generated - 1);
        tpot.push_back(q.tpot_s);
      }
    }
    res.requests.push_back(q);
  }
  res.ttft_s = ComputePercentiles(ttft);
  res.tpot_s = ComputePercentiles(tpot);
  res.e2e_s = ComputePercentiles(e2e);
  res.makespan_s = res.completed > 0 ? last_finish - first_arrival : 0;
  if (res.makespan_s > 0) {
    res.output_tokens_per_s = res.output_tokens / res.makespan_s;
    res.requests_per_s = res.completed / res.makespan_s;
  }
  res.engine = engine.stats();
  res.peak_kv_bytes = res.engine.peak_used_blocks * in.pool.bytes_per_block;
  res.peak_total_bytes = in.model.weight_bytes() + res.peak_kv_bytes;
  res.peak_running = engine.sim().peak_running();
  res.prefix_queries = kv.prefix_queries();
  res.prefix_hits = kv.prefix_hits();
  res.peak_policy_state_bytes = res.peak_running * PolicyStateBytesPerSequence(in.kv, in.model);
  res.evict_scratch_bytes =
      EvictScratchBytes(in.kv, in.model, int64_t{in.pool.blocks} * in.pool.block_size, in.pool.block_size);
  res.reserved_policy_state_bytes =
      in.sched.max_running * PolicyStateBytesPerSequence(in.kv, in.model) + res.evict_scratch_bytes;
  res.mean_decode_batch = res.engine.busy_s > 0 ? res.engine.decode_seq_seconds / res.engine.busy_s : 0;
}

}  // namespace

absl::StatusOr<RunResult> RunPlan(const RunInputs& in, const ProgressFn& progress) {
  if (absl::Status s = in.workload.Validate(); !s.ok()) return s;
  if (absl::Status s = in.kv.Validate(); !s.ok()) return s;
  if (absl::Status s = in.sched.Validate(); !s.ok()) return s;
  const auto wall0 = std::chrono::steady_clock::now();
  const std::vector<PlannedRequest> reqs = GenerateRequests(in.workload, in.model.context_length);
  const int32_t n = static_cast<int32_t>(reqs.size());
  const CostModel cost(in.model, in.gpu, PolicyCostFor(in.kv));
  CostEngine engine(in.pool.blocks, in.pool.block_size, cost);
  // The run enforces max_waiting itself, over its own FIFO and the
  // scheduler's queue together; the scheduler's bound must only admit the
  // feed window.
  SchedulerConfig sched_config = in.sched;
  sched_config.max_waiting = std::max(in.sched.max_waiting, in.sched.max_running);
  Scheduler sched(sched_config, engine.mutable_cache(), &engine);
  // The workload's shared prefixes are cached (synthetic prompt ids, MakeSimKvSpec).
  if (in.prefix_cache) sched.kv().EnablePrefixCache(/*salt=*/1);

  RunResult res;
  EstimateFootprint(in, reqs, &res);

  std::deque<RequestId> arrived;  // arrived, not yet handed to the scheduler
  int32_t next = 0;               // next request to arrive
  int32_t done = 0;
  const bool poisson = in.workload.arrival == ArrivalKind::kPoisson;
  auto spec_for = [&](int32_t i) {
    SimSequenceSpec spec;
    spec.prompt_tokens = reqs[i].prompt_tokens;
    spec.output_tokens = reqs[i].output_tokens;
    spec.max_new_tokens = reqs[i].max_new_tokens;
    spec.kv = in.kv;
    spec.prefix_id = reqs[i].prefix_tokens > 0 ? 1 : 0;
    spec.prefix_tokens = reqs[i].prefix_tokens;
    return spec;
  };
  // Closed-loop clients bound the queue themselves; Poisson arrivals meet
  // the server's queue bound.
  auto arrive = [&](int32_t i, double t) -> absl::Status {
    if (poisson && static_cast<int32_t>(arrived.size()) + sched.num_waiting() >= in.sched.max_waiting) {
      ++res.rejected;
      ++done;
      return absl::OkStatus();
    }
    if (absl::Status s = engine.AddSequence(i, spec_for(i), t); !s.ok()) return s;
    arrived.push_back(i);
    return absl::OkStatus();
  };
  auto feed = [&]() -> absl::Status {
    while (!arrived.empty() && sched.num_waiting() < in.sched.max_running) {
      const RequestId id = arrived.front();
      SchedRequest sr = MakeSimRequest(id, spec_for(static_cast<int32_t>(id)));
      // As engine/serving/serve_request.cc: the footprint never exceeds the context.
      sr.peak_slots = std::min(sr.peak_slots, in.model.context_length);
      sr.arrival = VirtualTime(engine.timing(id).arrival_s);
      const KvSeqSpec kv = MakeSimKvSpec(id, spec_for(static_cast<int32_t>(id)), in.prefix_cache);
      if (absl::Status s = sched.Add(sr, kv).status(); !s.ok()) return s;
      arrived.pop_front();
    }
    return absl::OkStatus();
  };

  if (!poisson) {
    while (next < std::min(n, in.workload.concurrency)) {
      if (absl::Status s = arrive(next++, 0.0); !s.ok()) return s;
    }
  }
  auto last_report = std::chrono::steady_clock::now();
  while (done < n) {
    if (poisson) {
      while (next < n && reqs[next].arrival_s <= engine.now_s()) {
        if (absl::Status s = arrive(next, reqs[next].arrival_s); !s.ok()) return s;
        ++next;
      }
    }
    if (absl::Status s = feed(); !s.ok()) return s;
    if (!sched.HasWork()) {
      if (poisson && next < n) {
        engine.AdvanceTo(reqs[next].arrival_s);
        continue;
      }
      if (done >= n) break;
      return absl::InternalError(
          absl::StrCat("the simulation ran out of work with ", done, " of ", n, " requests over"));
    }
    const StepReport rep = sched.Step(VirtualTime(engine.now_s()));
    if (!rep.engine_status.ok()) {
      return absl::InternalError(absl::StrCat("the simulated engine failed a step: ", rep.engine_status.message()));
    }
    res.preemptions += rep.preempted;
    const std::vector<RequestId> finished = engine.TakeFinished();
    for (RequestId id : finished) {
      ++done;
      if (engine.timing(id).state == RequestState::kFinishedError) ++res.failed;
      if (!poisson && next < n) {
        if (absl::Status s = arrive(next++, engine.now_s()); !s.ok()) return s;
      }
    }
    if (!rep.ran && finished.empty()) {
      if (poisson && next < n) {
        engine.AdvanceTo(reqs[next].arrival_s);
        continue;
      }
      return absl::InternalError(absl::StrCat("the simulation stalled with ", sched.num_waiting(), " waiting and ",
                                              sched.num_running(), " running"));
    }
    if (progress) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_report > std::chrono::milliseconds(500)) {
        last_report = now;
        progress(Progress{done, n, engine.now_s(), std::chrono::duration<double>(now - wall0).count(),
                          sched.num_running(), sched.num_waiting() + static_cast<int32_t>(arrived.size())});
      }
    }
  }

  Summarize(in, engine, sched.kv(), n, &res);
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (progress) progress(Progress{done, n, engine.now_s(), res.wall_s, 0, 0});
  return res;
}

}  // namespace beacon::planner
