#include "engine/generation.h"

#include <algorithm>
#include <cassert>
#include <random>

#include "absl/strings/str_format.h"

namespace beacon {

absl::Status GenerationOptions::Validate(int32_t vocab_size) const {
  if (absl::Status s = sampling.Validate(); !s.ok()) return s;
  if (absl::Status s = kv.Validate(); !s.ok()) return s;
  if (max_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("max_tokens: must be >= 1, got %d", max_tokens));
  }
  if (min_tokens < 0 || min_tokens > max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("min_tokens: %d is outside [0, max_tokens = %d]", min_tokens, max_tokens));
  }
  for (const auto& [name, n] : {std::pair{"logprobs", logprobs}, std::pair{"prompt_logprobs", prompt_logprobs}}) {
    if (n < -1 || n > kMaxTopLogprobs) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %d alternatives is outside [0, %d] (-1: none)", name, n, kMaxTopLogprobs));
    }
  }
  for (const auto& [id, bias] : sampling.logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrFormat("logit_bias: token %d is outside the vocabulary [0, %d)", id, vocab_size));
    }
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
  if (static_cast<int64_t>(forced_tokens.size()) > max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrFormat("forced_tokens: %d tokens, more than max_tokens = %d", forced_tokens.size(), max_tokens));
  }
  for (int32_t id : forced_tokens) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrFormat("forced_tokens: %d is outside the vocabulary [0, %d)", id, vocab_size));
    }
  }
  if (grammar != nullptr && !forced_tokens.empty()) {
    return absl::InvalidArgumentError("forced_tokens: not with a grammar (structured output)");
  }
  if (reasoning.max_reasoning_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_reasoning_tokens: must be >= 0 (0: no limit), got %d", reasoning.max_reasoning_tokens));
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
  auto kv = std::make_unique<SequenceKv>(cache);
  SequenceKv* borrowed = kv.get();
  return Make(tokenizer, borrowed, std::move(kv), config, std::move(prompt), std::move(options));
}

absl::StatusOr<std::unique_ptr<Generation>> Generation::CreateOn(const Tokenizer* tokenizer, SequenceKv* kv,
                                                                 const ModelConfig& config, std::vector<int32_t> prompt,
                                                                 GenerationOptions options) {
  if (kv == nullptr || kv->num_blocks() > 0) return absl::InvalidArgumentError("kv: missing or not empty");
  return Make(tokenizer, kv, nullptr, config, std::move(prompt), std::move(options));
}

absl::StatusOr<std::unique_ptr<Generation>> Generation::Make(const Tokenizer* tokenizer, SequenceKv* kv,
                                                             std::unique_ptr<SequenceKv> own_kv,
                                                             const ModelConfig& config, std::vector<int32_t> prompt,
                                                             GenerationOptions options) {
  if (prompt.empty()) return absl::InvalidArgumentError("prompt: no tokens");
  if (absl::Status s = options.Validate(config.vocab_size); !s.ok()) return s;
  // A request without a seed gets a random one, fixed here so that it can be
  // reported and the same output reproduced.
  if (!options.sampling.seed.has_value()) {
    options.sampling.seed = RandomSeed();
  }
  if (options.grammar != nullptr) {
    GrammarMatcher probe(options.grammar);
    if (probe.vocab_size() != config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "grammar: compiled for a vocabulary of %d tokens, the model has %d", probe.vocab_size(), config.vocab_size));
    }
  }
  std::unique_ptr<SequenceCompressor> compressor;
  if (options.kv.compresses()) {
    auto c = SequenceCompressor::Create(options.kv, PolicyInfoFor(config), static_cast<int32_t>(prompt.size()));
    if (!c.ok()) return c.status();
    compressor = std::move(*c);
  }
  return std::unique_ptr<Generation>(new Generation(tokenizer, kv, std::move(own_kv), config.context_length,
                                                    config.vocab_size, PolicyInfoFor(config), std::move(prompt),
                                                    std::move(options), std::move(compressor)));
}

Generation::Generation(const Tokenizer* tokenizer, SequenceKv* kv, std::unique_ptr<SequenceKv> own_kv,
                       int32_t context_length, int32_t vocab_size, const PolicyModelInfo& model,
                       std::vector<int32_t> prompt, GenerationOptions options,
                       std::unique_ptr<SequenceCompressor> compressor)
    : tokenizer_(tokenizer),
      context_length_(context_length),
      vocab_size_(vocab_size),
      model_(model),
      prompt_(std::move(prompt)),
      options_(std::move(options)),
      own_kv_(std::move(own_kv)),
      kv_(kv),
      compressor_(std::move(compressor)),
      sampler_(options_.sampling),
      detok_(tokenizer, !options_.skip_special_tokens),
      stop_checker_(options_.stop),
      reasoning_(options_.reasoning) {
  sampler_.set_keep_processed(options_.logprobs >= 0 && options_.logprobs_mode == LogprobsMode::kProcessed);
  if (options_.grammar != nullptr) {
    grammar_ = std::make_unique<GrammarMatcher>(options_.grammar);
    mask_.resize(static_cast<size_t>(MaskWords(vocab_size_)));
  }
  if (options_.min_tokens > 0) {
    // Every id that would end generation now: the tokenizer's end tokens
    // (unless EOS is ignored) and the request's stop ids.
    const int32_t n = std::min(vocab_size_, tokenizer_->vocab_size());
    for (int32_t id = 0; !options_.ignore_eos && id < n; ++id) {
      if (tokenizer_->IsEndOfGeneration(id)) banned_.push_back(id);
    }
    banned_.insert(banned_.end(), options_.stop_token_ids.begin(), options_.stop_token_ids.end());
    std::sort(banned_.begin(), banned_.end());  // each id once (OnlyBannedAllowed counts them)
    banned_.erase(std::unique(banned_.begin(), banned_.end()), banned_.end());
  }
}

void Generation::OnPrefixAdopted() {
  assert(prefill_done() == 0);
  (replaying() ? replay_done_ : prompt_done_) = kv_->num_slots();
}

int32_t Generation::Preempt() {
  kv_->Release();
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
  kv_->Release();  // a finished sequence holds no KV; peak_slots() survives
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
  // A stop string ends the text; the request may want it kept.
  if (reason == FinishReason::kStopSequence && options_.include_stop_str_in_output) ev.text += stop_checker_.matched();
  ev.finish = reason;
  return ev;
}

bool Generation::device_samplable() const {
  // The device draws from the raw logits and returns only the id: whatever
  // needs the logits on the host (penalties, logit_bias, bans, logprobs)
  // samples here.
  const bool banning = static_cast<int32_t>(generated_.size()) < options_.min_tokens;
  // A grammar's draw goes to the device with its mask when the mask was
  // filled before the pass (PrepareMask, the step executor's); otherwise it
  // is drawn here.
  return !sampler_.modifies_logits() && !banning && options_.logprobs < 0 && (!constrained() || mask_ready_);
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
  if (constrained() && mask_ready_) s.allowed = mask_;
  return s;
}

TokenEvent Generation::Advance(int32_t n_fed, std::span<const float> logits) {
  const size_t vocab = static_cast<size_t>(vocab_size_);
  // A caller that fed one row for a longer chunk (not NextEntry's) gets no
  // prompt logprobs for it.
  if (wants_prompt_rows() && logits.size() == static_cast<size_t>(n_fed) * vocab) {
    RecordPromptRows(prompt_done_, n_fed, logits);
  }
  if (!Consume(n_fed)) return NothingDue();
  const std::span<const float> row = logits.last(vocab);
  const bool teacher = teacher_forced();
  const bool forced = teacher || reasoning_.MustClose();
  bool banning = static_cast<int32_t>(generated_.size()) < options_.min_tokens;
  std::span<const uint32_t> allowed;
  if (!forced && constrained()) {
    if (!mask_ready_ && !grammar_->FillNextTokenMask(mask_)) {
      error_ = "grammar: no token may come next (the grammar cannot be continued)";
      return Finish(TokenEvent{}, FinishReason::kError);
    }
    allowed = mask_;
    // The grammar may only end here: min_tokens yields (GenerationOptions).
    if (banning && OnlyBannedAllowed()) banning = false;
  }
  const int32_t id =
      teacher  ? options_.forced_tokens[generated_.size()]
      : forced ? reasoning_.close_id()
               : sampler_.Sample(row, prompt_, generated_, banning ? banned_ : std::span<const int32_t>(), allowed);
  std::optional<PositionLogprobs> lp;
  if (options_.logprobs >= 0) lp = SampledLogprobs(row, id, !forced);
  TokenEvent ev = Accept(id);
  ev.logprobs = std::move(lp);
  return ev;
}

void Generation::RecordPromptRows(int32_t start, int32_t n_fed, std::span<const float> logits) {
  const size_t vocab = static_cast<size_t>(vocab_size_);
  for (int32_t j = 0; j < n_fed; ++j) {
    const size_t target = static_cast<size_t>(start + j + 1);  // the prompt token row j predicts
    // Rows already recorded before a mid-prompt preemption are skipped.
    if (target >= prompt_.size() || target != prompt_logprobs_.size() + 1) continue;
    prompt_logprobs_.push_back(LogprobsAt(logits.subspan(static_cast<size_t>(j) * vocab, vocab), 1.0f, prompt_[target],
                                          options_.prompt_logprobs));
  }
}

PositionLogprobs Generation::SampledLogprobs(std::span<const float> row, int32_t id, bool sampled) const {
  if (options_.logprobs_mode == LogprobsMode::kRaw) return LogprobsAt(row, 1.0f, id, options_.logprobs);
  // Processed: the sampler's logits at its temperature (greedy: unscaled).
  // A forced </think> was not drawn: the raw row stands in for them.
  const float t = options_.sampling.temperature;
  const float inv_t = t > 0.0f ? 1.0f / t : 1.0f;
  return LogprobsAt(sampled ? sampler_.processed() : row, inv_t, id, options_.logprobs);
}

bool Generation::OnlyBannedAllowed() const {
  // Allowed tokens counted whole, then the banned ones among them: equal
  // counts mean nothing but an end token may come next.
  int64_t allowed = 0;
  for (uint32_t word : mask_) allowed += __builtin_popcount(word);
  int64_t banned_allowed = 0;
  for (int32_t id : banned_) {
    const size_t w = static_cast<size_t>(id) / 32;
    if (w < mask_.size() && (mask_[w] >> (id % 32) & 1u)) ++banned_allowed;
  }
  return allowed > 0 && allowed == banned_allowed;
}

bool Generation::PrepareMask(int32_t n_fed) {
  mask_ready_ = false;
  if (!constrained() || reasoning_.MustClose()) return false;
  // Only a chunk that ends the prompt (or a decode step) draws; a recompute
  // or a mid-prompt chunk does not.
  if (replaying()) return false;
  if (prefilling() && prompt_done_ + n_fed < static_cast<int32_t>(prompt_.size())) return false;
  mask_ready_ = grammar_->FillNextTokenMask(mask_);
  return mask_ready_;
}

TokenEvent Generation::AdvanceSampled(int32_t n_fed, int32_t token) {
  if (!Consume(n_fed)) return NothingDue();
  if (teacher_forced()) return Accept(options_.forced_tokens[generated_.size()]);
  return Accept(reasoning_.MustClose() ? reasoning_.close_id() : token);
}

TokenEvent Generation::NothingDue() {
  // A recompute evicts after its chunks past the prompt (Consume); one that
  // failed ends the sequence here, before the next chunk grows the cache past
  // what admission reserved for it.
  if (compression_failed()) return FailCompression(TokenEvent{});
  return TokenEvent{};
}

bool Generation::compression_failed() const { return compressor_ != nullptr && !compressor_->failure().ok(); }

TokenEvent Generation::FailCompression(TokenEvent ev) {
  // A cache that cannot evict would outgrow its reservation: end the
  // sequence, its blocks freed, with the device's error.
  error_ = std::string(compressor_->failure().message());
  return Finish(std::move(ev), FinishReason::kError);
}

bool Generation::Consume(int32_t n_fed) {
  if (replaying()) {
    replay_done_ += n_fed;
    // Keep a compressing sequence near its bound while it recomputes.
    if (compressor_ != nullptr && compressor_->schedule().EvictsAfterRecomputeChunk(replay_done_, kv_->num_slots())) {
      compressor_->Evict(kv_, replay_done_);
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
  // The grammar takes the answer's tokens: decided before the reasoning
  // tracker sees this one (the </think> that closes the block is not).
  const bool constrained_token = constrained();
  mask_ready_ = false;
  if (constrained_token && !grammar_->Accept(id)) {
    error_ = absl::StrFormat("grammar: token %d is not allowed here", id);
    return Finish(std::move(ev), FinishReason::kError);
  }
  generated_.push_back(id);
  // The step's K/V is in the cache: the moment to evict, before the next
  // step appends more.
  if (compressor_ != nullptr) compressor_->AfterDecodeStep(kv_, next_position());
  ev.id = id;
  if (compression_failed()) return FailCompression(std::move(ev));
  const ReasoningTracker::Step part = reasoning_.Observe(id);
  ev.part = part.part;

  const bool eos = !options_.ignore_eos && tokenizer_->IsEndOfGeneration(id);
  const bool stop_id =
      std::find(options_.stop_token_ids.begin(), options_.stop_token_ids.end(), id) != options_.stop_token_ids.end();
  if (eos) return Finish(std::move(ev), FinishReason::kEos);
  if (stop_id) return Finish(std::move(ev), FinishReason::kStop);
  // The grammar ended on an end token that ignore_eos let through: nothing may follow.
  if (constrained_token && grammar_->terminated()) return Finish(std::move(ev), FinishReason::kStop);

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
