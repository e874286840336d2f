#include "model/tokenizer/chat_template.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

// What a model without a template gets.
constexpr char kPlainChatMl[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

bool IsBlank(std::string_view s) { return s.find_first_not_of(" \t\n\r\f\v") == std::string_view::npos; }

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string_view source, std::string bos_text,
                                                      std::string eos_text) {
  absl::StatusOr<jinja::Template> t = jinja::Template::Parse(IsBlank(source) ? kPlainChatMl : source);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat("chat template: ", t.status().message()));
  ChatTemplate out;
  out.template_ = *std::move(t);
  out.bos_text_ = std::move(bos_text);
  out.eos_text_ = std::move(eos_text);
  return out;
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                                 const jinja::Json& extra_vars) const {
  jinja::Json array = jinja::Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "].role: '", role, "' is not one of system, user, assistant"));
    }
    jinja::Json m = {{"role", role}, {"content", messages[i].content}};
    if (messages[i].reasoning_content.has_value()) m["reasoning_content"] = *messages[i].reasoning_content;
    array.push_back(std::move(m));
  }
  return RenderJson(array, add_generation_prompt, extra_vars);
}

absl::StatusOr<std::string> ChatTemplate::RenderJson(const jinja::Json& messages, bool add_generation_prompt,
                                                     const jinja::Json& extra_vars) const {
  // HF's variables: tools (and documents) are passed as None when absent.
  jinja::Json vars = {{"messages", messages},   {"tools", nullptr},
                      {"documents", nullptr},   {"bos_token", bos_text_},
                      {"eos_token", eos_text_}, {"add_generation_prompt", add_generation_prompt}};
  if (extra_vars.is_object()) {
    for (auto it = extra_vars.begin(); it != extra_vars.end(); ++it) vars[it.key()] = it.value();
  }
  return template_.Render(vars);
}

}  // namespace beacon
