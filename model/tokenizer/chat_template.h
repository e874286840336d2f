// The model's chat template, rendered by our Jinja2 engine
// (model/tokenizer/jinja/) the way HF's apply_chat_template renders it:
// variables messages, add_generation_prompt, bos_token, eos_token, tools
// (none unless given) and any extra ones the caller passes.
//
// A model without a template (empty source) gets plain ChatML:
//   <|im_start|>{role}\n{content}<|im_end|>\n per message, then
//   <|im_start|>assistant\n as the generation prompt.
#ifndef BEACON_MODEL_TOKENIZER_CHAT_TEMPLATE_H_
#define BEACON_MODEL_TOKENIZER_CHAT_TEMPLATE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/tokenizer/jinja/template.h"
#include "model/tokenizer/tokenizer.h"

namespace beacon {

class ChatTemplate {
 public:
  // `bos_text` is what the template's bos_token renders as (Llama 3 writes
  // it first). Pass "" when the encoder will prepend BOS itself.
  // INVALID_ARGUMENT "chat template: template line L, column C: ..." when
  // the source does not parse.
  static absl::StatusOr<ChatTemplate> FromSource(std::string_view source, std::string bos_text,
                                                 std::string eos_text = "");

  // Tool calls of assistant turns go to the template as OpenAI's shape, their
  // arguments an object when the template pipes them through tojson (Qwen,
  // Llama) and the string as sent otherwise (R1); a tool turn carries
  // tool_call_id and name. INVALID_ARGUMENT naming the message whose role
  // is not system, user, assistant or tool, or with the template's own message when it refuses the
  // conversation (raise_exception) or fails. `extra_vars` as for RenderJson.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                     const jinja::Json& extra_vars = jinja::Json::object()) const;

  // Any messages (a JSON array of objects: tool calls, tool results) and
  // extra variables (a JSON object, e.g. {"enable_thinking": false} or
  // {"tools": [...]}; they override the defaults). No role check: the
  // template decides.
  absl::StatusOr<std::string> RenderJson(const jinja::Json& messages, bool add_generation_prompt,
                                         const jinja::Json& extra_vars = jinja::Json::object()) const;

 private:
  jinja::Template template_;
  bool object_arguments_ = false;  // tool calls' arguments as objects (Render)
  std::string bos_text_;
  std::string eos_text_;
};

}  // namespace beacon

#endif  // BEACON_MODEL_TOKENIZER_CHAT_TEMPLATE_H_
