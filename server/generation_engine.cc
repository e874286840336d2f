#include "server/generation_engine.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string_view>

#include "absl/base/casts.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

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
    : backend_(backend), cache_(cache), tokenizer_(tokenizer), config_(config) {}

GenerationEngine::~GenerationEngine() = default;

absl::Status GenerationEngine::Add(RequestId id, PreparedRequest request, std::shared_ptr<RequestSink> sink) {
  if (seqs_.contains(id)) return absl::AlreadyExistsError(absl::StrCat("sequence ", id, " exists"));
  absl::StatusOr<std::unique_ptr<Generation>> gen =
      Generation::Create(tokenizer_, cache_, config_, std::move(request.prompt), std::move(request.options));
  if (!gen.ok()) return gen.status();
  (*gen)->set_thread_pool(backend_->host_pool());
  Seq s;
  s.gen = std::move(*gen);
  s.sink = std::move(sink);
  s.request_id = std::move(request.request_id);
  s.arrival = request.arrival;
  s.seed = s.gen->sampling_seed();
  s.group = request.group;
  s.index = request.sample_index;
  seqs_.emplace(id, std::move(s));
  return absl::OkStatus();
}

void GenerationEngine::Forget(RequestId id) { seqs_.erase(id); }

uint64_t GenerationEngine::PrefixCacheSaltFor(std::string_view model, const ModelConfig& config, const KvCache& cache) {
  std::vector<uint64_t> parts = {std::hash<std::string_view>()(model), static_cast<uint64_t>(cache.dtype()),
                                 static_cast<uint64_t>(config.rope_style),
                                 static_cast<uint64_t>(cache.shape().block_size)};
  const RopeTable rope = config.RopeFrequencies();
  for (float f : rope.inv_freq) parts.push_back(absl::bit_cast<uint32_t>(f));
  parts.push_back(absl::bit_cast<uint32_t>(rope.attention_factor));
  return PrefixCacheSalt(parts);
}

void GenerationEngine::EnablePrefixCache(uint64_t salt) {
  prefix_cache_ = std::make_unique<PrefixCache>(&cache_->pool(), BlockSize(), salt);
}

int32_t GenerationEngine::OwnBlocks(RequestId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? 0 : it->second.gen->kv()->own_blocks();
}

GenerationEngine::PrefixSource GenerationEngine::FindPrefix(RequestId id) const {
  PrefixSource src;
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return src;
  const Seq& s = it->second;
  const Generation& g = *s.gen;
  const int32_t want = g.PrefixBlocksWanted();
  if (want == 0) return src;
  // A sample group's later member, before it ever ran: sample 0's prompt.
  if (s.group != 0 && s.group != id && g.generated().empty()) {
    auto donor = seqs_.find(s.group);
    if (donor != seqs_.end()) {
      const Generation& d = *donor->second.gen;
      if (d.prefilling()) {  // still running the prompt (or recomputing it)
        src.probe.wait = true;
        return src;
      }
      // Holding the prompt (not finished, not preempted): take its blocks.
      if (d.kv()->num_slots() >= want * BlockSize()) {
        src.probe.blocks = want;
        src.donor = d.kv();
        return src;
      }
    }
  }
  if (prefix_cache_ == nullptr) return src;
  src.match = prefix_cache_->Find(g.PrefixTokens(), want);
  src.probe.blocks = src.match.blocks();
  src.probe.idle = src.match.idle;
  return src;
}

StepEngine::PrefixProbe GenerationEngine::ProbePrefix(RequestId id) const { return FindPrefix(id).probe; }

int32_t GenerationEngine::AdoptPrefix(RequestId id) {
  const PrefixSource src = FindPrefix(id);
  Seq& s = seqs_.at(id);
  Generation& g = *s.gen;
  if (src.donor != nullptr) {
    g.AdoptPromptPrefix(*src.donor, src.probe.blocks * BlockSize());
  } else if (src.probe.blocks > 0) {
    g.AdoptCachedPrefix(prefix_cache_->Take(src.match));
  }
  const int32_t slots = g.kv()->num_slots();
  totals_.prompt_tokens += slots;  // prefilled by reuse: counted as prompt tokens, as vLLM does
  if (prefix_cache_ != nullptr) {
    totals_.prefix_queries += static_cast<int64_t>(g.PrefixTokens().size());
    totals_.prefix_hits += slots;
  }
  if (s.cached_tokens < 0) s.cached_tokens = slots;
  return slots;
}

void GenerationEngine::CachePromptBlocks(const Seq& s) {
  const Generation& g = *s.gen;
  const int32_t n = g.CacheablePromptBlocks();
  if (n > 0) prefix_cache_->Insert(g.prompt(), g.kv()->block_ids(), n);
}

int32_t GenerationEngine::num_compressing() const {
  int32_t n = 0;
  for (const auto& [id, s] : seqs_) n += s.gen->compressor() != nullptr;
  return n;
}

void GenerationEngine::KvTokens(int64_t* cached, int64_t* logical) const {
  *cached = 0;
  *logical = 0;
  // Blocks some sequence holds by reference (prefix cache, sample group):
  // counted once, whole, however many sequences hold them.
  absl::flat_hash_set<int32_t> shared;
  for (const auto& [id, s] : seqs_) {
    const SequenceKv& kv = *s.gen->kv();
    for (int32_t b = 0; b < kv.shared_blocks(); ++b) shared.insert(kv.block_ids()[b]);
  }
  const int32_t bs = BlockSize();
  *cached = static_cast<int64_t>(shared.size()) * bs;
  for (const auto& [id, s] : seqs_) {
    const SequenceKv& kv = *s.gen->kv();
    const int32_t slots = kv.num_slots();
    int32_t own = slots;
    if (!shared.empty()) {
      for (int32_t b = 0; b < kv.num_blocks(); ++b) {
        if (shared.contains(kv.block_ids()[b])) own -= std::max(0, std::min(bs, slots - b * bs));
      }
    }
    *cached += own;
    // Slots hold tokens [0, next_position) less the evicted ones.
    *logical += slots > 0 ? std::max(slots, s.gen->next_position()) : 0;
  }
}

int32_t GenerationEngine::BlocksToAppend(RequestId id, int32_t n) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return 0;
  const SequenceKv* kv = it->second.gen->kv();
  const int32_t bs = BlockSize();
  const int32_t need = (kv->num_slots() + n + bs - 1) / bs - kv->num_blocks();
  return need > 0 ? need : 0;
}

int32_t GenerationEngine::Preempt(RequestId id) {
  Seq& s = seqs_.at(id);
  ++s.preemptions;
  ++totals_.preemptions;
  return s.gen->Preempt();
}

GenerationEngine::StepBatch GenerationEngine::Gather(std::span<const SeqWork> work) {
  StepBatch b;
  b.entries.reserve(work.size());
  b.owners.reserve(work.size());
  b.first_row.reserve(work.size());
  size_t rows = 0;
  bool any_all_logits = false;
  for (const SeqWork& w : work) {
    Seq& s = seqs_.at(w.id);
    const ForwardEntry e = s.gen->NextEntry(w.n_tokens);
    b.entries.push_back(e);
    b.owners.push_back(&s);
    b.first_row.push_back(rows);
    rows += e.all_logits ? e.tokens.size() : 1;
    any_all_logits |= e.all_logits;
    if (w.prefill) totals_.prompt_tokens += static_cast<int64_t>(e.tokens.size());
  }
  // A device that samples takes the draw where the logits are (no logits
  // copy, no host sampler) unless some sequence needs the logits on the
  // host (penalties, logit_bias, logprobs; prompt logprobs need every row).
  b.on_device = backend_->samples_on_device() && !any_all_logits;
  for (size_t i = 0; b.on_device && i < b.owners.size(); ++i) b.on_device = b.owners[i]->gen->device_samplable();
  return b;
}

absl::Status GenerationEngine::Forward(const StepBatch& b) {
  absl::Status st;
  if (b.on_device) {
    sampling_.clear();
    for (Seq* s : b.owners) sampling_.push_back(s->gen->device_sampling());
    st = backend_->ForwardSample(b.entries, sampling_, &sampled_);
  } else {
    st = backend_->Forward(b.entries, &logits_);
  }
  if (!st.ok()) {
    last_error_ = std::string(st.message());
    return st;
  }
  ++totals_.steps;
  return absl::OkStatus();
}

TokenEvent GenerationEngine::Advance(const StepBatch& b, size_t i) {
  Generation& g = *b.owners[i]->gen;
  const SequenceCompressor* c = g.compressor();
  const int64_t evictions_before = c != nullptr ? c->evictions() : 0;
  const int64_t evicted_before = c != nullptr ? c->evicted_slots() : 0;
  const int32_t fed = static_cast<int32_t>(b.entries[i].tokens.size());
  const size_t vocab = static_cast<size_t>(config_.vocab_size);
  const size_t rows = b.entries[i].all_logits ? static_cast<size_t>(fed) : 1;
  TokenEvent ev = b.on_device
                      ? g.AdvanceSampled(fed, sampled_[i])
                      : g.Advance(fed, std::span<const float>(logits_.data() + b.first_row[i] * vocab, rows * vocab));
  if (c != nullptr) {
    totals_.evictions += c->evictions() - evictions_before;
    totals_.evicted_tokens += c->evicted_slots() - evicted_before;
  }
  return ev;
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
  const StepBatch b = Gather(work);
  if (absl::Status st = Forward(b); !st.ok()) return st;
  const SchedClock::time_point now = SchedClock::now();
  for (size_t i = 0; i < work.size(); ++i) {
    const TokenEvent ev = Advance(b, i);
    SeqOutcome o;
    o.id = work[i].id;
    o.sampled = ev.id >= 0;
    if (o.sampled) Stream(*b.owners[i], ev, now);
    o.state = StepState(ev.finish);
    outcomes->push_back(o);
    if (prefix_cache_ != nullptr && work[i].prefill) CachePromptBlocks(*b.owners[i]);
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
  f.kv.reserved_tokens = request.reserved_blocks * BlockSize();
  f.kv.preemptions = s.preemptions;
  std::shared_ptr<RequestSink> sink = std::move(s.sink);
  seqs_.erase(it);  // frees the KV blocks
  if (observer_ != nullptr) observer_->OnFinish(f);
  sink->OnFinish(f);
}

}  // namespace beacon
