#include "scheduler/sim_engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

// A synthetic token id: the same (key, index) always gives the same id.
int32_t SimToken(uint64_t key, int32_t i) {
  uint64_t x = key * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i);
  x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
  return static_cast<int32_t>((x ^ (x >> 29)) & 0x3fffffff);
}

}  // namespace

SchedRequest MakeSimRequest(RequestId id, const SimSequenceSpec& spec) {
  SchedRequest r;
  r.id = id;
  r.prompt_tokens = spec.prompt_tokens;
  r.max_new_tokens = spec.max_new_tokens;
  r.peak_slots = static_cast<int32_t>(EvictionSchedule::PeakSlots(spec.kv, spec.prompt_tokens, spec.max_new_tokens));
  return r;
}

KvSeqSpec MakeSimKvSpec(RequestId id, const SimSequenceSpec& spec, bool with_prompt) {
  KvSeqSpec kv;
  kv.prompt_len = spec.prompt_tokens;
  kv.kv = spec.kv;
  kv.prompt_logprobs = spec.prompt_logprobs;
  if (with_prompt) {
    kv.prompt.resize(std::max(0, spec.prompt_tokens));
    const int32_t shared = spec.prefix_id != 0 ? std::min(spec.prefix_tokens, spec.prompt_tokens) : 0;
    for (int32_t i = 0; i < spec.prompt_tokens; ++i) {
      // Own tokens are keyed by the id with the top bit set: never a prefix id.
      kv.prompt[i] = i < shared ? SimToken(spec.prefix_id, i) : SimToken(id | (uint64_t{1} << 63), i);
    }
  }
  return kv;
}

absl::Status AddSimRequest(Scheduler& scheduler, SimEngine& engine, RequestId id, const SimSequenceSpec& spec) {
  return AddSimRequest(scheduler, engine, id, spec, MakeSimRequest(id, spec));
}

absl::Status AddSimRequest(Scheduler& scheduler, SimEngine& engine, RequestId id, const SimSequenceSpec& spec,
                           const SchedRequest& request) {
  if (absl::Status s = engine.AddSequence(id, spec); !s.ok()) return s;
  const bool with_prompt = scheduler.kv().prefix_cache() != nullptr;
  absl::StatusOr<SequenceKv*> kv = scheduler.Add(request, MakeSimKvSpec(id, spec, with_prompt));
  return kv.status();  // refused: the engine keeps the sequence, which never runs
}

SimEngine::SimEngine(int32_t num_blocks, int32_t block_size) : cache_(KvCacheShape{1, 1, 1, block_size}, num_blocks) {}

SimEngine::~SimEngine() = default;

absl::Status SimEngine::AddSequence(RequestId id, const SimSequenceSpec& spec) {
  if (spec.prompt_tokens < 1 || spec.output_tokens < 1 || spec.max_new_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("sim sequence ", id, ": sizes must be >= 1"));
  }
  if (absl::Status st = spec.kv.Validate(); !st.ok()) return st;
  if (seqs_.contains(id) || records_.contains(id)) {
    return absl::AlreadyExistsError(absl::StrCat("sim sequence ", id, " already added"));
  }
  Seq& s = seqs_[id];
  s.spec = spec;
  s.schedule = EvictionSchedule(spec.kv, spec.prompt_tokens);
  s.prefill_target = spec.prompt_tokens;
  return absl::OkStatus();
}

absl::Status SimEngine::StartChunk(const ScheduledSeq& w, Seq& s) {
  if (s.prefill_done == 0 && w.computed > 0) {
    // Not a change of state: the slots the scheduler adopted are already
    // this sequence's; the chunk's bounds count from past them.
    if (w.kv->num_slots() != w.computed) {
      return absl::FailedPreconditionError(
          absl::StrCat("id ", w.id, ": adopted ", w.computed, " slots, its KV holds ", w.kv->num_slots()));
    }
    s.prefill_done = w.computed;
    s.max_slots = std::max(s.max_slots, w.computed);
    if (!s.holds_kv) {
      s.holds_kv = true;
      ++running_;
    }
  }
  if (s.prefill_done != w.computed) {
    return absl::FailedPreconditionError(
        absl::StrCat("id ", w.id, ": the scheduler counts ", w.computed, " prefilled, the engine ", s.prefill_done));
  }
  if (w.n_tokens < 1 || s.prefill_done + w.n_tokens > s.prefill_target) {
    return absl::InvalidArgumentError(
        absl::StrCat("id ", w.id, ": prefill of ", w.n_tokens, " at ", s.prefill_done, "/", s.prefill_target));
  }
  return absl::OkStatus();
}

absl::Status SimEngine::Run(std::span<const ScheduledSeq> work, std::vector<SeqResult>* outcomes) {
  // Protocol checks first, so that a broken step changes nothing.
  absl::flat_hash_map<RequestId, int> seen;
  for (const ScheduledSeq& w : work) {
    auto it = seqs_.find(w.id);
    absl::Status bad;
    if (it == seqs_.end()) {
      bad = absl::FailedPreconditionError(absl::StrCat("run of unknown or removed id ", w.id));
    } else if (w.kv == nullptr || (it->second.kv != nullptr && it->second.kv != w.kv)) {
      bad = absl::FailedPreconditionError(absl::StrCat("id ", w.id, ": no KV, or another than before"));
    } else if (++seen[w.id] > 1) {
      bad = absl::InvalidArgumentError(absl::StrCat("id ", w.id, " twice in one step"));
    } else if (it->second.finished) {
      bad = absl::FailedPreconditionError(absl::StrCat("run of finished id ", w.id));
    } else if (w.prefill) {
      bad = StartChunk(w, it->second);
    } else if (w.n_tokens != 1 || it->second.prefill_done < it->second.prefill_target) {
      bad = absl::FailedPreconditionError(
          absl::StrCat("id ", w.id, ": decode of ", w.n_tokens, " while prefilling or not 1 token"));
    }
    if (!bad.ok()) {
      ++protocol_errors_;
      return bad;
    }
  }
  last_work_.assign(work.begin(), work.end());
  for (const ScheduledSeq& w : work) {
    Seq& s = seqs_.find(w.id)->second;
    s.kv = w.kv;
    SeqResult out;
    if (absl::Status st = RunOne(w, s, &out); !st.ok()) {
      if (absl::IsResourceExhausted(st)) ++exhausted_;
      return st;
    }
    outcomes->push_back(out);
  }
  ++steps_;
  peak_running_ = std::max(peak_running_, running_);
  if (run_hook_) run_hook_(*this);
  return absl::OkStatus();
}

absl::Status SimEngine::RunOne(const ScheduledSeq& w, Seq& s, SeqResult* out) {
  out->id = w.id;
  out->at = time_;
  if (!s.ever_ran) {
    s.ever_ran = true;
    first_run_order_.push_back(w.id);
  }
  if (auto it = std::find(inject_error_.begin(), inject_error_.end(), w.id); it != inject_error_.end()) {
    inject_error_.erase(it);
    w.kv->Release();  // as a failed Generation gives its blocks back
    Drop(s);
    s.finished = true;
    out->state = RequestState::kFinishedError;
    return absl::OkStatus();
  }
  SequenceKv& kv = *w.kv;
  const int32_t n = kv.num_slots() + w.n_tokens;
  if (absl::Status st = kv.Reserve(n); !st.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat("id ", w.id, ": no blocks for ", n, " slots: ", st.message()));
  }
  kv.CommitSlots(n);
  tokens_ += w.n_tokens;
  s.max_slots = std::max(s.max_slots, n);
  if (!s.holds_kv) {
    s.holds_kv = true;
    ++running_;
  }
  if (w.prefill) {
    s.prefill_done += w.n_tokens;
    // As engine/generation.cc: a compressing sequence evicts to its bound
    // after every recompute chunk past the prompt, so it holds at most
    // max(prompt, bound) + one chunk (optimistic admission counts on it).
    if (s.recompute && s.schedule.EvictsAfterRecomputeChunk(s.prefill_done, n)) {
      kv.Truncate(s.schedule.bound());
      s.schedule.OnEvicted();
    }
    if (s.prefill_done < s.prefill_target) return absl::OkStatus();  // mid-prefill
    if (s.recompute) {  // the last sampled token is fed by the next decode step
      s.recompute = false;
      return absl::OkStatus();
    }
  } else {
    // SequenceCompressor::AfterDecodeStep.
    if (s.schedule.OnDecodeStep(n)) {
      kv.Truncate(s.schedule.bound());
      s.schedule.OnEvicted();
    }
  }
  ++s.generated;
  out->sampled = true;
  if (s.generated >= s.spec.max_new_tokens) {
    out->state = RequestState::kFinishedLength;
  } else if (s.generated >= s.spec.output_tokens) {
    out->state = RequestState::kFinishedStopped;
  }
  s.finished = IsFinished(out->state);
  return absl::OkStatus();
}

void SimEngine::Drop(Seq& s) {
  if (s.holds_kv) {
    s.holds_kv = false;
    --running_;
  }
}

int32_t SimEngine::Preempt(RequestId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) {
    ++unknown_removes_;
    return 0;
  }
  Seq& s = it->second;
  Drop(s);
  ++s.preemptions;
  s.schedule = EvictionSchedule(s.spec.kv, s.spec.prompt_tokens);  // as a recreated SequenceCompressor
  s.prefill_done = 0;
  // Nothing sampled yet: the prompt again, and its last chunk samples.
  s.recompute = s.generated > 0;
  s.prefill_target = s.spec.prompt_tokens + std::max(0, s.generated - 1);
  return s.prefill_target;
}

void SimEngine::Remove(const SchedRequest& request) {
  auto it = seqs_.find(request.id);
  if (it == seqs_.end()) {
    auto rec = records_.find(request.id);
    if (rec != records_.end()) {
      ++rec->second.remove_calls;
    } else {
      ++unknown_removes_;
    }
    return;
  }
  Seq& s = it->second;
  Drop(s);
  Record& r = records_[request.id];
  r.state = request.state;
  r.generated = s.generated;
  r.sched_generated = request.generated;
  r.max_slots = s.max_slots;
  r.preemptions = s.preemptions;
  r.sched_preemptions = request.preemptions;
  r.remove_calls = 1;
  r.request = request;
  remove_order_.push_back(request.id);
  seqs_.erase(it);
}

const SequenceKv* SimEngine::kv(RequestId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.kv;
}

int32_t SimEngine::generated(RequestId id) const {
  if (auto it = seqs_.find(id); it != seqs_.end()) return it->second.generated;
  if (auto it = records_.find(id); it != records_.end()) return it->second.generated;
  return 0;
}

}  // namespace beacon
