// Next-token sampling from logits: greedy, temperature, top-k, top-p, min-p,
// repetition / presence / frequency penalties, with a per-request seed.
//
// Same params (with a seed), same logits, same history -> same token, always:
// the RNG is owned by the Sampler and advanced once per Sample().
#ifndef BEACON_ENGINE_SAMPLER_H_
#define BEACON_ENGINE_SAMPLER_H_

#include <cstdint>
#include <optional>
#include <random>
#include <span>
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

  // INVALID_ARGUMENT naming the field when out of range.
  absl::Status Validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks the next token. `logits` has vocab_size entries and is not modified.
  // `prompt` and `generated` feed the penalties (repetition over both,
  // presence/frequency over generated only, as OpenAI defines them).
  int32_t Sample(std::span<const float> logits, std::span<const int32_t> prompt, std::span<const int32_t> generated);

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
};

}  // namespace beacon

#endif  // BEACON_ENGINE_SAMPLER_H_
