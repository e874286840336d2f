// jinja2's filters and tests, Python's string/dict methods that templates
// call, and attribute/item lookup (jinja2's getattr-then-getitem). Each
// raises RenderError (value.h) on a wrong type or an unknown name.
#ifndef BEACON_MODEL_TOKENIZER_JINJA_BUILTINS_H_
#define BEACON_MODEL_TOKENIZER_JINJA_BUILTINS_H_

#include <optional>
#include <set>
#include <string>

#include "model/tokenizer/jinja/value.h"

namespace beacon::jinja {

// obj.name: a dict's key (methods are resolved by CallMethod), a
// namespace's attribute; undefined when absent. Undefined obj is an error
// (jinja2's UndefinedError).
Value GetAttr(const Value& obj, const std::string& name);
// obj[key]: list index (negative from the end), dict key, string code point.
Value GetItem(const Value& obj, const Value& key);
// obj[start:stop:step] on lists and strings (null parts are Python's None).
Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// The items a for loop visits: list elements, dict keys, string code points;
// nothing for undefined.
Json Iterate(const Value& v);

// The names ApplyFilter and ApplyTest know; the parser refuses others, as
// jinja2 does when it compiles a template.
const std::set<std::string>& FilterNames();
const std::set<std::string>& TestNames();

Value ApplyFilter(const std::string& name, const Value& operand, CallArgs& args);
bool ApplyTest(const std::string& name, const Value& operand, CallArgs& args);
// obj.name(args) for Python's str and dict methods; nullopt if obj has none
// of that name (the caller then looks the attribute up and calls it).
std::optional<Value> CallMethod(const Value& obj, const std::string& name, CallArgs& args);

// Argument `index` of a call, or keyword `name`, or `fallback` (undefined:
// absent).
Value Arg(const CallArgs& args, size_t index, const std::string& name, const Value& fallback = Value());

}  // namespace beacon::jinja

#endif  // BEACON_MODEL_TOKENIZER_JINJA_BUILTINS_H_
