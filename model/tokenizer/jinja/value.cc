#include "model/tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace beacon::jinja {

void Fail(std::string message) { throw RenderError{std::move(message)}; }

const Json& Value::NullJson() {
  static const Json* const kNull = new Json(nullptr);
  return *kNull;
}

Json Value::ToJson() const {
  switch (kind_) {
    case Kind::kJson: return *json_;
    case Kind::kNamespace: return *ns_;
    default: return nullptr;
  }
}

bool Truthy(const Value& v) {
  if (v.kind() == Value::Kind::kNamespace || v.kind() == Value::Kind::kCallable) return true;
  if (v.is_undefined()) return false;
  const Json& j = v.json();
  switch (j.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return j.get<bool>();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return j.get<int64_t>() != 0;
    case Json::value_t::number_float: return j.get<double>() != 0.0;
    case Json::value_t::string: return !j.get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object: return !j.empty();
    default: return true;
  }
}

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "undefined";
    case Value::Kind::kNamespace: return "namespace";
    case Value::Kind::kCallable: return "function";
    case Value::Kind::kJson: break;
  }
  switch (v.json().type()) {
    case Json::value_t::null: return "NoneType";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "int";
    case Json::value_t::number_float: return "float";
    case Json::value_t::string: return "str";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    default: return "object";
  }
}

std::string PyFloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // [-]d[.ddd]e[+-]XX, shortest round trip
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  if (exp < -4 || exp >= 16) {
    std::string mant = digits.substr(0, 1);
    if (digits.size() > 1) absl::StrAppend(&mant, ".", digits.substr(1));
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return sign + mant + ebuf;
  }
  if (exp < 0) return absl::StrCat(sign, "0.", std::string(-exp - 1, '0'), digits);
  if (static_cast<int>(digits.size()) <= exp + 1) {
    return absl::StrCat(sign, digits, std::string(exp + 1 - digits.size(), '0'), ".0");
  }
  return absl::StrCat(sign, digits.substr(0, exp + 1), ".", digits.substr(exp + 1));
}

namespace {

std::string PyStringRepr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const char quote = has_single && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == quote) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

void DumpString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void Dump(const Json& j, int indent, int level, std::string_view item_sep, std::string_view key_sep, bool sort_keys,
          std::string* out) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent) * lvl, ' ');
  };
  switch (j.type()) {
    case Json::value_t::null: *out += "null"; return;
    case Json::value_t::boolean: *out += j.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_integer: *out += std::to_string(j.get<int64_t>()); return;
    case Json::value_t::number_unsigned: *out += std::to_string(j.get<uint64_t>()); return;
    case Json::value_t::number_float: {
      const double d = j.get<double>();
      *out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : PyFloatRepr(d);
      return;
    }
    case Json::value_t::string: DumpString(j.get_ref<const std::string&>(), out); return;
    case Json::value_t::array: {
      if (j.empty()) {
        *out += "[]";
        return;
      }
      out->push_back('[');
      bool first = true;
      for (const Json& e : j) {
        if (!first) *out += item_sep;
        first = false;
        newline(level + 1);
        Dump(e, indent, level + 1, item_sep, key_sep, sort_keys, out);
      }
      newline(level);
      out->push_back(']');
      return;
    }
    case Json::value_t::object: {
      if (j.empty()) {
        *out += "{}";
        return;
      }
      std::vector<const std::string*> keys;
      for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(&it.key());
      if (sort_keys) std::sort(keys.begin(), keys.end(), [](auto* a, auto* b) { return *a < *b; });
      out->push_back('{');
      bool first = true;
      for (const std::string* k : keys) {
        if (!first) *out += item_sep;
        first = false;
        newline(level + 1);
        DumpString(*k, out);
        *out += key_sep;
        Dump(j.at(*k), indent, level + 1, item_sep, key_sep, sort_keys, out);
      }
      newline(level);
      out->push_back('}');
      return;
    }
    default: *out += "null"; return;
  }
}

}  // namespace

std::string PyRepr(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return j.get<bool>() ? "True" : "False";
    case Json::value_t::number_integer: return std::to_string(j.get<int64_t>());
    case Json::value_t::number_unsigned: return std::to_string(j.get<uint64_t>());
    case Json::value_t::number_float: return PyFloatRepr(j.get<double>());
    case Json::value_t::string: return PyStringRepr(j.get_ref<const std::string&>());
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < j.size(); ++i) absl::StrAppend(&out, i ? ", " : "", PyRepr(j[i]));
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        absl::StrAppend(&out, first ? "" : ", ", PyStringRepr(it.key()), ": ", PyRepr(it.value()));
        first = false;
      }
      return out + "}";
    }
    default: return "None";
  }
}

std::string ToString(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNamespace: return "<Namespace " + PyRepr(v.ns()) + ">";
    case Value::Kind::kCallable: return "<function " + v.name() + ">";
    case Value::Kind::kJson: break;
  }
  if (v.json().is_string()) return v.json().get<std::string>();
  return PyRepr(v.json());
}

std::string JsonDumps(const Json& j, int indent, std::string_view item_sep, std::string_view key_sep, bool sort_keys) {
  std::string out;
  Dump(j, indent, 0, item_sep, key_sep, sort_keys, &out);
  return out;
}

bool Equal(const Value& a, const Value& b) {
  if (!a.is_json() || !b.is_json()) {
    if (a.is_undefined() && b.is_undefined()) return true;
    if (a.kind() == Value::Kind::kNamespace && b.kind() == Value::Kind::kNamespace) return &a.ns() == &b.ns();
    return false;
  }
  const Json& x = a.json();
  const Json& y = b.json();
  const bool xn = x.is_number() || x.is_boolean();
  const bool yn = y.is_number() || y.is_boolean();
  if (xn && yn) {
    auto num = [](const Json& j) { return j.is_boolean() ? (j.get<bool>() ? 1.0 : 0.0) : j.get<double>(); };
    if (x.is_number_integer() && y.is_number_integer()) return x.get<int64_t>() == y.get<int64_t>();
    return num(x) == num(y);
  }
  return x == y;
}

bool Less(const Value& a, const Value& b) {
  if (a.is_json() && b.is_json()) {
    const Json& x = a.json();
    const Json& y = b.json();
    if ((x.is_number() || x.is_boolean()) && (y.is_number() || y.is_boolean())) {
      if (x.is_number_integer() && y.is_number_integer()) return x.get<int64_t>() < y.get<int64_t>();
      auto num = [](const Json& j) { return j.is_boolean() ? (j.get<bool>() ? 1.0 : 0.0) : j.get<double>(); };
      return num(x) < num(y);
    }
    if (x.is_string() && y.is_string()) return x.get_ref<const std::string&>() < y.get_ref<const std::string&>();
    if (x.is_array() && y.is_array()) {
      for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
        if (Less(Value(x[i]), Value(y[i]))) return true;
        if (Less(Value(y[i]), Value(x[i]))) return false;
      }
      return x.size() < y.size();
    }
  }
  Fail(absl::StrCat("'<' not supported between instances of '", TypeName(a), "' and '", TypeName(b), "'"));
}

std::vector<std::string> CodePoints(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = s.size() - i;
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace beacon::jinja
