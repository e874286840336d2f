// Log probabilities of tokens, as the OpenAI APIs report them: for one
// position, the log probability of the token there (the one sampled, or the
// prompt's own), its rank among the whole vocabulary, and the most likely
// alternatives.
//
// Which distribution (LogprobsMode):
//  - kRaw: log-softmax of the model's logits, before anything the request's
//    sampling does to them. vLLM's default (`--logprobs-mode raw_logprobs`),
//    and what scoring and evaluation harnesses expect: it does not depend
//    on temperature or penalties.
//  - kProcessed: log-softmax of the logits the sampler draws from, after
//    logit_bias, the min_tokens ban and the penalties, divided by the
//    temperature (greedy: not divided), before top-k / top-p / min-p
//    truncation (which would set most alternatives to -inf). The importance
//    ratio an RL pipeline computes needs this one.
// Prompt positions are always raw: no sampler acts on them.
#ifndef BEACON_ENGINE_LOGPROBS_H_
#define BEACON_ENGINE_LOGPROBS_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace beacon {

enum class LogprobsMode { kRaw, kProcessed };

// "raw" / "processed" (the --logprobs-mode values).
absl::StatusOr<LogprobsMode> ParseLogprobsMode(std::string_view name);
std::string_view LogprobsModeName(LogprobsMode mode);

// The most alternatives a request may ask for per position (OpenAI's
// top_logprobs limit, vLLM's default --max-logprobs).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0.0f;  // natural log; -inf for a token the distribution excludes
};

struct PositionLogprobs {
  int32_t id = -1;       // the token at this position
  float logprob = 0.0f;  // its log probability
  int32_t rank = 0;      // 1 + the number of tokens strictly more likely
  // The `top_n` most likely tokens, most likely first, ties to the lower id.
  std::vector<TokenLogprob> top;
};

// Log probabilities at one position from `logits` (vocab_size entries, not
// modified) scaled by `inv_temperature` (1 for raw logits), for token `id`
// and the `top_n` most likely tokens (0 <= top_n <= kMaxTopLogprobs; fewer
// when the vocabulary is smaller). Computed in double with the maximum
// subtracted, so huge or tiny logits neither overflow nor lose the mass of
// the rest; a NaN logit counts as -inf, as the sampler treats it.
// REQUIRES 0 <= id < logits.size().
PositionLogprobs LogprobsAt(std::span<const float> logits, float inv_temperature, int32_t id, int32_t top_n);

}  // namespace beacon

#endif  // BEACON_ENGINE_LOGPROBS_H_
