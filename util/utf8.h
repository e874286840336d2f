// UTF-8 well-formedness, shared by every layer that takes text from outside
// (request fields, template files).
#ifndef BEACON_UTIL_UTF8_H_
#define BEACON_UTIL_UTF8_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace beacon {

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF).
inline bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// A client's string as an error message or a log line may quote it: whole
// when at most `max_bytes`, else its first bytes up to a character boundary
// and the full size ("abc... (8388608 bytes)"), so that no refusal logs or
// echoes megabytes a client sent (issue 46).
inline std::string Excerpt(std::string_view s, size_t max_bytes = 64) {
  if (s.size() <= max_bytes) return std::string(s);
  size_t cut = max_bytes;
  // Back up over continuation bytes to the start of a character.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut)) + "... (" + std::to_string(s.size()) + " bytes)";
}

}  // namespace beacon

#endif  // BEACON_UTIL_UTF8_H_
