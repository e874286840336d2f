// One choice of an OpenAI-API completion as it builds up (server/openai/
// openai_completion.h): its text by part (answer, reasoning), logprobs, the
// prompt's logprobs, the tool calls parsed from the answer; turned into the
// whole response's choice or into stream chunks' choices. Plus the pieces of
// a body every choice shares: finish_reason and usage.
#ifndef BEACON_SERVER_OPENAI_COMPLETION_OUTPUT_H_
#define BEACON_SERVER_OPENAI_COMPLETION_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/serving/request_sink.h"
#include "engine/tools/tool_parser.h"
#include "model/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/openai/completion_sink.h"
#include "server/openai/openai_logprobs.h"

namespace beacon {

// What every choice of one request shares: the request's shape.
struct CompletionContext {
  std::string id;
  std::string model;
  int64_t created = 0;
  bool chat = false;
  bool reasoning = false;      // chat on a reasoning model: reasoning_content is split out
  bool logprobs = false;       // the request asked for logprobs
  bool tokens_as_ids = false;  // vLLM's return_tokens_as_token_ids
  bool echo = false;           // completions: the prompt's text first
  std::string echo_text;
  bool prompt_logprobs_field = false;  // vLLM's prompt_logprobs field
  bool include_usage = false;
  bool continuous_usage = false;
  int32_t prompt_tokens = 0;
  // Tools offered: the answer is parsed for calls (PreparedRequest::tool_format).
  std::optional<ToolCallFormat> tool_format;
  std::vector<std::string> tool_names;
};

// OpenAI's finish_reason: vLLM's word for it (engine/finish_reason.h,
// VllmFinishReason: a time limit is `length`, a cancellation `abort`), null
// while running. kError never gets here: it is answered with an error.
nlohmann::json OpenAiFinish(FinishReason f);

// OpenAI's finish_reason "tool_calls" for an answer that ended by itself
// with calls in it; a cut one (length) says so.
nlohmann::json FinishWithCalls(FinishReason f, bool calls);

// `reasoning`: the server splits reasoning, so usage says how much was
// (OpenAI's completion_tokens_details.reasoning_tokens). `cached_tokens`
// (>= 0, with the final record, when StreamFinal::cached_tokens_reported):
// prompt tokens whose KV was reused (the prefix cache), OpenAI's
// prompt_tokens_details.cached_tokens; -1 leaves prompt_tokens_details out.
nlohmann::json Usage(int32_t prompt_tokens, int32_t completion_tokens, bool reasoning, int32_t reasoning_tokens,
                     int32_t cached_tokens = -1);

// One choice (sample `index`). Not thread-safe: the handler thread owns it.
class CompletionOutput {
 public:
  // `c` and `tokenizer` must outlive the output.
  CompletionOutput(const CompletionContext& c, const Tokenizer* tokenizer, int32_t index);

  // Streaming with tools: an answer piece through the call parser (its
  // text, less what may begin a call; whole calls once ended); `final`
  // flushes it. Without tools the piece as it is.
  ParsedAnswer Answer(const std::string& text, bool final);
  // A stream chunk's choice with calls (their index continues the choice's list).
  nlohmann::json CallsChoice(const std::vector<ParsedToolCall>& calls);
  bool sent_calls() const { return calls_sent_ > 0; }

  void Prompt(const CompletionEvent& e);

  // id, object, created, model: of a chunk or of the whole response.
  nlohmann::json Envelope(bool chunk) const;

  // The logprobs of `positions` in the endpoint's shape (null without).
  nlohmann::json Logprobs(std::span<const PositionLogprobs> positions);
  nlohmann::json PromptLogprobs() const;

  // A stream chunk's choice for `text` of `part` (finish null while running).
  nlohmann::json ChunkChoice(const std::string& text, TextPart part, std::span<const PositionLogprobs> lp,
                             const nlohmann::json& finish);

  // The whole response's choice, from what was accumulated.
  nlohmann::json WholeChoice(const nlohmann::json& finish);

  // The first stream chunk of this choice: the assistant's role (chat), the
  // echoed prompt (completions), vLLM's prompt_logprobs; null when none is due.
  nlohmann::json HeadChoice();
  bool head_sent() const { return head_sent_; }

  // The whole response's accumulation.
  std::string text, reasoning;
  std::vector<PositionLogprobs> lp;
  std::optional<StreamFinal> final;

 private:
  const CompletionContext& c_;
  const Tokenizer* tokenizer_;
  int32_t index_;
  bool head_sent_ = false;
  CompletionLogprobs completion_lp_;
  std::vector<int32_t> prompt_ids_;
  std::vector<PositionLogprobs> prompt_lp_;
  std::optional<ToolCallStream> calls_;  // tools offered: the streamed answer's call parser
  int calls_sent_ = 0;
};

}  // namespace beacon

#endif  // BEACON_SERVER_OPENAI_COMPLETION_OUTPUT_H_
