// Byte-level BPE tokenizer (GPT-2 family: SmolLM2, Llama 3, Qwen2/3), built
// from TokenizerData. Encoding must equal llama.cpp's for the same vocabulary.
//
// Thread safety: const methods may be called concurrently.
#ifndef BEACON_MODEL_TOKENIZER_TOKENIZER_H_
#define BEACON_MODEL_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/tokenizer/jinja/ast.h"
#include "model/tokenizer/tokenizer_data.h"

namespace beacon {

// A call the assistant made in an earlier turn (OpenAI's tool_calls[i]).
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object's text, as the API carries it
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c, std::optional<std::string> reasoning = std::nullopt)
      : role(std::move(r)), content(std::move(c)), reasoning_content(std::move(reasoning)) {}

  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  // An assistant turn's reasoning, as the OpenAI API returns it: templates
  // that know the field (Qwen3's) render it, others ignore it.
  std::optional<std::string> reasoning_content;
  // Tool calling: an assistant turn's calls, and a tool turn's answer to
  // one (its call's id and, optionally, the function's name).
  std::vector<ChatToolCall> tool_calls;
  std::string tool_call_id;
  std::string name;
};

class Tokenizer {
 public:
  // INVALID_ARGUMENT when the data is unusable (unsupported model type or
  // pre-tokenizer, a merge naming an unknown token, ids out of range) or its
  // chat template does not parse ("chat template: template line L, column
  // C: ..."): a broken template is a start-up error, not a per-request one.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerData data);

  virtual ~Tokenizer() = default;

  // Encodes text. With `parse_special`, control token texts in `text` (e.g.
  // "<|im_start|>") become their ids; otherwise they are plain text.
  // User-defined (added) tokens are matched in both modes, as llama.cpp and
  // HF tokenizers do. `add_bos` prepends BOS when the vocabulary asks for it
  // (TokenizerData::add_bos).
  virtual std::vector<int32_t> Encode(std::string_view text, bool parse_special, bool add_bos) const = 0;

  // The raw bytes one token stands for (byte-level decoding undone). Control
  // tokens decode to their text only when `render_special`; else to "".
  // REQUIRES 0 <= id < vocab_size().
  virtual std::string TokenBytes(int32_t id, bool render_special = false) const = 0;

  // Decodes a whole sequence (may contain broken UTF-8 at the end if the
  // sequence ends mid-character; use IncrementalDetokenizer for streaming).
  virtual std::string Decode(const std::vector<int32_t>& ids, bool render_special = false) const = 0;

  // Renders chat messages with the model's chat template (any Jinja2
  // template, by model/tokenizer/jinja/, as HF's apply_chat_template does);
  // plain ChatML when the model has no template. `add_generation_prompt`
  // appends the assistant header; `extra_vars` (a JSON object, may be null)
  // are further template variables (chat_template_kwargs: enable_thinking).
  // INVALID_ARGUMENT when the template refuses the messages (its own
  // message) or fails.
  virtual absl::StatusOr<std::string> ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                                        bool add_generation_prompt,
                                                        const jinja::Json& extra_vars) const = 0;
  absl::StatusOr<std::string> ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                                                bool add_generation_prompt) const {
    return ApplyChatTemplate(messages, add_generation_prompt, jinja::Json());
  }
  // The model's template source ("" when it has none and plain ChatML is used).
  virtual std::string_view chat_template_source() const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  // EOS and every other end-of-generation token (e.g. <|im_end|>).
  virtual bool IsEndOfGeneration(int32_t id) const = 0;
  virtual bool IsSpecial(int32_t id) const = 0;
  // The id of a token with exactly this text, or -1.
  virtual int32_t TokenId(std::string_view token_text) const = 0;
};

// Turns a stream of token ids into text deltas that are always complete UTF-8:
// bytes of a character split across tokens are held back until the character
// is complete. Invalid sequences become U+FFFD rather than being emitted raw.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer, bool render_special = false);

  // Appends one token; returns the text that became complete (maybe "").
  std::string Push(int32_t id);
  // Returns what is still held back (an incomplete tail becomes U+FFFD).
  std::string Flush();

 private:
  const Tokenizer* tokenizer_;
  bool render_special_;
  std::string pending_;  // bytes of an incomplete UTF-8 character
};

}  // namespace beacon

#endif  // BEACON_MODEL_TOKENIZER_TOKENIZER_H_
