// Lookup, slicing, iteration and Python's str/dict methods; filters and
// tests are in filters.cc.
#include "model/tokenizer/jinja/builtins.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/tokenizer/jinja/strings.h"

namespace beacon::jinja {

Value Arg(const CallArgs& args, size_t index, const std::string& name, const Value& fallback) {
  for (const auto& [k, v] : args.keyword) {
    if (k == name) return v;
  }
  if (index < args.positional.size()) return args.positional[index];
  return fallback;
}

Value GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) {
    Fail(obj.name().empty() ? absl::StrCat("undefined value has no attribute '", name, "'")
                            : absl::StrCat("'", obj.name(), "' is undefined"));
  }
  if (obj.kind() == Value::Kind::kNamespace) {
    auto it = obj.ns().find(name);
    return it == obj.ns().end() ? Value::Undefined("") : Value(*it);
  }
  if (obj.is_json() && obj.json().is_object()) {
    auto it = obj.json().find(name);
    if (it != obj.json().end()) return Value(*it);
  }
  return Value::Undefined("");
}

namespace {

// Python's index normalisation: negative counts from the end.
int64_t Normalise(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

int64_t IntArg(const Value& v, const char* what) {
  if (!v.is_json() || !(v.json().is_number_integer() || v.json().is_boolean())) {
    Fail(absl::StrCat(what, " must be an integer, not ", TypeName(v)));
  }
  return v.json().is_boolean() ? v.json().get<bool>() : v.json().get<int64_t>();
}

}  // namespace

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) {
    Fail(obj.name().empty() ? "undefined value is not subscriptable" : absl::StrCat("'", obj.name(), "' is undefined"));
  }
  if (obj.kind() == Value::Kind::kNamespace) {
    return key.is_json() && key.json().is_string() ? GetAttr(obj, key.json().get<std::string>()) : Value();
  }
  if (!obj.is_json()) Fail(absl::StrCat("'", TypeName(obj), "' object is not subscriptable"));
  const Json& j = obj.json();
  if (j.is_object()) {
    if (!key.is_json()) return Value::Undefined("");
    const std::string k = key.json().is_string() ? key.json().get<std::string>() : key.json().dump();
    auto it = j.find(k);
    return it == j.end() ? Value::Undefined("") : Value(*it);
  }
  if (j.is_array() || j.is_string()) {
    if (!key.is_json() || !(key.json().is_number_integer() || key.json().is_boolean())) {
      return Value::Undefined("");  // jinja2: a str key on a list is an undefined attribute
    }
    const int64_t raw = IntArg(key, "index");
    if (j.is_array()) {
      const int64_t i = Normalise(raw, static_cast<int64_t>(j.size()));
      if (i < 0 || i >= static_cast<int64_t>(j.size())) return Value::Undefined("");
      return Value(j[static_cast<size_t>(i)]);
    }
    const std::vector<std::string> cps = CodePoints(j.get_ref<const std::string&>());
    const int64_t i = Normalise(raw, static_cast<int64_t>(cps.size()));
    if (i < 0 || i >= static_cast<int64_t>(cps.size())) return Value::Undefined("");
    return Value(cps[static_cast<size_t>(i)]);
  }
  Fail(absl::StrCat("'", TypeName(obj), "' object is not subscriptable"));
}

Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  if (!obj.is_json() || !(obj.json().is_array() || obj.json().is_string())) {
    Fail(absl::StrCat("cannot slice a value of type ", TypeName(obj)));
  }
  const bool is_str = obj.json().is_string();
  std::vector<std::string> cps;
  if (is_str) cps = CodePoints(obj.json().get_ref<const std::string&>());
  const int64_t n = is_str ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(obj.json().size());
  auto given = [](const Value& v) { return v.is_json() && !v.json().is_null(); };
  const int64_t step = given(step_v) ? IntArg(step_v, "slice step") : 1;
  if (step == 0) Fail("slice step cannot be zero");
  auto bound = [&](const Value& v, int64_t dflt) {
    if (!given(v)) return dflt;
    int64_t i = IntArg(v, "slice index");
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = bound(start, step > 0 ? 0 : n - 1);
  const int64_t e = bound(stop, step > 0 ? n : -1);
  Json out = is_str ? Json("") : Json::array();
  std::string s;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) {
    if (is_str) {
      s += cps[static_cast<size_t>(i)];
    } else {
      out.push_back(obj.json()[static_cast<size_t>(i)]);
    }
  }
  return is_str ? Value(Json(s)) : Value(std::move(out));
}

Json Iterate(const Value& v) {
  if (v.is_undefined()) return Json::array();
  if (v.kind() != Value::Kind::kJson) Fail(absl::StrCat("'", TypeName(v), "' object is not iterable"));
  const Json& j = v.json();
  if (j.is_array()) return j;
  Json out = Json::array();
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) out.push_back(it.key());
  } else if (j.is_string()) {
    for (std::string& cp : CodePoints(j.get_ref<const std::string&>())) out.push_back(std::move(cp));
  } else {
    Fail(absl::StrCat("'", TypeName(v), "' object is not iterable"));
  }
  return out;
}

namespace {

std::string StrArg(const Value& v, const char* what) {
  if (!v.is_json() || !v.json().is_string()) Fail(absl::StrCat(what, " must be a string, not ", TypeName(v)));
  return v.json().get<std::string>();
}

// startswith/endswith take a string or a tuple of strings.
bool AffixMatch(const std::string& s, const Value& arg, bool prefix) {
  std::vector<std::string> options;
  if (arg.is_json() && arg.json().is_array()) {
    for (const Json& o : arg.json()) options.push_back(StrArg(Value(o), "affix"));
  } else {
    options.push_back(StrArg(arg, "affix"));
  }
  for (const std::string& o : options) {
    if (o.size() <= s.size() &&
        (prefix ? s.compare(0, o.size(), o) : s.compare(s.size() - o.size(), o.size(), o)) == 0) {
      return true;
    }
  }
  return false;
}

// str.format with fields {}, {N} and {name} (values as str() shows them)
// and {{ }} escapes; a conversion (!r) or format spec (:>8) is refused.
std::string Format(const std::string& s, const CallArgs& args) {
  std::string out;
  size_t next_auto = 0;
  bool automatic = false, manual = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if ((c == '{' || c == '}') && i + 1 < s.size() && s[i + 1] == c) {
      out.push_back(c);
      ++i;
      continue;
    }
    if (c == '}') Fail("str.format: single '}' encountered in format string");
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    const size_t close = s.find('}', i);
    if (close == std::string::npos) Fail("str.format: single '{' encountered in format string");
    const std::string field = s.substr(i + 1, close - i - 1);
    if (field.find_first_of("!:[.{") != std::string::npos) Fail("str.format: only {}, {N} and {name} are supported");
    if (field.empty() || std::all_of(field.begin(), field.end(), [](unsigned char d) { return std::isdigit(d); })) {
      (field.empty() ? automatic : manual) = true;
      if (automatic && manual) Fail("str.format: cannot switch between automatic and manual field numbering");
      const size_t index = field.empty() ? next_auto++ : std::stoul(field);
      if (index >= args.positional.size()) Fail("str.format: replacement index out of range");
      out += ToString(args.positional[index]);
    } else {
      auto it =
          std::find_if(args.keyword.begin(), args.keyword.end(), [&](const auto& kv) { return kv.first == field; });
      if (it == args.keyword.end()) Fail(absl::StrCat("str.format: no argument named '", field, "'"));
      out += ToString(it->second);
    }
    i = close;
  }
  return out;
}

std::optional<Value> StringMethod(const std::string& s, const std::string& name, CallArgs& args) {
  if (name == "format") return Value(Format(s, args));
  if (name == "startswith" || name == "endswith") return Value(AffixMatch(s, Arg(args, 0, "prefix"), name[0] == 's'));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value& chars = Arg(args, 0, "chars");
    const bool given = chars.is_json() && !chars.json().is_null();
    return Value(
        StripChars(s, given ? StrArg(chars, "chars") : std::string(kWhitespace), name[0] != 'r', name[0] != 'l'));
  }
  if (name == "split" || name == "rsplit") {
    const Value& sep = Arg(args, 0, "sep");
    const Value& maxsplit = Arg(args, 1, "maxsplit");
    const int64_t max = maxsplit.is_json() && maxsplit.json().is_number_integer() ? maxsplit.json().get<int64_t>() : -1;
    if (sep.is_json() && !sep.json().is_null()) return Value(Split(s, StrArg(sep, "sep"), max));
    return Value(SplitWhitespace(s, max));
  }
  if (name == "upper") return Value(AsciiUpper(s));
  if (name == "lower") return Value(AsciiLower(s));
  if (name == "title") return Value(Title(s));
  if (name == "capitalize") return Value(Capitalize(s));
  if (name == "replace") {
    const Value& count = Arg(args, 2, "count");
    return Value(Replace(s, StrArg(Arg(args, 0, "old"), "old"), StrArg(Arg(args, 1, "new"), "new"),
                         count.is_json() && count.json().is_number_integer() ? count.json().get<int64_t>() : -1));
  }
  if (name == "find" || name == "index" || name == "count") {
    const std::string sub = StrArg(Arg(args, 0, "sub"), "sub");
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(CodePoints(s).size() + 1));
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    const size_t p = s.find(sub);
    if (p == std::string::npos && name == "index") Fail("substring not found");
    return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(CodePoints(s.substr(0, p)).size()));
  }
  if (name == "join") {
    std::vector<std::string> parts;
    for (const Json& e : Iterate(Arg(args, 0, "iterable"))) parts.push_back(StrArg(Value(e), "join item"));
    return Value(absl::StrJoin(parts, s));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    bool ok = !s.empty();
    for (unsigned char c : s) {
      ok = ok && (name == "isdigit"   ? std::isdigit(c)
                  : name == "isspace" ? std::isspace(c)
                  : name == "isalpha" ? std::isalpha(c)
                                      : std::isalnum(c));
    }
    return Value(ok);
  }
  if (name == "splitlines") return Value(Split(s, "\n", -1));
  return std::nullopt;
}

std::optional<Value> DictMethod(const Json& d, const std::string& name, CallArgs& args) {
  if (name == "items" || name == "keys" || name == "values") {
    Json out = Json::array();
    for (auto it = d.begin(); it != d.end(); ++it) {
      if (name == "items") out.push_back(Json::array({it.key(), it.value()}));
      if (name == "keys") out.push_back(it.key());
      if (name == "values") out.push_back(it.value());
    }
    return Value(std::move(out));
  }
  if (name == "get") {
    const Value& key = Arg(args, 0, "key");
    if (key.is_json() && key.json().is_string()) {
      auto it = d.find(key.json().get<std::string>());
      if (it != d.end()) return Value(*it);
    }
    const Value& dflt = Arg(args, 1, "default");
    return dflt.is_undefined() ? Value(nullptr) : dflt;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> CallMethod(const Value& obj, const std::string& name, CallArgs& args) {
  if (!obj.is_json()) return std::nullopt;
  if (obj.json().is_string()) return StringMethod(obj.json().get_ref<const std::string&>(), name, args);
  if (obj.json().is_object()) {
    if (obj.json().contains(name) && name != "items" && name != "keys" && name != "values" && name != "get") {
      return std::nullopt;
    }
    return DictMethod(obj.json(), name, args);
  }
  if (obj.json().is_array() && (name == "append" || name == "pop" || name == "extend" || name == "insert")) {
    Fail(absl::StrCat("list.", name, "() is not allowed (the template environment is immutable)"));
  }
  return std::nullopt;
}

}  // namespace beacon::jinja
