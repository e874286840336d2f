#include "planner/cost_engine.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace beacon::planner {
namespace {

int32_t Blocks(int64_t slots, int32_t block_size) {
  return static_cast<int32_t>((slots + block_size - 1) / block_size);
}

}  // namespace

SchedClock::time_point VirtualTime(double seconds) {
  return SchedClock::time_point(
      std::chrono::duration_cast<SchedClock::duration>(std::chrono::duration<double>(seconds)));
}

CostEngine::CostEngine(int32_t num_blocks, int32_t block_size, const CostModel& cost)
    : sim_(num_blocks, block_size), cost_(cost) {}

absl::Status CostEngine::AddSequence(RequestId id, const SimSequenceSpec& spec, double arrival_s) {
  if (absl::Status s = sim_.AddSequence(id, spec); !s.ok()) return s;
  RequestTiming& t = timings_[id];
  t.arrival_s = arrival_s;
  t.prompt_tokens = spec.prompt_tokens;
  return absl::OkStatus();
}

absl::Status CostEngine::Run(std::span<const ScheduledSeq> work, std::vector<SeqResult>* outcomes) {
  slots_before_.resize(work.size());
  for (size_t i = 0; i < work.size(); ++i) {
    slots_before_[i] = work[i].kv != nullptr ? work[i].kv->num_slots() : 0;
  }
  const size_t first_outcome = outcomes->size();
  if (absl::Status s = sim_.Run(work, outcomes); !s.ok()) {
    ++stats_.failed_steps;
    return s;
  }

  StepLoad load;
  int32_t decoding = 0;
  int32_t transient_blocks = 0;  // blocks held mid-step by sequences that then evicted
  const int32_t bs = sim_.cache().shape().block_size;
  for (size_t i = 0; i < work.size(); ++i) {
    const ScheduledSeq& w = work[i];
    const SeqResult& o = (*outcomes)[first_outcome + i];
    const int64_t before = slots_before_[i];
    const int64_t n = w.n_tokens;
    const int64_t after = w.kv->num_slots();  // the scheduler frees it only after the step
    load.tokens += n;
    load.kv_write_slots += n;
    load.kv_read_slots += before + n;
    const int64_t pairs = n * before + n * (n + 1) / 2;
    load.attn_pairs += pairs;
    if (w.prefill) {
      stats_.prefill_tokens += n;
    } else {
      stats_.decode_tokens += n;
      load.observed_pairs += pairs;
      ++decoding;
    }
    if (o.sampled) ++load.sampled;
    if (o.state != RequestState::kFinishedError && after < before + n) {  // evicted down to `after` this step
      ++load.evictions;
      load.evict_scored_slots += before + n;
      load.evict_kept_slots += after;
      load.evict_scored_sq += static_cast<double>(before + n) * static_cast<double>(before + n);
      transient_blocks += Blocks(before + n, bs) - Blocks(after, bs);
    }
    auto it = timings_.find(w.id);
    if (it != timings_.end()) it->second.max_slots = std::max<int32_t>(it->second.max_slots, before + n);
  }

  const StepCost c = cost_.Step(load);
  last_step_ = c;
  now_s_ += c.total_s;
  ++stats_.steps;
  stats_.busy_s += c.total_s;
  stats_.memory_s += c.memory_s;
  stats_.compute_s += c.compute_s;
  stats_.overhead_s += c.overhead_s;
  stats_.evict_s += c.evict_s;
  stats_.bytes += c.bytes + c.evict_bytes;
  stats_.flops += c.flops + c.evict_flops;
  stats_.evictions += load.evictions;
  stats_.decode_seq_seconds += decoding * c.total_s;
  stats_.max_decode_batch = std::max(stats_.max_decode_batch, decoding);
  if (c.compute_bound()) ++stats_.compute_bound_steps;
  stats_.peak_used_blocks = std::max(stats_.peak_used_blocks, sim_.UsedBlocks() + transient_blocks);

  const SchedClock::time_point at = VirtualTime(now_s_);
  for (size_t i = first_outcome; i < outcomes->size(); ++i) {
    SeqResult& o = (*outcomes)[i];
    o.at = at;  // the scheduler's record times its tokens by the virtual clock
    if (!o.sampled) continue;
    // Kept here in exact virtual seconds (the record's time_point rounds to
    // the clock's tick).
    auto it = timings_.find(o.id);
    if (it != timings_.end() && it->second.first_token_s < 0) it->second.first_token_s = now_s_;
  }
  return absl::OkStatus();
}

int32_t CostEngine::Preempt(RequestId id) { return sim_.Preempt(id); }

void CostEngine::Remove(const SchedRequest& request) {
  sim_.Remove(request);
  auto it = timings_.find(request.id);
  if (it == timings_.end()) return;
  it->second.finish_s = now_s_;
  it->second.state = request.state;
  it->second.generated = request.generated;  // the scheduler's record counts them
  it->second.preemptions = request.preemptions;
  finished_.push_back(request.id);
}

std::vector<RequestId> CostEngine::TakeFinished() {
  std::vector<RequestId> out;
  out.swap(finished_);
  return out;
}

}  // namespace beacon::planner
