// A Jinja2 template, parsed once and rendered many times, the way HF's
// apply_chat_template renders chat templates: jinja2's
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
// loopcontrols extension, HF's tojson (json.dumps, ensure_ascii=False, keys
// in insertion order) and HF's globals raise_exception(msg) and
// strftime_now(fmt); plus jinja2's namespace(), range() and dict().
//
// Errors are Status values, never exceptions: a syntax error is
// INVALID_ARGUMENT "template line L, column C: ..."; a render error is
// INVALID_ARGUMENT, with raise_exception's message as the template wrote it,
// and any other error naming the template position. Thread-safe: Render is
// const and may run concurrently.
#ifndef BEACON_MODEL_TOKENIZER_JINJA_TEMPLATE_H_
#define BEACON_MODEL_TOKENIZER_JINJA_TEMPLATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/tokenizer/jinja/ast.h"
#include "model/tokenizer/jinja/renderer.h"

namespace beacon::jinja {

class Template {
 public:
  static absl::StatusOr<Template> Parse(std::string_view source);

  // `vars`: a JSON object, its keys the template's variables (messages,
  // add_generation_prompt, bos_token, ...). INVALID_ARGUMENT if not an object.
  // `now`: the instant strftime_now formats, Unix seconds shown in UTC (for
  // reproducible renderings: the fixtures pass the one their oracle used);
  // unset, it is the current time in the local zone, as HF's datetime.now().
  absl::StatusOr<std::string> Render(const Json& vars, const RenderLimits& limits = {},
                                     std::optional<int64_t> now = std::nullopt) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace beacon::jinja

#endif  // BEACON_MODEL_TOKENIZER_JINJA_TEMPLATE_H_
