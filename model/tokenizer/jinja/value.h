// Runtime values of the Jinja2 renderer: JSON data (what templates are
// given), plus the three things that are not data: undefined, a
// namespace() object (mutable, shared by reference) and a callable (a macro
// or a global function). Python's semantics are reproduced where templates
// see them: truthiness, str() and repr(), ==, <, json.dumps.
#ifndef BEACON_MODEL_TOKENIZER_JINJA_VALUE_H_
#define BEACON_MODEL_TOKENIZER_JINJA_VALUE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/tokenizer/jinja/ast.h"

namespace beacon::jinja {

class Value;

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kJson, kNamespace, kCallable };

  Value() = default;  // undefined
  // Copies of a value share its data (templates only read it): looking up
  // `messages` in a loop costs nothing however long the conversation is.
  Value(Json json) : kind_(Kind::kJson), json_(std::make_shared<const Json>(std::move(json))) {}  // NOLINT: implicit
  static Value Undefined(std::string name) {
    Value v;
    v.name_ = std::move(name);
    return v;
  }
  static Value Namespace(Json attrs) {
    Value v;
    v.kind_ = Kind::kNamespace;
    v.ns_ = std::make_shared<Json>(std::move(attrs));
    return v;
  }
  static Value Callable(std::string name, Function fn) {
    Value v;
    v.kind_ = Kind::kCallable;
    v.name_ = std::move(name);
    v.fn_ = std::make_shared<const Function>(std::move(fn));
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_json() const { return kind_ == Kind::kJson; }
  // kJson: the data; null for the other kinds.
  const Json& json() const { return json_ ? *json_ : NullJson(); }
  // kNamespace: the attributes, shared by every copy of the value.
  Json& ns() const { return *ns_; }
  const Function& fn() const { return *fn_; }
  // kUndefined: the name that was looked up; kCallable: its name.
  const std::string& name() const { return name_; }

  // The value as data for a JSON container: undefined becomes null, a
  // namespace its attributes, a callable null.
  Json ToJson() const;

 private:
  Kind kind_ = Kind::kUndefined;
  static const Json& NullJson();

  std::shared_ptr<const Json> json_;
  std::shared_ptr<Json> ns_;
  std::shared_ptr<const Function> fn_;
  std::string name_;
};

// Raised inside the renderer for a template error (a type error, an
// undefined value used, raise_exception); Template::Render turns it into
// INVALID_ARGUMENT and it never leaves the library.
struct RenderError {
  std::string message;
  bool located = false;  // the message already names the template position
  bool raised = false;   // from raise_exception(): the template's own words
};
[[noreturn]] void Fail(std::string message);

bool Truthy(const Value& v);
std::string TypeName(const Value& v);
// Python str(): strings as they are, the rest as repr; undefined is "".
std::string ToString(const Value& v);
std::string PyRepr(const Json& j);
std::string PyFloatRepr(double d);
// Python json.dumps with indent (< 0: none), separators and sort_keys;
// ensure_ascii=False (HF's tojson).
std::string JsonDumps(const Json& j, int indent, std::string_view item_sep, std::string_view key_sep, bool sort_keys);

bool Equal(const Value& a, const Value& b);
// Python a < b for numbers, strings and lists; a RenderError otherwise.
bool Less(const Value& a, const Value& b);

// UTF-8 strings as Python sees them: sequences of code points.
std::vector<std::string> CodePoints(std::string_view s);

}  // namespace beacon::jinja

#endif  // BEACON_MODEL_TOKENIZER_JINJA_VALUE_H_
