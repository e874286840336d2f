// Log probabilities in the OpenAI API's JSON shapes (engine/logprobs.h has
// what they hold):
//  - chat: choices[].logprobs = {"content": [{"token", "logprob", "bytes",
//    "top_logprobs": [{"token", "logprob", "bytes"}]}]};
//  - completions: choices[].logprobs = {"tokens", "token_logprobs",
//    "top_logprobs" (a {token: logprob} object per token: the n most likely
//    and the token itself), "text_offset"},
//    with echo the prompt's tokens first (the first with null logprobs);
//  - vLLM's prompt_logprobs: [null, {"<id>": {"logprob", "rank",
//    "decoded_token"}}, ...], one entry per prompt token.
// A token's "token" is its text as valid UTF-8 (a piece of a multi-byte
// character becomes U+FFFD; "bytes" has the raw bytes). JSON has no
// infinity: a token the distribution excludes reports -9999.0, as vLLM does.
// With vLLM's return_tokens_as_token_ids (`as_ids`), "token" is
// "token_id:<id>" (and "bytes" that string's), so a client can map each
// entry back to its id whatever the text.
#ifndef BEACON_SERVER_OPENAI_OPENAI_LOGPROBS_H_
#define BEACON_SERVER_OPENAI_OPENAI_LOGPROBS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/logprobs.h"
#include "model/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace beacon {

// The logprob as JSON can carry it (-inf: -9999).
double JsonLogprob(float logprob);

// Chat: the "content" list's entries for these positions.
nlohmann::json ChatLogprobs(std::span<const PositionLogprobs> positions, const Tokenizer& tokenizer, bool as_ids);

// Completions: builds the logprobs object token by token, keeping the
// running text offset (characters of the token texts before each token).
class CompletionLogprobs {
 public:
  CompletionLogprobs(const Tokenizer* tokenizer, bool as_ids) : tokenizer_(tokenizer), as_ids_(as_ids) {}
  // With echo: the prompt's tokens, the first without logprobs.
  void AddPrompt(std::span<const int32_t> prompt, std::span<const PositionLogprobs> logprobs);
  void Add(std::span<const PositionLogprobs> positions);
  // The object for what was added since the last Take() (streaming), or all.
  nlohmann::json Take();
  bool empty() const { return tokens_.empty(); }

 private:
  void Push(int32_t id, const PositionLogprobs* lp);
  const Tokenizer* tokenizer_;
  bool as_ids_;
  int64_t offset_ = 0;
  nlohmann::json tokens_ = nlohmann::json::array();
  nlohmann::json token_logprobs_ = nlohmann::json::array();
  nlohmann::json top_ = nlohmann::json::array();
  nlohmann::json offsets_ = nlohmann::json::array();
};

// vLLM's prompt_logprobs list (null for the first token).
nlohmann::json PromptLogprobsJson(std::span<const int32_t> prompt, std::span<const PositionLogprobs> logprobs,
                                  const Tokenizer& tokenizer);

}  // namespace beacon

#endif  // BEACON_SERVER_OPENAI_OPENAI_LOGPROBS_H_
