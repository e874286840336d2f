// Next-token sampling from logits: greedy, temperature, top-k, top-p, min-p,
// repetition / presence / frequency penalties, logit_bias, banned tokens
// (min_tokens) and a grammar's allowed tokens, with a per-request seed.
//
// Same params (with a seed), same logits, same history -> same token, always:
// the RNG is owned by the Sampler and advanced once per Sample().
#ifndef BEACON_ENGINE_SAMPLER_H_
#define BEACON_ENGINE_SAMPLER_H_

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace beacon {

struct SamplingParams {
  float temperature = 0.0f;         // 0 = greedy (ties -> lowest id)
  int32_t top_k = 0;                // 0 = off
  float top_p = 1.0f;               // 1 = off
  float min_p = 0.0f;               // 0 = off; keep p >= min_p * p_max
  float repetition_penalty = 1.0f;  // 1 = off; CTRL-style on logits of seen tokens
  float presence_penalty = 0.0f;    // OpenAI-style, over generated tokens
  float frequency_penalty = 0.0f;   // OpenAI-style, over generated tokens
  std::optional<uint64_t> seed;     // absent: seeded from std::random_device
  // OpenAI's logit_bias: (token id, bias in [-100, 100]) added to that
  // token's logit after the penalties; -100 all but bans it, +100 all but
  // forces it. Ids are checked against the vocabulary by
  // GenerationOptions::Validate; an id listed twice takes the sum.
  std::vector<std::pair<int32_t, float>> logit_bias;

  // INVALID_ARGUMENT naming the field when out of range.
  absl::Status Validate() const;
};

// A seed from std::random_device (64 bits), for requests that give none.
uint64_t RandomSeed();

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks the next token. `logits` has vocab_size entries and is not modified.
  // `prompt` and `generated` feed the penalties (repetition over both,
  // presence/frequency over generated only, as OpenAI defines them).
  // `banned` tokens get logit -inf (min_tokens bans the end-of-generation
  // ids): never drawn while some token has a finite logit. `allowed`, when
  // not empty, is a grammar's token bitmask (engine/grammar/grammar_matcher.h:
  // token t allowed when bit t % 32 of word t / 32 is set): every other token
  // gets -inf too, after the bans.
  int32_t Sample(std::span<const float> logits, std::span<const int32_t> prompt, std::span<const int32_t> generated,
                 std::span<const int32_t> banned = {}, std::span<const uint32_t> allowed = {});

  // With `keep` set, each Sample() keeps a copy of the logits it drew from
  // (penalties, logit_bias and bans applied; neither temperature nor
  // truncation), for processed logprobs (engine/logprobs.h).
  void set_keep_processed(bool keep) { keep_processed_ = keep; }
  // The last Sample()'s processed logits; empty unless kept.
  std::span<const float> processed() const { return processed_; }

  // Whether Sample() changes the logits before temperature and truncation
  // (penalties or a logit_bias): a device that samples cannot (it has no
  // history), so such a sequence samples on the host.
  bool modifies_logits() const;

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> scratch_;  // reused across calls
  std::vector<int32_t> idx_;
  // Penalty bookkeeping, reused across calls: seen_[t] is 0 for a token not in
  // prompt or generated, else 1 + its count in generated. Only the entries
  // listed in touched_ are non-zero, and they are reset before Sample returns.
  std::vector<int32_t> seen_;
  std::vector<int32_t> touched_;
  bool keep_processed_ = false;
  std::vector<float> processed_;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_SAMPLER_H_
