// The bracket nesting of a JSON text, for the fuzz targets that parse JSON
// themselves: the server refuses JSON deeper than 64 levels before any tree is
// built (server/http/json_limits.h), so deeper inputs are no input a parser
// behind it sees, and nlohmann's recursive parser would only exhaust the
// stack on them.
#ifndef BEACON_TESTS_FUZZ_JSON_DEPTH_H_
#define BEACON_TESTS_FUZZ_JSON_DEPTH_H_

#include <algorithm>
#include <string_view>

namespace beacon::fuzz {

inline constexpr int kMaxJsonDepth = 64;  // the server's JsonLimits default

// Depth of [ and { outside strings; stops counting once past `limit`.
inline int JsonDepth(std::string_view text, int limit = kMaxJsonDepth) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if (c == ']' || c == '}') --depth;
    if (deepest > limit) break;
  }
  return deepest;
}

}  // namespace beacon::fuzz

#endif  // BEACON_TESTS_FUZZ_JSON_DEPTH_H_
