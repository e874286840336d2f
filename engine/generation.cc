#include "engine/generation.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_format.h"

namespace beacon {

absl::Status GenerationOptions::Validate(int32_t vocab_size) const {
  if (absl::Status s = sampling.Validate(); !s.ok()) return s;
  if (absl::Status s = kv.Validate(); !s.ok()) return s;
  if (max_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("max_tokens must be >= 1, got %d", max_tokens));
  }
  for (const std::string& s : stop) {
    if (s.empty()) return absl::InvalidArgumentError("stop: stop strings must not be empty");
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrFormat("stop_token_ids: %d is outside the vocabulary [0, %d)", id, vocab_size));
    }
  }
  if (reasoning.max_reasoning_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_reasoning_tokens must be >= 0 (0: no limit), got %d", reasoning.max_reasoning_tokens));
  }
  if (reasoning.syntax.enabled()) {
    for (int32_t id : {reasoning.syntax.open_id, reasoning.syntax.close_id}) {
      if (id < 0 || id >= vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrFormat("reasoning: marker token %d is outside the vocabulary [0, %d)", id, vocab_size));
      }
    }
  } else if (reasoning.max_reasoning_tokens > 0) {
    return absl::InvalidArgumentError("max_reasoning_tokens: this model has no reasoning parser");
  }
  return absl::OkStatus();
}

PolicyModelInfo PolicyInfoFor(const ModelConfig& c) {
  PolicyModelInfo m;
  m.n_layers = c.n_layers;
  m.n_heads = c.n_heads;
  m.n_kv_heads = c.n_kv_heads;
  m.head_dim = c.head_dim;
  m.rope_theta = c.rope_theta;
  m.rope = c.RopeFrequencies();
  m.rope_interleaved = c.rope_style == RopeStyle::kInterleaved;
  return m;
}

absl::StatusOr<std::unique_ptr<Generation>> Generation::Create(const Tokenizer* tokenizer, KvCache* cache,
                                                               const ModelConfig& config, std::vector<int32_t> prompt,
                                                               GenerationOptions options) {
  if (prompt.empty()) return absl::InvalidArgumentError("prompt: no tokens");
  if (absl::Status s = options.Validate(config.vocab_size); !s.ok()) return s;
  // A request without a seed gets a random one, fixed here so that it can be
  // reported and the same output reproduced.
  if (!options.sampling.seed.has_value()) {
    std::random_device rd;
    options.sampling.seed = (uint64_t{rd()} << 32) | rd();
  }
  std::unique_ptr<SequenceCompressor> compressor;
  if (options.kv.compresses()) {
    auto c = SequenceCompressor::Create(options.kv, PolicyInfoFor(config), static_cast<int32_t>(prompt.size()));
    if (!c.ok()) return c.status();
    compressor = std::move(*c);
  }
  return std::unique_ptr<Generation>(new Generation(tokenizer, cache, config.context_length, PolicyInfoFor(config),
                                                    std::move(prompt), std::move(options), std::move(compressor)));
}

Generation::Generation(const Tokenizer* tokenizer, KvCache* cache, int32_t context_length, const PolicyModelInfo& model,
                       std::vector<int32_t> prompt, GenerationOptions options,
                       std::unique_ptr<SequenceCompressor> compressor)
    : tokenizer_(tokenizer),
      context_length_(context_length),
      model_(model),
      prompt_(std::move(prompt)),
      options_(std::move(options)),
      kv_(cache),
      compressor_(std::move(compressor)),
      sampler_(options_.sampling),
      detok_(tokenizer),
      stop_checker_(options_.stop),
      reasoning_(options_.reasoning) {}

int32_t Generation::Preempt() {
  kv_.Release();
  if (compressor_ != nullptr) {
    // Same options and prompt as at creation, which succeeded then.
    compressor_ = std::move(*SequenceCompressor::Create(options_.kv, model_, static_cast<int32_t>(prompt_.size())));
    compressor_->set_thread_pool(pool_);
  }
  if (generated_.empty()) {  // preempted mid-prompt: plain prefill again
    prompt_done_ = 0;
    replay_.clear();
    replay_done_ = 0;
    return static_cast<int32_t>(prompt_.size());
  }
  replay_ = prompt_;
  replay_.insert(replay_.end(), generated_.begin(), generated_.end() - 1);
  replay_done_ = 0;
  return static_cast<int32_t>(replay_.size());
}

std::span<const int32_t> Generation::PendingInput(int32_t max_chunk) const {
  if (replaying()) {
    const int32_t n = std::min<int32_t>(max_chunk, static_cast<int32_t>(replay_.size()) - replay_done_);
    return std::span<const int32_t>(replay_).subspan(replay_done_, n);
  }
  if (prefilling()) {
    const int32_t n = std::min<int32_t>(max_chunk, static_cast<int32_t>(prompt_.size()) - prompt_done_);
    return std::span<const int32_t>(prompt_).subspan(prompt_done_, n);
  }
  return std::span<const int32_t>(generated_).last(1);
}

TokenEvent Generation::Finish(TokenEvent ev, FinishReason reason) {
  finish_ = reason;
  kv_.Release();  // a finished sequence holds no KV; peak_slots() survives
  if (reason != FinishReason::kStopSequence) {
    // Release what the detokenizer and the stop checker still hold back; the
    // held text may itself complete a stop string.
    StopChecker::Result r = stop_checker_.Push(detok_.Flush());
    ev.text += r.text;
    if (r.stopped && reason != FinishReason::kError) {  // an error stays the reason
      reason = FinishReason::kStopSequence;
      finish_ = reason;
    } else if (!r.stopped) {
      ev.text += stop_checker_.Flush();
    }
  }
  ev.finish = reason;
  return ev;
}

bool Generation::device_samplable() const {
  const SamplingParams& p = options_.sampling;
  return p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f;
}

EntrySampling Generation::device_sampling() const {
  const SamplingParams& p = options_.sampling;
  EntrySampling s;
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.seed = p.seed.value_or(0);
  s.step = generated_.size();
  return s;
}

TokenEvent Generation::Advance(int32_t n_fed, std::span<const float> logits) {
  if (!Consume(n_fed)) return TokenEvent{};
  if (reasoning_.MustClose()) return Accept(reasoning_.close_id());
  return Accept(sampler_.Sample(logits, prompt_, generated_));
}

TokenEvent Generation::AdvanceSampled(int32_t n_fed, int32_t token) {
  if (!Consume(n_fed)) return TokenEvent{};
  return Accept(reasoning_.MustClose() ? reasoning_.close_id() : token);
}

bool Generation::Consume(int32_t n_fed) {
  if (replaying()) {
    replay_done_ += n_fed;
    // Keep a compressing sequence near its bound while it recomputes.
    if (compressor_ != nullptr && compressor_->schedule().EvictsAfterRecomputeChunk(replay_done_, kv_.num_slots())) {
      compressor_->Evict(&kv_, replay_done_);
    }
    if (!replaying()) {
      replay_.clear();
      replay_done_ = 0;
    }
    return false;  // the recompute's last logits predict a token already sampled
  }
  if (prefilling()) {
    prompt_done_ += n_fed;
    if (prefilling()) return false;  // mid-prompt chunk: nothing to sample yet
  }
  return true;
}

TokenEvent Generation::Accept(int32_t id) {
  TokenEvent ev;
  generated_.push_back(id);
  // The step's K/V is in the cache: the moment to evict, before the next
  // step appends more.
  if (compressor_ != nullptr) compressor_->AfterDecodeStep(&kv_, next_position());
  ev.id = id;
  if (compressor_ != nullptr && !compressor_->failure().ok()) {
    // A cache that cannot evict would outgrow its reservation: end the
    // sequence here, its blocks freed, with the device's error.
    error_ = std::string(compressor_->failure().message());
    return Finish(std::move(ev), FinishReason::kError);
  }
  const ReasoningTracker::Step part = reasoning_.Observe(id);
  ev.part = part.part;

  const bool eos = !options_.ignore_eos && tokenizer_->IsEndOfGeneration(id);
  const bool stop_id =
      std::find(options_.stop_token_ids.begin(), options_.stop_token_ids.end(), id) != options_.stop_token_ids.end();
  if (eos) return Finish(std::move(ev), FinishReason::kEos);
  if (stop_id) return Finish(std::move(ev), FinishReason::kStop);

  if (part.marker) {
    // A marker has no text. The one that closes the reasoning releases what
    // the detokenizer and the stop checker hold back, so the reasoning text
    // is complete and the answer starts afresh (stop strings match within
    // one part, never across the boundary).
    if (part.closed) {
      StopChecker::Result r = stop_checker_.Push(detok_.Flush());
      ev.text = std::move(r.text);
      if (r.stopped) return Finish(std::move(ev), FinishReason::kStopSequence);
      ev.text += stop_checker_.Flush();
    }
  } else {
    StopChecker::Result r = stop_checker_.Push(detok_.Push(id));
    ev.text = std::move(r.text);
    if (r.stopped) return Finish(std::move(ev), FinishReason::kStopSequence);
  }
  if (static_cast<int32_t>(generated_.size()) >= options_.max_tokens || next_position() >= context_length_) {
    return Finish(std::move(ev), FinishReason::kLength);
  }
  return ev;
}

}  // namespace beacon
