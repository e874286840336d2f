// The bracket nesting of a JSON text, measured without parsing it: for files
// read with nlohmann's DOM parser, whose trees are built and destroyed
// recursively, so that a file nesting thousands of levels is refused with a
// clear error instead of exhausting the stack (model/hf_config.cc
// ReadJsonFile; the fuzz targets, tests/fuzz/json_depth.h). The server's own
// request JSON is checked while parsing instead (server/http/json_limits.h).
#ifndef BEACON_UTIL_JSON_DEPTH_H_
#define BEACON_UTIL_JSON_DEPTH_H_

#include <algorithm>
#include <string_view>

namespace beacon {

// Depth of [ and { outside strings; stops counting once past `limit`, so the
// result is at most limit + 1. Linear, no allocation.
inline int JsonNestingDepth(std::string_view text, int limit) {
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

}  // namespace beacon

#endif  // BEACON_UTIL_JSON_DEPTH_H_
