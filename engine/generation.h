// One sequence's generation state: its prompt, KV slots, sampler, streaming
// detokenizer and stop criteria. The batching loop (beacon-run, beacon-bench,
// later the scheduler) feeds it logits and reads back token events.
//
// Lifecycle: PendingInput() gives the tokens to run next (a prompt chunk, or
// the last sampled token); after the forward pass, Advance() takes the logits
// of the last fed token and, once the prompt is consumed, samples.
//
// Thread ownership: the engine thread.
#ifndef BEACON_ENGINE_GENERATION_H_
#define BEACON_ENGINE_GENERATION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend.h"
#include "engine/finish_reason.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/logprobs.h"
#include "engine/reasoning.h"
#include "engine/sampler.h"
#include "engine/stop_checker.h"
#include "kv/policy/kv_policy.h"
#include "kv/policy/sequence_compressor.h"
#include "kv/store/kv_cache.h"
#include "model/model_config.h"
#include "model/tokenizer/tokenizer.h"

namespace beacon {

struct GenerationOptions {
  SamplingParams sampling;
  int32_t max_tokens = 256;             // >= 1
  bool ignore_eos = false;              // keep going past EOS (benchmarks, long CoT)
  std::vector<std::string> stop;        // stop strings, never streamed
  std::vector<int32_t> stop_token_ids;  // end generation, not streamed
  // vLLM's min_tokens: EOS (unless ignore_eos) and stop_token_ids are banned
  // from the draw until this many tokens are generated; stop strings still
  // end generation. 0 <= min_tokens <= max_tokens.
  // With a grammar whose only way on is to end (a complete JSON value, the
  // last character of a regex), the grammar wins: the ban is lifted for that
  // draw and the sequence ends short of min_tokens, rather than failing.
  int32_t min_tokens = 0;
  // false: special tokens other than the one that ends generation are part
  // of the text (rendered as their text), as in vLLM.
  bool skip_special_tokens = true;
  // The stop string that ended generation is appended to the text.
  bool include_stop_str_in_output = false;
  // Log probabilities (engine/logprobs.h): -1 none; n in [0, 20]: each
  // generated token's, with its n most likely alternatives. prompt_logprobs
  // the same for every prompt token but the first (raw logits always).
  int32_t logprobs = -1;
  int32_t prompt_logprobs = -1;
  LogprobsMode logprobs_mode = LogprobsMode::kRaw;
  KvPolicyOptions kv;          // KV compression; policy "full" = none
  ReasoningOptions reasoning;  // the reasoning/answer split (parser none: all answer)
  // Teacher forcing, for the evaluation (eval/replay_batch.h): generated
  // token i is forced_tokens[i] whatever the logits say; the sampler is not
  // consulted for it (its state does not advance). Past the end the draw
  // resumes. Stop criteria apply to forced tokens as to drawn ones. At most
  // max_tokens ids, each in the vocabulary.
  std::vector<int32_t> forced_tokens;
  // Structured output (engine/grammar/): the answer must match this grammar,
  // compiled for the model's vocabulary (GrammarCompiler). The constraint
  // starts where the answer does: after the reasoning block closes, or at the
  // first token without one. Tokens of the reasoning are never masked.
  // Null: unconstrained. Not with forced_tokens.
  std::shared_ptr<const CompiledGrammar> grammar;

  // INVALID_ARGUMENT naming the field.
  absl::Status Validate(int32_t vocab_size) const;
};

struct TokenEvent {
  int32_t id = -1;
  std::string text;                   // complete UTF-8 that became safe to emit with this token
  TextPart part = TextPart::kAnswer;  // the part `text` belongs to (engine/reasoning.h)
  FinishReason finish = FinishReason::kNone;
  // With GenerationOptions::logprobs >= 0: the sampled token's.
  std::optional<PositionLogprobs> logprobs;
};

// What a KV policy needs to know of a model.
PolicyModelInfo PolicyInfoFor(const ModelConfig& config);

class Generation {
 public:
  // INVALID_ARGUMENT for invalid options (GenerationOptions::Validate) or an
  // empty prompt. The tokenizer and cache must outlive the generation, which
  // owns its KV on `cache` (beacon-run, beacon-bench, the eval).
  static absl::StatusOr<std::unique_ptr<Generation>> Create(const Tokenizer* tokenizer, KvCache* cache,
                                                            const ModelConfig& config, std::vector<int32_t> prompt,
                                                            GenerationOptions options);
  // The same on a KV it borrows (a KvCacheManager's, kv/serving/kv_cache_manager.h,
  // which shares and frees it): `kv` must hold nothing and outlive the
  // generation (INVALID_ARGUMENT otherwise).
  static absl::StatusOr<std::unique_ptr<Generation>> CreateOn(const Tokenizer* tokenizer, SequenceKv* kv,
                                                              const ModelConfig& config, std::vector<int32_t> prompt,
                                                              GenerationOptions options);

  bool finished() const { return finish_ != FinishReason::kNone; }
  // True while prompt tokens, or the tokens of a recompute, remain to run.
  bool prefilling() const { return replaying() || prompt_done_ < static_cast<int32_t>(prompt_.size()); }
  // Tokens to run next: up to `max_chunk` prompt tokens, or the last sample.
  std::span<const int32_t> PendingInput(int32_t max_chunk) const;
  // RoPE position of the first token PendingInput() returns. Positions count
  // tokens, not KV slots: once eviction drops slots the two differ.
  int32_t next_position() const {
    if (replaying()) return replay_done_;
    return prefilling() ? prompt_done_ : static_cast<int32_t>(prompt_.size() + generated_.size()) - 1;
  }

  // Preemption by recompute: gives every KV block back and restarts the
  // sequence's cache from scratch. The tokens to run again (returned) are the
  // prompt and every generated token but the last, which is fed next as a
  // normal decode step; the last chunk of a recompute samples nothing. The
  // compressor starts afresh and evicts after every recompute chunk past the
  // prompt, so the cache holds at most max(prompt, bound) + one chunk (attention-statistics policies such as h2o lose
  // their accumulated scores). Sampler, detokenizer and stop state are kept:
  // output is the same as without preemption, up to the batch-invariant
  // kernels' exactness (bit-identical on the CPU backend).
  int32_t Preempt();

  // Consumes the logits of the `n_fed` tokens just run: one row (the last
  // token's), or a row per token when NextEntry asked for all (prompt
  // logprobs). Returns the sampled token's event, or an empty event (id -1)
  // mid-prompt. When
  // the reasoning limit is reached the token is </think> instead of a sample
  // (ReasoningTracker::MustClose), on both sampling paths.
  TokenEvent Advance(int32_t n_fed, std::span<const float> logits);

  // With a grammar: fills the mask of the token the next Advance draws, if
  // that Advance draws under the grammar after running `n_fed` tokens (the
  // step executor fills the masks of a step's sequences in parallel before
  // the forward pass); Advance fills it itself otherwise. Returns whether it
  // filled one.
  bool PrepareMask(int32_t n_fed);
  // The next draw is constrained by the grammar.
  bool constrained() const { return grammar_ != nullptr && !reasoning_.inside() && !teacher_forced(); }

  // Device sampling (Backend::ForwardSample): whether this sequence's
  // sampling can run there (no penalties, which need the history), the
  // parameters of its next draw, and Advance with the drawn token instead
  // of logits (ignored mid-prompt and during a recompute, like logits are).
  bool device_samplable() const;
  EntrySampling device_sampling() const;
  TokenEvent AdvanceSampled(int32_t n_fed, int32_t token);

  // The KV was given leading slots by reference from outside
  // (KvCacheManager::Adopt): the prefill starts past them, as if they had
  // run. REQUIRES nothing of this prefill has run yet.
  void OnPrefixAdopted();
  // Tokens of the current prefill written so far: the prompt's, or during a
  // recompute the recompute's (from 0 again).
  int32_t prefill_done() const { return replaying() ? replay_done_ : prompt_done_; }

  SequenceKv* kv() { return kv_; }
  const SequenceKv* kv() const { return kv_; }
  // The KV policy to hand the backend: the compressor's, else the
  // attention observer (null under `full` without one).
  KvPolicy* policy() { return compressor_ != nullptr ? compressor_->policy() : attention_observer_; }
  // A policy that only observes this sequence's forward passes (the
  // evaluation's RecordingPolicy on its full-cache reference); it must
  // outlive the generation. Ignored when the sequence compresses (its
  // compressor's policy observes).
  void set_attention_observer(KvPolicy* observer) { attention_observer_ = observer; }
  // This sequence's entry of the next forward pass: its KV, PendingInput(max_chunk),
  // the position of the first of those tokens and its policy (the one place a
  // batch entry is built from a Generation).
  ForwardEntry NextEntry(int32_t max_chunk) {
    ForwardEntry e;
    e.kv = kv();
    e.tokens = PendingInput(max_chunk);
    e.start_pos = next_position();
    e.policy = policy();
    e.all_logits = wants_prompt_rows();
    return e;
  }
  // Null under `full`.
  const SequenceCompressor* compressor() const { return compressor_.get(); }
  // The CPU pool for the compressor's host work (SequenceCompressor::
  // set_thread_pool), kept across preemption; null: single-threaded.
  void set_thread_pool(ThreadPool* pool) {
    pool_ = pool;
    if (compressor_ != nullptr) compressor_->set_thread_pool(pool);
  }
  const std::vector<int32_t>& prompt() const { return prompt_; }
  const GenerationOptions& options() const { return options_; }
  // With GenerationOptions::prompt_logprobs >= 0: the log probabilities of
  // prompt tokens 1, 2, ... (entry i is token i + 1's; the first token has
  // none), complete once the prompt has run (prompt_logprobs_complete()).
  const std::vector<PositionLogprobs>& prompt_logprobs() const { return prompt_logprobs_; }
  bool prompt_logprobs_complete() const {
    return options_.prompt_logprobs >= 0 && prompt_logprobs_.size() + 1 >= prompt_.size();
  }
  // The sampler's seed (drawn at creation when the options gave none).
  uint64_t sampling_seed() const { return options_.sampling.seed.value_or(0); }
  const std::vector<int32_t>& generated() const { return generated_; }
  // Generated tokens that were reasoning (ReasoningTracker), markers included.
  int32_t reasoning_tokens() const { return reasoning_.reasoning_tokens(); }
  // kNone while running; then kLength, kEos, kStop or kStopSequence, or
  // kError when its KV eviction failed on the device or its grammar allowed
  // no token (error() says how); a grammar's end with ignore_eos is kStop; a
  // Generation never ends itself for the other reasons.
  FinishReason finish_reason() const { return finish_; }
  // With kError: what failed.
  const std::string& error() const { return error_; }
  // What ended generation: the stop string (kStopSequence) or the token
  // (kEos, kStop; -1 otherwise).
  const std::string& matched_stop() const { return stop_checker_.matched(); }
  int32_t stop_token() const {
    return (finish_ == FinishReason::kEos || finish_ == FinishReason::kStop) && !generated_.empty() ? generated_.back()
                                                                                                    : -1;
  }

 private:
  Generation(const Tokenizer* tokenizer, SequenceKv* kv, std::unique_ptr<SequenceKv> own_kv, int32_t context_length,
             int32_t vocab_size, const PolicyModelInfo& model, std::vector<int32_t> prompt, GenerationOptions options,
             std::unique_ptr<SequenceCompressor> compressor);
  // Create and CreateOn: `kv` is the sequence's KV, `own_kv` it when owned.
  static absl::StatusOr<std::unique_ptr<Generation>> Make(const Tokenizer* tokenizer, SequenceKv* kv,
                                                          std::unique_ptr<SequenceKv> own_kv, const ModelConfig& config,
                                                          std::vector<int32_t> prompt, GenerationOptions options);
  TokenEvent Finish(TokenEvent ev, FinishReason reason);
  // What a fed chunk that samples nothing returns: an empty event, or the
  // kError finish of a recompute whose eviction failed.
  TokenEvent NothingDue();
  bool compression_failed() const;
  // Ends the sequence with the compressor's failure (kError).
  TokenEvent FailCompression(TokenEvent ev);
  // The shared halves of Advance: consumes fed tokens (true when a token is
  // now due), then records a sampled token and checks the stop criteria.
  bool Consume(int32_t n_fed);
  TokenEvent Accept(int32_t id);
  bool replaying() const { return replay_done_ < static_cast<int32_t>(replay_.size()); }
  // The next generated token is GenerationOptions::forced_tokens'.
  bool teacher_forced() const { return generated_.size() < options_.forced_tokens.size(); }
  // The next chunk is prompt whose logprobs are still owed.
  bool wants_prompt_rows() const {
    return options_.prompt_logprobs >= 0 && !replaying() && prefilling() && !prompt_logprobs_complete();
  }
  // Prompt logprobs from the rows of a prefill chunk starting at `start`.
  void RecordPromptRows(int32_t start, int32_t n_fed, std::span<const float> logits);
  // The sampled (or forced) token's logprobs from its logits row.
  PositionLogprobs SampledLogprobs(std::span<const float> row, int32_t id, bool sampled) const;

  const Tokenizer* tokenizer_;
  int32_t context_length_;
  int32_t vocab_size_;
  PolicyModelInfo model_;
  std::vector<int32_t> prompt_;
  GenerationOptions options_;
  std::unique_ptr<SequenceKv> own_kv_;  // Create: the KV is the generation's own; CreateOn: null
  SequenceKv* kv_;                      // the sequence's KV, owned or borrowed
  std::unique_ptr<SequenceCompressor> compressor_;
  KvPolicy* attention_observer_ = nullptr;  // set_attention_observer
  ThreadPool* pool_ = nullptr;              // set_thread_pool
  Sampler sampler_;
  IncrementalDetokenizer detok_;
  StopChecker stop_checker_;
  ReasoningTracker reasoning_;
  std::unique_ptr<GrammarMatcher> grammar_;  // options_.grammar's; null without one
  std::vector<uint32_t> mask_;               // the grammar's mask for the next draw
  bool mask_ready_ = false;                  // mask_ is for the next draw (PrepareMask)
  std::vector<int32_t> generated_;
  std::vector<int32_t> banned_;  // min_tokens: the ids that would end generation
  // Whether mask_ allows only tokens of banned_ (the grammar can only end).
  bool OnlyBannedAllowed() const;
  std::vector<PositionLogprobs> prompt_logprobs_;
  int32_t prompt_done_ = 0;
  std::vector<int32_t> replay_;  // recompute after preemption: prompt + generated[:-1]
  int32_t replay_done_ = 0;
  FinishReason finish_ = FinishReason::kNone;
  std::string error_;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_GENERATION_H_
