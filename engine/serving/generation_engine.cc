#include "engine/serving/generation_engine.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string_view>

#include "absl/base/casts.h"
#include "absl/strings/str_cat.h"
#include "kv/policy/policy_bytes.h"
#include "kv/policy/policy_registry.h"
#include "kv/serving/prefix_cache.h"

namespace beacon {
namespace {

double Seconds(SchedClock::duration d) { return std::chrono::duration<double>(d).count(); }

// The scheduler's view of what a step did to a generation.
RequestState StepState(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return RequestState::kRunning;
    case FinishReason::kLength: return RequestState::kFinishedLength;
    default: return RequestState::kFinishedStopped;  // EOS, a stop token or a stop string
  }
}

// The client's: a request that ended by itself says why through its
// generation; one ended from outside, through its terminal state.
FinishReason FinalReason(RequestState state, FinishReason generation) {
  switch (state) {
    case RequestState::kFinishedStopped:
    case RequestState::kFinishedLength: return generation == FinishReason::kNone ? FinishReason::kLength : generation;
    case RequestState::kFinishedTimeLimit: return FinishReason::kTimeLimit;
    case RequestState::kFinishedCancelled: return FinishReason::kCancelled;
    default: return FinishReason::kError;
  }
}

}  // namespace

GenerationEngine::GenerationEngine(Backend* backend, KvCache* cache, const Tokenizer* tokenizer,
                                   const ModelConfig& config)
    : backend_(backend), cache_(cache), tokenizer_(tokenizer), config_(config), executor_(backend) {}

GenerationEngine::~GenerationEngine() = default;

KvSeqSpec KvSeqSpecFor(const PreparedRequest& request, bool with_prompt) {
  KvSeqSpec spec;
  spec.prompt_len = static_cast<int32_t>(request.prompt.size());
  if (with_prompt) spec.prompt = request.prompt;  // the prefix cache's keys
  spec.kv = request.options.kv;
  spec.prompt_logprobs = request.options.prompt_logprobs >= 0;
  spec.group = request.group;
  spec.cache_partition = request.cache_partition;
  return spec;
}

absl::Status AddRequest(Scheduler& scheduler, GenerationEngine& engine, RequestId id, PreparedRequest request,
                        std::shared_ptr<RequestSink> sink) {
  SchedRequest r;
  r.id = id;
  r.name = request.request_id;
  r.prompt_tokens = static_cast<int32_t>(request.prompt.size());
  r.max_new_tokens = request.options.max_tokens;
  r.peak_slots = request.peak_slots;
  r.arrival = request.arrival;
  r.deadline = request.deadline;
  const bool prefix_cache = scheduler.kv().prefix_cache() != nullptr;
  absl::StatusOr<SequenceKv*> kv = scheduler.Add(r, KvSeqSpecFor(request, prefix_cache));
  if (!kv.ok()) return kv.status();
  absl::Status s = engine.Add(id, std::move(request), std::move(sink), *kv);
  if (!s.ok()) scheduler.Forget(id);  // nothing ran: the scheduler lets it go again
  return s;
}

absl::Status GenerationEngine::Add(RequestId id, PreparedRequest request, std::shared_ptr<RequestSink> sink,
                                   SequenceKv* kv) {
  if (seqs_.contains(id)) return absl::AlreadyExistsError(absl::StrCat("sequence ", id, " exists"));
  absl::StatusOr<std::unique_ptr<Generation>> gen =
      Generation::CreateOn(tokenizer_, kv, config_, std::move(request.prompt), std::move(request.options));
  if (!gen.ok()) return gen.status();
  (*gen)->set_thread_pool(backend_->host_pool());
  Seq s;
  s.gen = std::move(*gen);
  s.sink = std::move(sink);
  s.report_cached_tokens = request.report_cached_tokens;
  seqs_.emplace(id, std::move(s));
  return absl::OkStatus();
}

uint64_t GenerationEngine::PrefixCacheSaltFor(std::string_view model, const ModelConfig& config, const KvCache& cache) {
  std::vector<uint64_t> parts = {std::hash<std::string_view>()(model), static_cast<uint64_t>(cache.dtype()),
                                 static_cast<uint64_t>(config.rope_style),
                                 static_cast<uint64_t>(cache.shape().block_size)};
  const RopeTable rope = config.RopeFrequencies();
  for (float f : rope.inv_freq) parts.push_back(absl::bit_cast<uint32_t>(f));
  parts.push_back(absl::bit_cast<uint32_t>(rope.attention_factor));
  return PrefixCacheSalt(parts);
}

absl::Status GenerationEngine::StartChunk(Seq& s, const ScheduledSeq& w) {
  Generation& g = *s.gen;
  if (g.prefill_done() == 0 && w.computed > 0) {
    // The prefix the scheduler adopted is this sequence's KV already.
    if (g.kv()->num_slots() != w.computed) {
      return absl::InternalError(absl::StrCat("sequence ", w.id, ": the scheduler adopted ", w.computed,
                                              " slots, its KV holds ", g.kv()->num_slots()));
    }
    g.OnPrefixAdopted();
    totals_.prompt_tokens += w.computed;  // prefilled by reuse: counted as prompt tokens, as vLLM does
  }
  if (g.prefill_done() != w.computed) {
    return absl::InternalError(absl::StrCat("sequence ", w.id, ": the scheduler counts ", w.computed,
                                            " prefilled tokens, the generation ", g.prefill_done()));
  }
  return absl::OkStatus();
}

int32_t GenerationEngine::num_compressing() const {
  int32_t n = 0;
  for (const auto& [id, s] : seqs_) n += s.gen->compressor() != nullptr;
  return n;
}

int64_t GenerationEngine::KvLogicalTokens() const {
  int64_t logical = 0;
  for (const auto& [id, s] : seqs_) {
    // Slots hold tokens [0, next_position) less the evicted ones.
    const int32_t slots = s.gen->kv()->num_slots();
    logical += slots > 0 ? std::max(slots, s.gen->next_position()) : 0;
  }
  return logical;
}

int32_t GenerationEngine::Preempt(RequestId id) {
  ++totals_.preemptions;
  return seqs_.at(id).gen->Preempt();  // its KV is released already (the scheduler's)
}

void GenerationEngine::Stream(Seq& s, const TokenEvent& ev) {
  ++totals_.generation_tokens;
  if (!s.prompt_logprobs_sent && s.gen->prompt_logprobs_complete()) {
    s.prompt_logprobs_sent = true;
    s.sink->OnPromptLogprobs(s.gen->prompt(), s.gen->prompt_logprobs());
  }
  // EOS and stop token ids end generation without being streamed (their
  // text is empty, their logprobs not reported); the final record counts them.
  const bool hidden = ev.finish == FinishReason::kEos || ev.finish == FinishReason::kStop;
  if (hidden) {
    if (!ev.text.empty()) s.sink->OnTokens({}, ev.text, ev.part, {});
  } else {
    const int32_t id = ev.id;
    std::span<const PositionLogprobs> lp;
    if (ev.logprobs.has_value()) lp = std::span<const PositionLogprobs>(&*ev.logprobs, 1);
    s.sink->OnTokens(std::span<const int32_t>(&id, 1), ev.text, ev.part, lp);
  }
}

absl::Status GenerationEngine::Run(std::span<const ScheduledSeq> work, std::vector<SeqResult>* outcomes) {
  items_.clear();
  owners_.clear();
  for (const ScheduledSeq& w : work) {
    auto it = seqs_.find(w.id);
    if (it == seqs_.end() || w.kv != it->second.gen->kv()) {
      last_error_ = absl::StrCat("the step names sequence ", w.id,
                                 it == seqs_.end() ? ", which the engine lacks" : " with another KV");
      return absl::InternalError(last_error_);
    }
    Seq& s = it->second;
    if (w.prefill) {
      if (absl::Status st = StartChunk(s, w); !st.ok()) {
        last_error_ = std::string(st.message());
        return st;
      }
    }
    items_.push_back({s.gen.get(), w.n_tokens});
    owners_.push_back(&s);
  }
  if (absl::Status st = executor_.Run(items_, &results_); !st.ok()) {
    last_error_ = std::string(st.message());  // for the final records of the step's sequences
    return st;
  }
  ++totals_.steps;
  const SchedClock::time_point now = SchedClock::now();
  for (size_t i = 0; i < work.size(); ++i) {
    const ExecResult& r = results_[i];
    if (work[i].prefill) totals_.prompt_tokens += r.fed;
    totals_.evictions += r.evictions;
    totals_.evicted_tokens += r.evicted_slots;
    SeqResult o;
    o.id = work[i].id;
    o.sampled = r.event.id >= 0;
    o.at = now;
    if (o.sampled) Stream(*owners_[i], r.event);
    o.state = StepState(r.event.finish);
    outcomes->push_back(o);
  }
  return absl::OkStatus();
}

void GenerationEngine::Remove(const SchedRequest& request) {
  auto it = seqs_.find(request.id);
  if (it == seqs_.end()) return;
  Seq& s = it->second;
  Generation& g = *s.gen;
  StreamFinal f;
  f.request_id = request.name;
  f.reason = FinalReason(request.state, g.finish_reason());
  if (f.reason == FinishReason::kError) {
    if (!g.error().empty()) {
      f.error = g.error();  // its own failure (a device eviction)
    } else {
      f.error = last_error_.empty() ? "the engine failed this request" : last_error_;
    }
  }
  f.matched_stop = g.matched_stop();
  f.stop_token_id = g.stop_token();
  f.seed = g.sampling_seed();
  f.prompt_tokens = static_cast<int32_t>(g.prompt().size());
  f.completion_tokens = static_cast<int32_t>(g.generated().size());
  f.reasoning_tokens = g.reasoning_tokens();
  f.cached_tokens = request.cached_tokens;
  f.cached_tokens_reported = s.report_cached_tokens;
  const SchedClock::time_point now = SchedClock::now();
  f.total_seconds = Seconds(now - request.arrival);
  f.queue_seconds = request.scheduled_once ? Seconds(request.first_scheduled - request.arrival) : f.total_seconds;
  f.ttft_seconds = request.generated > 0 ? Seconds(request.first_token - request.arrival) : 0.0;
  const KvPolicyOptions& kv = g.compressor() != nullptr ? g.compressor()->options() : KvPolicyOptions();
  f.kv.policy = kv.policy;
  f.kv.budget = kv.compresses() ? kv.budget : 0;
  f.kv.peak_cached_tokens = g.kv()->peak_slots();
  if (g.compressor() != nullptr) {
    f.kv.evictions = g.compressor()->evictions();
    f.kv.evicted_tokens = g.compressor()->evicted_slots();
  }
  f.kv.reserved_tokens = request.reserved_blocks * cache_->shape().block_size;
  f.kv.preemptions = request.preemptions;
  const PolicyModelInfo model = PolicyInfoFor(config_);
  f.kv.bytes_per_slot = KvBytesPerSlot(model, static_cast<int64_t>(cache_->shape().row_bytes()));
  f.kv.state_bytes = PolicyStateBytes(kv, model, f.kv.peak_cached_tokens);
  f.kv.options = kv;
  f.kv.protected_window = kv.compresses() ? ProtectedWindow(kv) : 0;
  std::shared_ptr<RequestSink> sink = std::move(s.sink);
  seqs_.erase(it);  // the scheduler frees its KV next
  if (observer_ != nullptr) observer_->OnFinish(f);
  sink->OnFinish(f);
}

}  // namespace beacon
