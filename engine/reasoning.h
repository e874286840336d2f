// Reasoning output: which generated tokens are the model's reasoning (the
// <think> ... </think> block of DeepSeek-R1 distills, QwQ and Qwen3) and
// which are its answer, so that the APIs can hand them back apart
// (OpenAI `reasoning_content`, gRPC `reasoning_text`).
//
// The split is presentation only: every token, reasoning and markers
// included, is fed back to the model and lives in its KV cache like any
// other, so a KV policy (BeaconKV above all) sees the whole stream.
//
// Markers are single tokens of the vocabulary ("<think>" and "</think>");
// a vocabulary without them has no reasoning parser. The marker tokens
// themselves are never part of either text. A parser decides where the
// stream starts:
//   deepseek_r1  inside the think block, unless the prompt closed it (R1
//                models write their reasoning first and, with older
//                templates, open the block themselves);
//   qwen3        inside only when the prompt leaves a block open (Qwen3's
//                template does with thinking on; with enable_thinking=false
//                it writes an empty, closed block);
// and for both, a <think> generated before any answer text opens the block
// (it is dropped from the text). The first </think> inside the block closes
// it; everything after is answer, markers included as plain text.
//
// Thread ownership: a tracker belongs to its Generation (the engine thread).
#ifndef BEACON_ENGINE_REASONING_H_
#define BEACON_ENGINE_REASONING_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/tokenizer/tokenizer.h"

namespace beacon {

// Which text a token's output belongs to.
enum class TextPart : uint8_t { kAnswer, kReasoning };

enum class ReasoningParser : uint8_t { kNone, kDeepSeekR1, kQwen3 };

// "none", "deepseek_r1", "qwen3" (the --reasoning-parser values, vLLM's names).
std::string_view ReasoningParserName(ReasoningParser parser);

// A model's reasoning syntax, fixed at start-up.
struct ReasoningSyntax {
  ReasoningParser parser = ReasoningParser::kNone;
  int32_t open_id = -1;   // "<think>"
  int32_t close_id = -1;  // "</think>"
  bool enabled() const { return parser != ReasoningParser::kNone; }
};

// Resolves --reasoning-parser for a tokenizer. "auto": none unless the
// vocabulary has both marker tokens and the chat template writes them; then
// qwen3 when the template has Qwen3's enable_thinking switch, deepseek_r1
// otherwise. INVALID_ARGUMENT naming the flag for an unknown name, or for
// deepseek_r1 / qwen3 on a vocabulary without the markers.
absl::StatusOr<ReasoningSyntax> ResolveReasoningParser(std::string_view flag, const Tokenizer& tokenizer);

// One request's reasoning settings.
struct ReasoningOptions {
  ReasoningSyntax syntax;      // parser kNone: no split, every token is answer
  bool starts_inside = false;  // the first generated token is reasoning
  // Close the block by force after this many reasoning tokens: the next
  // token is </think> instead of a sample (the markers count). 0: no limit.
  int32_t max_reasoning_tokens = 0;
};

// The options for generating after a chat prompt whose generation prompt
// (what add_generation_prompt appends to the conversation) is
// `generation_prompt`: its last marker, if any, says whether the block is
// open; without one the parser decides (see above). Only the generation
// prompt is read, so a marker a user typed into a message changes nothing.
ReasoningOptions ReasoningFor(const ReasoningSyntax& syntax, std::string_view generation_prompt,
                              int32_t max_reasoning_tokens);

class ReasoningTracker {
 public:
  explicit ReasoningTracker(const ReasoningOptions& options);

  // What accepting a token did.
  struct Step {
    TextPart part = TextPart::kAnswer;  // the part the token's text belongs to
    bool marker = false;                // a marker: it has no text of its own
    bool closed = false;                // it closed the block: flush the reasoning text now
  };
  Step Observe(int32_t id);

  // True when the block must be closed now: the next token is close_id().
  bool MustClose() const {
    return inside_ && options_.max_reasoning_tokens > 0 && reasoning_tokens_ >= options_.max_reasoning_tokens - 1;
  }
  int32_t close_id() const { return options_.syntax.close_id; }
  bool inside() const { return inside_; }
  // Generated tokens that belonged to the reasoning, markers included.
  int32_t reasoning_tokens() const { return reasoning_tokens_; }

 private:
  ReasoningOptions options_;
  bool inside_ = false;
  bool answered_ = false;  // an answer token has been generated
  int32_t reasoning_tokens_ = 0;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_REASONING_H_
