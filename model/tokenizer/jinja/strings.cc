#include "model/tokenizer/jinja/strings.h"

#include <cctype>

#include "model/tokenizer/jinja/value.h"

namespace beacon::jinja {

std::string StripChars(std::string_view s, std::string_view chars, bool left, bool right) {
  size_t b = 0;
  size_t e = s.size();
  if (left) {
    while (b < e && chars.find(s[b]) != std::string_view::npos) ++b;
  }
  if (right) {
    while (e > b && chars.find(s[e - 1]) != std::string_view::npos) --e;
  }
  return std::string(s.substr(b, e - b));
}

Json Split(std::string_view s, std::string_view sep, int64_t maxsplit) {
  if (sep.empty()) Fail("empty separator");
  Json out = Json::array();
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t at = s.find(sep, pos);
    if (at == std::string_view::npos) break;
    out.push_back(std::string(s.substr(pos, at - pos)));
    pos = at + sep.size();
  }
  out.push_back(std::string(s.substr(pos)));
  return out;
}

Json SplitWhitespace(std::string_view s, int64_t maxsplit) {
  Json out = Json::array();
  size_t i = 0;
  auto ws = [](char c) { return kWhitespace.find(c) != std::string_view::npos; };
  while (true) {
    while (i < s.size() && ws(s[i])) ++i;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = s.size();
      while (e > i && ws(s[e - 1])) --e;
      out.push_back(std::string(s.substr(i, e - i)));
      break;
    }
    size_t e = i;
    while (e < s.size() && !ws(s[e])) ++e;
    out.push_back(std::string(s.substr(i, e - i)));
    i = e;
  }
  return out;
}

std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Title(std::string_view s) {
  std::string out(s);
  bool start = true;
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
      start = false;
    } else {
      start = u < 0x80;
    }
  }
  return out;
}

std::string Capitalize(std::string_view s) {
  std::string out = AsciiLower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` between every character and at both ends.
    const auto cps = CodePoints(s);
    int64_t n = 0;
    for (const std::string& cp : cps) {
      if (count < 0 || n++ < count) out += to;
      out += cp;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t at = s.find(from, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos));
    out.append(to);
    pos = at + from.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace beacon::jinja
