// jinja2's filters and tests (those chat templates use), with HF's tojson.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/tokenizer/jinja/builtins.h"
#include "model/tokenizer/jinja/strings.h"

namespace beacon::jinja {
namespace {

const std::string& Str(const Value& v, const std::string& filter) {
  if (!v.is_json() || !v.json().is_string()) Fail(absl::StrCat(filter, ": expected a string, got ", TypeName(v)));
  return v.json().get_ref<const std::string&>();
}

bool Given(const Value& v) { return v.is_json() && !v.json().is_null(); }

// Attribute paths as filters take them ("a.b", or an integer index).
Value Lookup(const Value& item, const Value& attr) {
  if (attr.is_json() && attr.json().is_number_integer()) return GetItem(item, attr);
  const std::string path = Str(attr, "attribute");
  Value v = item;
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    v = v.is_undefined() ? v : GetItem(v, Value(part));
    if (dot == std::string::npos) return v;
    pos = dot + 1;
  }
}

// CallArgs from the filter's own arguments starting at `from`.
CallArgs Tail(const CallArgs& args, size_t from) {
  CallArgs out;
  for (size_t i = from; i < args.positional.size(); ++i) out.positional.push_back(args.positional[i]);
  return out;
}

Value Select(const std::string& name, const Value& operand, CallArgs& args) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep = name == "select" || name == "selectattr";
  const size_t test_at = by_attr ? 1 : 0;
  Json out = Json::array();
  for (const Json& item : Iterate(operand)) {
    const Value subject = by_attr ? Lookup(Value(item), args.positional.at(0)) : Value(item);
    bool pass;
    if (args.positional.size() > test_at) {
      CallArgs test_args = Tail(args, test_at + 1);
      pass = ApplyTest(Str(args.positional[test_at], name), subject, test_args);
    } else {
      pass = Truthy(subject);
    }
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

double Number(const Value& v, const std::string& what) {
  if (!v.is_json() || !(v.json().is_number() || v.json().is_boolean())) {
    Fail(absl::StrCat(what, ": expected a number, got ", TypeName(v)));
  }
  return v.json().is_boolean() ? v.json().get<bool>() : v.json().get<double>();
}

// A numeric argument as an integer clamped to [lo, hi] (hostile sizes).
int64_t Clamped(const Value& v, const std::string& what, int64_t lo, int64_t hi) {
  const double d = Number(v, what);
  if (std::isnan(d)) return lo;
  return static_cast<int64_t>(std::clamp(d, static_cast<double>(lo), static_cast<double>(hi)));
}

}  // namespace

const std::set<std::string>& FilterNames() {
  static const auto* const kNames = new std::set<std::string>{
      "abs",     "capitalize", "count",       "d",      "default", "dictsort",   "e",      "escape",
      "first",   "float",      "forceescape", "indent", "int",     "items",      "join",   "last",
      "length",  "list",       "lower",       "map",    "max",     "min",        "reject", "rejectattr",
      "replace", "reverse",    "round",       "safe",   "select",  "selectattr", "sort",   "split",
      "string",  "sum",        "title",       "tojson", "trim",    "unique",     "upper",  "wordcount"};
  return *kNames;
}

const std::set<std::string>& TestNames() {
  static const auto* const kNames = new std::set<std::string>{
      "!=",          "<",       "<=",       "==",     ">",        ">=",     "boolean", "callable",    "defined",
      "divisibleby", "eq",      "equalto",  "even",   "false",    "float",  "ge",      "greaterthan", "gt",
      "in",          "integer", "iterable", "le",     "lessthan", "lower",  "lt",      "mapping",     "ne",
      "none",        "number",  "odd",      "sameas", "sequence", "string", "true",    "undefined",   "upper"};
  return *kNames;
}

Value ApplyFilter(const std::string& name, const Value& v, CallArgs& args) {
  if (name == "default" || name == "d") {
    const bool boolean = Truthy(Arg(args, 1, "boolean"));
    if (v.is_undefined() || (boolean && !Truthy(v))) {
      const Value& dflt = Arg(args, 0, "default_value");
      return dflt.is_undefined() ? Value(Json("")) : dflt;
    }
    return v;
  }
  if (name == "length" || name == "count") {
    if (v.is_undefined()) return Value(0);
    if (v.is_json() && v.json().is_string()) return Value(static_cast<int64_t>(CodePoints(Str(v, name)).size()));
    if (v.is_json() && (v.json().is_array() || v.json().is_object())) return Value(v.json().size());
    Fail(absl::StrCat("object of type '", TypeName(v), "' has no len()"));
  }
  if (name == "string") return Value(ToString(v));
  if (name == "safe" || name == "e" || name == "escape" || name == "forceescape") {
    if (name == "safe") return v;
    std::string out;
    for (char c : ToString(v)) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out.push_back(c);
      }
    }
    return Value(out);
  }
  if (name == "tojson") {
    if (!v.is_json() && v.kind() != Value::Kind::kNamespace)
      Fail(absl::StrCat("tojson: cannot serialise ", TypeName(v)));
    const Value& indent = Arg(args, 1000, "indent");
    const int ind = Given(indent) ? static_cast<int>(Clamped(indent, "indent", 0, 1000)) : -1;
    std::string item_sep = ind < 0 ? ", " : ",";
    std::string key_sep = ": ";
    const Value& seps = Arg(args, 1000, "separators");
    if (Given(seps) && seps.json().is_array() && seps.json().size() == 2) {
      item_sep = seps.json()[0].get<std::string>();
      key_sep = seps.json()[1].get<std::string>();
    }
    return Value(JsonDumps(v.ToJson(), ind, item_sep, key_sep, Truthy(Arg(args, 1000, "sort_keys"))));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value(Json::array());
    if (!v.is_json() || !v.json().is_object()) Fail(absl::StrCat("items: expected a mapping, got ", TypeName(v)));
    CallArgs none;
    return *CallMethod(v, "items", none);
  }
  if (name == "list") return Value(Iterate(v));
  if (name == "first" || name == "last") {
    const Json items = Iterate(v);
    if (items.empty()) return Value::Undefined("");
    return Value(name == "first" ? items.front() : items.back());
  }
  if (name == "reverse") {
    if (v.is_json() && v.json().is_string()) {
      auto cps = CodePoints(Str(v, name));
      std::reverse(cps.begin(), cps.end());
      return Value(absl::StrJoin(cps, ""));
    }
    Json items = Iterate(v);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "join") {
    const Value& attr = Arg(args, 1, "attribute");
    std::vector<std::string> parts;
    for (const Json& item : Iterate(v))
      parts.push_back(ToString(Given(attr) ? Lookup(Value(item), attr) : Value(item)));
    const Value& sep = Arg(args, 0, "d");
    return Value(absl::StrJoin(parts, sep.is_undefined() ? std::string() : ToString(sep)));
  }
  if (name == "map") {
    Json out = Json::array();
    if (!Truthy(v)) return Value(std::move(out));  // jinja2: `if seq:`, so none maps to nothing
    const Value& attr = Arg(args, 1000, "attribute");
    for (const Json& item : Iterate(v)) {
      if (Given(attr)) {
        Value got = Lookup(Value(item), attr);
        if (got.is_undefined()) got = Arg(args, 1000, "default");
        out.push_back(got.ToJson());
      } else {
        CallArgs rest = Tail(args, 1);
        out.push_back(ApplyFilter(Str(Arg(args, 0, "filter"), "map"), Value(item), rest).ToJson());
      }
    }
    return Value(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    if (!Truthy(v)) return Value(Json::array());  // jinja2: `if seq:`, so none selects nothing
    return Select(name, v, args);
  }
  if (name == "unique") {
    Json out = Json::array();
    for (const Json& item : Iterate(v)) {
      if (std::none_of(out.begin(), out.end(), [&](const Json& o) { return Equal(Value(o), Value(item)); })) {
        out.push_back(item);
      }
    }
    return Value(std::move(out));
  }
  if (name == "sort") {
    Json items = Iterate(v);
    const Value& attr = Arg(args, 2, "attribute");
    const bool reverse = Truthy(Arg(args, 0, "reverse"));
    std::stable_sort(items.begin(), items.end(), [&](const Json& a, const Json& b) {
      const Value x = Given(attr) ? Lookup(Value(a), attr) : Value(a);
      const Value y = Given(attr) ? Lookup(Value(b), attr) : Value(b);
      return reverse ? Less(y, x) : Less(x, y);
    });
    return Value(std::move(items));
  }
  if (name == "dictsort") {
    // dictsort(case_sensitive=False, by='key', reverse=False): [key, value]
    // pairs; strings compare case-folded unless case_sensitive.
    if (!v.is_json() || !v.json().is_object()) Fail(absl::StrCat("dictsort: expected a mapping, got ", TypeName(v)));
    const bool case_sensitive = Truthy(Arg(args, 0, "case_sensitive"));
    const Value& by = Arg(args, 1, "by");
    const bool by_value = Given(by) && Str(by, name) == "value";
    if (Given(by) && !by_value && Str(by, name) != "key")
      Fail("dictsort: You can only sort by either 'key' or 'value'");
    const bool reverse = Truthy(Arg(args, 2, "reverse"));
    Json items = Json::array();
    for (auto it = v.json().begin(); it != v.json().end(); ++it) items.push_back(Json::array({it.key(), it.value()}));
    auto folded = [&](const Json& pair) {
      const Json& x = pair[by_value ? 1 : 0];
      return Value(!case_sensitive && x.is_string() ? Json(AsciiLower(x.get<std::string>())) : x);
    };
    std::stable_sort(items.begin(), items.end(), [&](const Json& a, const Json& b) {
      return reverse ? Less(folded(b), folded(a)) : Less(folded(a), folded(b));
    });
    return Value(std::move(items));
  }
  if (name == "trim") {
    const Value& chars = Arg(args, 0, "chars");
    return Value(StripChars(ToString(v), Given(chars) ? Str(chars, name) : std::string(kWhitespace), true, true));
  }
  if (name == "upper") return Value(AsciiUpper(ToString(v)));
  if (name == "lower") return Value(AsciiLower(ToString(v)));
  if (name == "title") return Value(Title(ToString(v)));
  if (name == "capitalize") return Value(Capitalize(ToString(v)));
  if (name == "replace") {
    const Value& count = Arg(args, 2, "count");
    return Value(Replace(ToString(v), ToString(Arg(args, 0, "old")), ToString(Arg(args, 1, "new")),
                         Given(count) ? Clamped(count, name, -1, INT64_MAX / 2) : -1));
  }
  if (name == "split") {
    const Value& sep = Arg(args, 0, "sep");
    return Value(Given(sep) ? Split(ToString(v), Str(sep, name), -1) : SplitWhitespace(ToString(v), -1));
  }
  if (name == "int") {
    if (v.is_json() && v.json().is_string()) {
      try {
        return Value(static_cast<int64_t>(std::stoll(v.json().get<std::string>())));
      } catch (const std::exception&) {
        return Arg(args, 0, "default", Value(0));
      }
    }
    if (!v.is_json() || !(v.json().is_number() || v.json().is_boolean())) return Arg(args, 0, "default", Value(0));
    const double d = Number(v, name);
    if (!(std::fabs(d) < 9.2e18)) return Arg(args, 0, "default", Value(0));  // NaN, inf, past int64
    return Value(static_cast<int64_t>(d));
  }
  if (name == "float") {
    if (v.is_json() && v.json().is_string()) {
      try {
        return Value(std::stod(v.json().get<std::string>()));
      } catch (const std::exception&) {
        return Arg(args, 0, "default", Value(0.0));
      }
    }
    if (!v.is_json() || !(v.json().is_number() || v.json().is_boolean())) return Arg(args, 0, "default", Value(0.0));
    return Value(Number(v, name));
  }
  if (name == "abs") {
    if (v.is_json() && v.json().is_number_integer() && v.json().get<int64_t>() != INT64_MIN) {
      return Value(std::llabs(v.json().get<int64_t>()));
    }
    return Value(std::fabs(Number(v, name)));
  }
  if (name == "round") {
    const double p = std::pow(10.0, Given(Arg(args, 0, "precision")) ? Number(Arg(args, 0, "precision"), name) : 0);
    return Value(std::nearbyint(Number(v, name) * p) / p);
  }
  if (name == "indent") {
    const Value& width = Arg(args, 0, "width");
    const std::string pad(Given(width) ? static_cast<size_t>(Clamped(width, name, 0, 1000)) : 4, ' ');
    const bool first = Truthy(Arg(args, 1, "first"));
    const bool blank = Truthy(Arg(args, 2, "blank"));
    const Json lines = Split(ToString(v), "\n", -1);
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i].get_ref<const std::string&>();
      if (i) out += "\n";
      if ((i > 0 || first) && (blank || !line.empty())) out += pad;
      out += line;
    }
    return Value(out);
  }
  if (name == "sum") {
    double total = 0;
    bool all_int = true;
    for (const Json& item : Iterate(v)) {
      total += Number(Value(item), name);
      all_int = all_int && item.is_number_integer();
    }
    return all_int && std::fabs(total) < 9.0e15 ? Value(static_cast<int64_t>(total)) : Value(total);
  }
  if (name == "min" || name == "max") {
    const Json items = Iterate(v);
    if (items.empty()) return Value::Undefined("");
    Json best = items[0];
    for (const Json& item : items) {
      if (name == "min" ? Less(Value(item), Value(best)) : Less(Value(best), Value(item))) best = item;
    }
    return Value(best);
  }
  if (name == "wordcount") return Value(SplitWhitespace(ToString(v), -1).size());
  Fail(absl::StrCat("no filter named '", name, "'"));
}

bool ApplyTest(const std::string& name, const Value& v, CallArgs& args) {
  const Json& j = v.json();
  const bool json = v.is_json();
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return json && j.is_null();
  if (name == "string") return json && j.is_string();
  if (name == "mapping") return (json && j.is_object()) || v.kind() == Value::Kind::kNamespace;
  if (name == "sequence") return json && (j.is_array() || j.is_string() || j.is_object());
  if (name == "iterable") return json && (j.is_array() || j.is_string() || j.is_object());
  if (name == "number") return json && (j.is_number() || j.is_boolean());
  if (name == "integer") return json && j.is_number_integer();
  if (name == "float") return json && j.is_number_float();
  if (name == "boolean") return json && j.is_boolean();
  if (name == "true") return json && j.is_boolean() && j.get<bool>();
  if (name == "false") return json && j.is_boolean() && !j.get<bool>();
  if (name == "callable") return v.kind() == Value::Kind::kCallable;
  if (name == "lower") return json && j.is_string() && AsciiLower(j.get<std::string>()) == j.get<std::string>();
  if (name == "upper") return json && j.is_string() && AsciiUpper(j.get<std::string>()) == j.get<std::string>();
  const Value& other = Arg(args, 0, "value");
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return Equal(v, other);
  if (name == "ne" || name == "!=") return !Equal(v, other);
  if (name == "lt" || name == "lessthan" || name == "<") return Less(v, other);
  if (name == "gt" || name == "greaterthan" || name == ">") return Less(other, v);
  if (name == "le" || name == "<=") return !Less(other, v);
  if (name == "ge" || name == ">=") return !Less(v, other);
  if (name == "in") {
    for (const Json& item : Iterate(other)) {
      if (Equal(Value(item), v)) return true;
    }
    return false;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!json || !j.is_number_integer()) Fail(absl::StrCat("test '", name, "' needs an integer, got ", TypeName(v)));
    const int64_t x = j.get<int64_t>();
    if (name == "divisibleby") {
      const int64_t d = Clamped(other, name, -(INT64_MAX / 2), INT64_MAX / 2);
      if (d == 0) Fail("divisibleby 0");
      if (d == -1) return true;
      return x % d == 0;
    }
    return (x % 2 != 0) == (name == "odd");
  }
  Fail(absl::StrCat("no test named '", name, "'"));
}

}  // namespace beacon::jinja
