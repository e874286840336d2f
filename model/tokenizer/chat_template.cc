#include "model/tokenizer/chat_template.h"

#include <regex>
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
  // A template that pipes a call's arguments through tojson (Qwen's,
  // Llama's) wants them as an object; others concatenate the string (R1's).
  static const std::regex kObjectArguments(R"(arguments(['"]\])?\s*\|\s*tojson)");
  out.object_arguments_ = std::regex_search(source.begin(), source.end(), kObjectArguments);
  out.bos_text_ = std::move(bos_text);
  out.eos_text_ = std::move(eos_text);
  return out;
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                                 const jinja::Json& extra_vars) const {
  jinja::Json array = jinja::Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "].role: '", role, "' is not one of system, user, assistant, tool"));
    }
    const ChatMessage& msg = messages[i];
    jinja::Json m = {{"role", role}, {"content", msg.content}};
    if (msg.reasoning_content.has_value()) m["reasoning_content"] = *msg.reasoning_content;
    if (!msg.tool_calls.empty()) {
      // As HF passes them: content none when the turn is only calls.
      if (msg.content.empty()) m["content"] = nullptr;
      jinja::Json calls = jinja::Json::array();
      for (const ChatToolCall& c : msg.tool_calls) {
        jinja::Json args = c.arguments;
        if (object_arguments_) {
          args = jinja::Json::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
          if (args.is_discarded()) args = c.arguments;  // the template shows what was sent
        }
        calls.push_back(
            {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", std::move(args)}}}});
      }
      m["tool_calls"] = std::move(calls);
    }
    if (!msg.tool_call_id.empty()) m["tool_call_id"] = msg.tool_call_id;
    if (!msg.name.empty()) m["name"] = msg.name;
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
