#include "scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace beacon {

std::string_view RequestStateName(RequestState s) {
  switch (s) {
    case RequestState::kWaiting: return "waiting";
    case RequestState::kRunning: return "running";
    case RequestState::kPreempted: return "preempted";
    case RequestState::kFinishedStopped: return "stopped";
    case RequestState::kFinishedLength: return "length";
    case RequestState::kFinishedTimeLimit: return "time_limit";
    case RequestState::kFinishedCancelled: return "cancelled";
    case RequestState::kFinishedError: return "error";
  }
  return "?";
}

std::string_view AdmissionModeName(AdmissionMode m) { return m == AdmissionMode::kReserve ? "reserve" : "optimistic"; }

absl::StatusOr<AdmissionMode> ParseAdmissionMode(std::string_view name) {
  if (name == "reserve") return AdmissionMode::kReserve;
  if (name == "optimistic") return AdmissionMode::kOptimistic;
  return absl::InvalidArgumentError(
      absl::StrCat("admission: '", std::string(name), "' is not a mode (reserve, optimistic)"));
}

absl::Status SchedulerConfig::Validate() const {
  if (max_running < 1) return absl::InvalidArgumentError(absl::StrCat("max_running must be >= 1, got ", max_running));
  // Every request waits (at least until the next step admits it), so a bound
  // of 0 would refuse everything.
  if (max_waiting < 1) return absl::InvalidArgumentError(absl::StrCat("max_waiting must be >= 1, got ", max_waiting));
  // Every running sequence decodes every step; a smaller budget would leave
  // the newest ones behind for good.
  if (max_step_tokens < max_running) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_step_tokens (", max_step_tokens, ") must be >= max_running (", max_running, ")"));
  }
  if (prefill_chunk < 1) {
    return absl::InvalidArgumentError(absl::StrCat("prefill_chunk must be >= 1, got ", prefill_chunk));
  }
  if (!(watermark >= 0.0 && watermark < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("watermark must be in [0, 1), got ", watermark));
  }
  return absl::OkStatus();
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCache* cache, StepEngine* engine)
    : config_(config), engine_(engine), kv_(cache) {}

Scheduler::~Scheduler() { AbortAll(RequestState::kFinishedCancelled); }

int32_t Scheduler::BlocksFor(int64_t slots) const {
  const int64_t bs = kv_.BlockSize();
  return static_cast<int32_t>((slots + bs - 1) / bs);
}

const SchedRequest* Scheduler::Find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

absl::StatusOr<SequenceKv*> Scheduler::Add(const SchedRequest& request, KvSeqSpec kv) {
  if (requests_.contains(request.id)) {
    return absl::AlreadyExistsError(absl::StrCat("request id ", request.id, " is already queued or running"));
  }
  // Checked before the queue bound: a request that can never run is the
  // client's error whatever the load.
  const int32_t need = BlocksFor(request.peak_slots);
  if (need > kv_.TotalBlocks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request needs ", request.peak_slots, " KV slots (prompt ", request.prompt_tokens,
                     " + max_tokens ", request.max_new_tokens, " under its KV policy) but the whole KV pool holds ",
                     int64_t{kv_.TotalBlocks()} * kv_.BlockSize(),
                     ": lower max_tokens or the prompt, or choose a compressing kv_policy"));
  }
  // Preempted requests wait too, but they were admitted once: they do not
  // count against the bound on new arrivals.
  if (static_cast<int32_t>(waiting_.size()) - preempted_waiting_ >= config_.max_waiting) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the waiting queue is full (", config_.max_waiting, " requests); retry later"));
  }
  if (absl::Status s = kv_.Add(request.id, std::move(kv)); !s.ok()) return s;
  SchedRequest r = request;
  r.state = RequestState::kWaiting;
  r.prefill_target = r.prompt_tokens;
  r.prefill_done = 0;
  r.generated = 0;
  r.reserved_blocks = 0;
  r.shared_blocks = 0;
  r.preemptions = 0;
  r.cached_tokens = 0;
  r.admit_seq = 0;
  r.scheduled_once = false;
  r.first_token = r.last_token = {};
  requests_.emplace(r.id, r);
  waiting_.push_back(r.id);
  return kv_.kv(r.id);
}

bool Scheduler::Forget(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  if (it->second.state == RequestState::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), id));
  } else {
    if (auto w = std::find(waiting_.begin(), waiting_.end(), id); w != waiting_.end()) waiting_.erase(w);
    if (it->second.state == RequestState::kPreempted) --preempted_waiting_;
  }
  requests_.erase(it);
  kv_.Remove(id);
  return true;
}

void Scheduler::Finish(RequestId id, RequestState state) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  SchedRequest& r = it->second;
  const bool was_running = r.state == RequestState::kRunning;
  if (was_running) {
    running_.erase(std::find(running_.begin(), running_.end(), id));
  } else {
    auto w = std::find(waiting_.begin(), waiting_.end(), id);
    if (w != waiting_.end()) waiting_.erase(w);
    if (r.state == RequestState::kPreempted) --preempted_waiting_;
  }
  r.state = state;
  engine_->Remove(r);  // its final record: sees its KV and what was reserved for it
  requests_.erase(it);
  kv_.Remove(id);  // frees its KV now
}

bool Scheduler::Abort(RequestId id, RequestState final_state) {
  if (!requests_.contains(id)) return false;
  Finish(id, final_state);
  return true;
}

void Scheduler::AbortAll(RequestState final_state) {
  std::vector<RequestId> ids(running_.begin(), running_.end());
  ids.insert(ids.end(), waiting_.begin(), waiting_.end());
  for (RequestId id : ids) Finish(id, final_state);
}

void Scheduler::Expire(SchedClock::time_point now, StepReport* report) {
  std::vector<RequestId> expired;
  for (const auto& [id, r] : requests_) {
    if (r.deadline <= now) expired.push_back(id);
  }
  std::sort(expired.begin(), expired.end());  // deterministic order (hash order is not)
  for (RequestId id : expired) Finish(id, RequestState::kFinishedTimeLimit);
  report->finished += static_cast<int32_t>(expired.size());
}

int32_t Scheduler::CommittedBlocks() const {
  int32_t committed = 0;
  for (RequestId id : running_) {
    committed += std::max(0, requests_.at(id).reserved_blocks - kv_.OwnBlocks(id));
  }
  return committed;
}

int32_t Scheduler::reserved_blocks() const {
  if (config_.admission != AdmissionMode::kReserve) return 0;
  return kv_.TotalBlocks() - kv_.FreeBlocks() + CommittedBlocks();
}

bool Scheduler::TryAdmit(SchedRequest* r, int32_t* step_blocks) {
  // A request holding no KV may start on blocks it takes by reference (a
  // sample group's prompt, the prefix cache); it then needs blocks only for
  // the rest, plus the idle cached blocks it takes out of the free count.
  KvPrefixProbe probe;
  const bool fresh = r->prefill_done == 0;
  if (fresh) {
    probe = kv_.Probe(r->id);
    if (probe.wait) return false;
  }
  auto adopt = [&] {
    if (!fresh) return;
    // The first chunk's ScheduledSeq::computed tells the engine to start past
    // the taken slots.
    r->prefill_done = kv_.Adopt(r->id, r->prefill_target);
    r->shared_blocks = probe.blocks;
  };
  if (config_.admission == AdmissionMode::kReserve) {
    const int32_t need = BlocksFor(r->peak_slots) - probe.blocks;
    if (CommittedBlocks() + need + probe.idle > kv_.FreeBlocks()) return false;
    r->reserved_blocks = need;
    adopt();
    return true;
  }
  // Optimistic: the whole (re)prefill must fit now, beside what this step's
  // work already takes and a watermark kept free for the running sequences'
  // growth.
  const int32_t watermark = static_cast<int32_t>(std::ceil(config_.watermark * kv_.TotalBlocks()));
  // A compressing sequence evicts while it recomputes: it never holds more
  // than its peak plus one chunk.
  const int32_t need =
      std::max(0, BlocksFor(std::min<int64_t>(r->prefill_target + 1, int64_t{r->peak_slots} + config_.prefill_chunk)) -
                      probe.blocks) +
      probe.idle;
  const int32_t free_after = kv_.FreeBlocks() - *step_blocks - need;
  // With nothing running the watermark protects no one: admit if it fits.
  if (free_after < (running_.empty() ? 0 : watermark)) return false;
  *step_blocks += need;
  adopt();
  return true;
}

void Scheduler::PreemptNewest(StepReport* report) {
  auto newest = std::max_element(running_.begin(), running_.end(), [&](RequestId a, RequestId b) {
    return requests_.at(a).admit_seq < requests_.at(b).admit_seq;
  });
  const RequestId id = *newest;
  running_.erase(newest);
  SchedRequest& r = requests_.at(id);
  kv_.Release(id);  // every block back, shared ones included
  r.prefill_target = engine_->Preempt(id);
  r.prefill_done = 0;
  r.shared_blocks = 0;  // its KV is gone, shared blocks included
  r.state = RequestState::kPreempted;
  ++r.preemptions;
  waiting_.push_front(id);
  ++preempted_waiting_;
  ++report->preempted;
}

int32_t Scheduler::PreemptUntilStepFits(StepReport* report) {
  for (;;) {
    int32_t need = 0;
    for (RequestId id : running_) {
      const SchedRequest& r = requests_.at(id);
      need += kv_.BlocksToAppend(
          id, r.prefilling() ? std::min(config_.prefill_chunk, r.prefill_target - r.prefill_done) : 1);
    }
    if (need <= kv_.FreeBlocks() || running_.empty()) return need;
    PreemptNewest(report);
  }
}

void Scheduler::ScheduleRunning(Batch* plan, StepReport* report) {
  std::vector<RequestId> order = running_;
  std::sort(order.begin(), order.end(),
            [&](RequestId a, RequestId b) { return requests_.at(a).admit_seq < requests_.at(b).admit_seq; });
  // Decode first: one token per decoding sequence, oldest first.
  for (RequestId id : order) {
    const SchedRequest& r = requests_.at(id);
    if (r.prefilling() || plan->token_budget < 1) continue;
    plan->work.push_back({id, 1, false, 0, kv_.kv(id)});
    --plan->token_budget;
    ++report->decode_seqs;
  }
  // Then prefill chunks.
  for (RequestId id : order) {
    const SchedRequest& r = requests_.at(id);
    if (!r.prefilling() || plan->token_budget < 1) continue;
    const int32_t n = std::min({config_.prefill_chunk, r.prefill_target - r.prefill_done, plan->token_budget});
    plan->work.push_back({id, n, true, r.prefill_done, kv_.kv(id)});
    plan->token_budget -= n;
    ++report->prefill_seqs;
  }
}

void Scheduler::AdmitWaiting(SchedClock::time_point now, Batch* plan, StepReport* report) {
  while (!waiting_.empty() && plan->token_budget >= 1 && static_cast<int32_t>(running_.size()) < config_.max_running) {
    SchedRequest& r = requests_.at(waiting_.front());
    if (!TryAdmit(&r, &plan->step_blocks)) break;  // the head blocks the rest: no starvation
    waiting_.pop_front();
    if (r.state == RequestState::kPreempted) --preempted_waiting_;
    r.state = RequestState::kRunning;
    r.admit_seq = next_admit_seq_++;
    if (!r.scheduled_once) {
      r.scheduled_once = true;
      r.first_scheduled = now;
      r.cached_tokens = r.prefill_done;  // what TryAdmit took by reference
    }
    running_.push_back(r.id);
    ++report->admitted;
    const int32_t n = std::min({config_.prefill_chunk, r.prefill_target - r.prefill_done, plan->token_budget});
    plan->work.push_back({r.id, n, true, r.prefill_done, kv_.kv(r.id)});
    plan->token_budget -= n;
    ++report->prefill_seqs;
  }
}

Scheduler::Batch Scheduler::Plan(SchedClock::time_point now, StepReport* report) {
  Batch plan;
  plan.token_budget = config_.max_step_tokens;
  // Optimistic mode: a step that would not fit preempts the newest sequences;
  // what the running sequences' work takes is then counted against admission.
  if (config_.admission == AdmissionMode::kOptimistic) plan.step_blocks = PreemptUntilStepFits(report);
  ScheduleRunning(&plan, report);
  AdmitWaiting(now, &plan, report);
  return plan;
}

absl::Status Scheduler::RunEngine(std::span<const ScheduledSeq> work, std::vector<SeqResult>* outcomes) {
  if (absl::Status s = engine_->Run(work, outcomes); !s.ok()) return s;
  // Outcomes the scheduler cannot pair with its work would leave requests
  // whose tokens or end it never learns of: the step failed.
  if (outcomes->size() != work.size()) {
    return absl::InternalError(
        absl::StrCat("the engine reported ", outcomes->size(), " outcomes for a step of ", work.size(), " sequences"));
  }
  for (size_t i = 0; i < work.size(); ++i) {
    const SeqResult& o = (*outcomes)[i];
    if (o.id != work[i].id) {
      return absl::InternalError(absl::StrCat("the engine's outcome ", i, " is for id ", o.id, ", not ", work[i].id));
    }
    if (o.state != RequestState::kRunning && o.state != RequestState::kFinishedStopped &&
        o.state != RequestState::kFinishedLength && o.state != RequestState::kFinishedError) {
      return absl::InternalError(
          absl::StrCat("the engine reported state ", std::string(RequestStateName(o.state)), " for id ", o.id));
    }
  }
  return absl::OkStatus();
}

void Scheduler::Apply(std::span<const ScheduledSeq> work, std::span<const SeqResult> outcomes, StepReport* report) {
  for (size_t i = 0; i < work.size(); ++i) {
    const SeqResult& o = outcomes[i];
    SchedRequest& r = requests_.at(o.id);
    if (work[i].prefill) r.prefill_done += work[i].n_tokens;
    if (o.sampled) {
      if (r.generated == 0) {
        r.first_token = o.at;
        report->ttft_seconds.push_back(std::chrono::duration<double>(o.at - r.arrival).count());
      } else {
        report->itl_seconds.push_back(std::chrono::duration<double>(o.at - r.last_token).count());
      }
      r.last_token = o.at;
      ++r.generated;
    }
    // Indexes the prompt blocks this chunk completed (the prefix cache, a
    // sample group's later members): counted in this run of the prefill.
    kv_.OnRan(o.id, r.prefill_done, r.prefilling());
    if (IsFinished(o.state)) {
      Finish(o.id, o.state);
      ++report->finished;
    }
  }
}

void Scheduler::FailStep(std::span<const ScheduledSeq> work, const absl::Status& status, StepReport* report) {
  report->engine_status = status;
  for (const ScheduledSeq& w : work) {
    if (requests_.contains(w.id)) {
      Finish(w.id, RequestState::kFinishedError);
      ++report->finished;
    }
  }
}

StepReport Scheduler::Step(SchedClock::time_point now) {
  StepReport report;
  Expire(now, &report);
  const Batch plan = Plan(now, &report);
  if (plan.work.empty()) return report;
  report.ran = true;
  for (const ScheduledSeq& w : plan.work) report.tokens += w.n_tokens;
  std::vector<SeqResult> outcomes;
  outcomes.reserve(plan.work.size());
  if (absl::Status s = RunEngine(plan.work, &outcomes); !s.ok()) {
    FailStep(plan.work, s, &report);
  } else {
    Apply(plan.work, outcomes, &report);
  }
  return report;
}

}  // namespace beacon
