#include "engine/serving/generation_engine.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string_view>

#include "absl/base/casts.h"
#include "absl/strings/str_cat.h"
#include "kv/policy_bytes.h"
#include "kv/policy_registry.h"

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
    : backend_(backend), cache_(cache), tokenizer_(tokenizer), config_(config), kv_(cache), executor_(backend) {}

GenerationEngine::~GenerationEngine() = default;

absl::Status GenerationEngine::Add(RequestId id, PreparedRequest request, std::shared_ptr<RequestSink> sink) {
  if (seqs_.contains(id)) return absl::AlreadyExistsError(absl::StrCat("sequence ", id, " exists"));
  if (request.prompt.empty()) return absl::InvalidArgumentError("prompt: no tokens");  // as Generation::Create
  KvSeqSpec spec;
  spec.prompt_len = static_cast<int32_t>(request.prompt.size());
  if (kv_.prefix_cache() != nullptr) spec.prompt = request.prompt;  // the cache's keys
  spec.kv = request.options.kv;
  spec.prompt_logprobs = request.options.prompt_logprobs >= 0;
  spec.group = request.group;
  spec.cache_partition = request.cache_partition;
  if (absl::Status st = kv_.Add(id, std::move(spec)); !st.ok()) return st;
  absl::StatusOr<std::unique_ptr<Generation>> gen =
      Generation::CreateOn(tokenizer_, kv_.kv(id), config_, std::move(request.prompt), std::move(request.options));
  if (!gen.ok()) {
    kv_.Remove(id);
    return gen.status();
  }
  (*gen)->set_thread_pool(backend_->host_pool());
  Seq s;
  s.gen = std::move(*gen);
  s.sink = std::move(sink);
  s.request_id = std::move(request.request_id);
  s.arrival = request.arrival;
  s.seed = s.gen->sampling_seed();
  s.group = request.group;
  s.index = request.sample_index;
  s.report_cached_tokens = request.report_cached_tokens;
  seqs_.emplace(id, std::move(s));
  return absl::OkStatus();
}

void GenerationEngine::Forget(RequestId id) {
  seqs_.erase(id);
  kv_.Remove(id);
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

void GenerationEngine::StartPastSharedPrefix(Seq& s) {
  Generation& g = *s.gen;
  if (g.prefill_done() != 0) return;
  const int32_t slots = g.kv()->num_slots();
  if (slots > 0) {
    g.OnPrefixAdopted();
    totals_.prompt_tokens += slots;  // prefilled by reuse: counted as prompt tokens, as vLLM does
  }
  if (s.cached_tokens < 0) s.cached_tokens = slots;
}

int32_t GenerationEngine::num_compressing() const {
  int32_t n = 0;
  for (const auto& [id, s] : seqs_) n += s.gen->compressor() != nullptr;
  return n;
}

void GenerationEngine::KvTokens(int64_t* cached, int64_t* logical) const {
  *cached = kv_.HeldSlots();
  *logical = 0;
  for (const auto& [id, s] : seqs_) {
    // Slots hold tokens [0, next_position) less the evicted ones.
    const int32_t slots = s.gen->kv()->num_slots();
    *logical += slots > 0 ? std::max(slots, s.gen->next_position()) : 0;
  }
}

int32_t GenerationEngine::Preempt(RequestId id) {
  Seq& s = seqs_.at(id);
  ++s.preemptions;
  ++totals_.preemptions;
  kv_.Release(id);
  return s.gen->Preempt();
}

void GenerationEngine::Stream(Seq& s, const TokenEvent& ev, SchedClock::time_point now) {
  ++totals_.generation_tokens;
  if (!s.has_first_token) {
    s.has_first_token = true;
    s.first_token = now;
    if (observer_ != nullptr) observer_->OnFirstToken(Seconds(now - s.arrival));
  } else if (observer_ != nullptr) {
    observer_->OnInterToken(Seconds(now - s.last_token));
  }
  s.last_token = now;
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

absl::Status GenerationEngine::Run(std::span<const SeqWork> work, std::vector<SeqOutcome>* outcomes) {
  totals_.prefix_queries = kv_.prefix_queries();  // counted at admission (KvCacheManager::Adopt)
  totals_.prefix_hits = kv_.prefix_hits();
  items_.clear();
  owners_.clear();
  for (const SeqWork& w : work) {
    Seq& s = seqs_.at(w.id);
    if (w.prefill) StartPastSharedPrefix(s);
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
    const StepResult& r = results_[i];
    if (work[i].prefill) totals_.prompt_tokens += r.fed;
    totals_.evictions += r.evictions;
    totals_.evicted_tokens += r.evicted_slots;
    SeqOutcome o;
    o.id = work[i].id;
    o.sampled = r.event.id >= 0;
    if (o.sampled) Stream(*owners_[i], r.event, now);
    o.state = StepState(r.event.finish);
    outcomes->push_back(o);
    const Generation& g = *owners_[i]->gen;
    kv_.OnRan(work[i].id, g.prefill_done(), g.prefilling());
  }
  return absl::OkStatus();
}

void GenerationEngine::Remove(const SchedRequest& request) {
  auto it = seqs_.find(request.id);
  if (it == seqs_.end()) return;
  Seq& s = it->second;
  Generation& g = *s.gen;
  StreamFinal f;
  f.request_id = s.request_id;
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
  f.seed = s.seed;
  f.prompt_tokens = static_cast<int32_t>(g.prompt().size());
  f.completion_tokens = static_cast<int32_t>(g.generated().size());
  f.reasoning_tokens = g.reasoning_tokens();
  f.cached_tokens = std::max(0, s.cached_tokens);
  f.cached_tokens_reported = s.report_cached_tokens;
  const SchedClock::time_point now = SchedClock::now();
  f.total_seconds = Seconds(now - s.arrival);
  f.queue_seconds = request.scheduled_once ? Seconds(request.first_scheduled - s.arrival) : f.total_seconds;
  f.ttft_seconds = s.has_first_token ? Seconds(s.first_token - s.arrival) : 0.0;
  const KvPolicyOptions& kv = g.compressor() != nullptr ? g.compressor()->options() : KvPolicyOptions();
  f.kv.policy = kv.policy;
  f.kv.budget = kv.compresses() ? kv.budget : 0;
  f.kv.peak_cached_tokens = g.kv()->peak_slots();
  if (g.compressor() != nullptr) {
    f.kv.evictions = g.compressor()->evictions();
    f.kv.evicted_tokens = g.compressor()->evicted_slots();
  }
  f.kv.reserved_tokens = request.reserved_blocks * kv_.BlockSize();
  f.kv.preemptions = s.preemptions;
  const PolicyModelInfo model = PolicyInfoFor(config_);
  f.kv.bytes_per_slot = KvBytesPerSlot(model, static_cast<int64_t>(cache_->shape().row_bytes()));
  f.kv.state_bytes = PolicyStateBytes(kv, model, f.kv.peak_cached_tokens);
  f.kv.options = kv;
  f.kv.protected_window = kv.compresses() ? ProtectedWindow(kv) : 0;
  std::shared_ptr<RequestSink> sink = std::move(s.sink);
  seqs_.erase(it);
  kv_.Remove(request.id);  // frees the KV blocks
  if (observer_ != nullptr) observer_->OnFinish(f);
  sink->OnFinish(f);
}

}  // namespace beacon
