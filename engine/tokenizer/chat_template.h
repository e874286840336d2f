// Chat templates without a Jinja engine: the template family is recognised
// from the model's Jinja source and rendered by hand, with the few literals
// that vary between models of a family (a default system prompt, a date)
// read out of the source.
//
//   ChatML  (source contains "<|im_start|>"; also used for an empty source):
//     [<|im_start|>system\n{default}<|im_end|>\n]   when the source has a
//                                                    literal default system
//                                                    prompt and the first
//                                                    message is not "system"
//     <|im_start|>{role}\n{content}<|im_end|>\n     per message
//     <|im_start|>assistant\n                        generation prompt
//   Llama 3 (source contains "<|start_header_id|>"):
//     {bos}<|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|> ...
//     <|start_header_id|>assistant<|end_header_id|>\n\n   generation prompt
//     Llama 3.1+ sources (with "Cutting Knowledge Date:") always open with
//     their system block: knowledge and today's date lines, then the system
//     message, as the template writes it without tools.
//
// Anything else is UNIMPLEMENTED at construction. Rendering validates roles
// (system, user, assistant).
#ifndef BEACON_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
#define BEACON_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace beacon {

class ChatTemplate {
 public:
  enum class Family { kChatMl, kLlama3 };

  // `bos_text` is what the template's bos_token renders as (Llama 3 writes
  // it first). Pass "" when the encoder will prepend BOS itself.
  static absl::StatusOr<ChatTemplate> FromSource(std::string_view source, std::string bos_text);

  // INVALID_ARGUMENT naming the message whose role is not system, user or
  // assistant.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  Family family() const { return family_; }
  // ChatML: the system prompt used when the first message is not "system".
  const std::optional<std::string>& default_system_prompt() const { return default_system_; }

 private:
  std::string RenderChatMl(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  std::string RenderLlama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  Family family_ = Family::kChatMl;
  std::string bos_text_;
  std::optional<std::string> default_system_;
  // Llama 3.1+: "Cutting Knowledge Date" and "Today Date" values; unset for 3.0.
  std::optional<std::string> knowledge_date_;
  std::string today_date_;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
