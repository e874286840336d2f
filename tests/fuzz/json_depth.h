// The bracket nesting of a JSON text, for the fuzz targets that parse JSON
// themselves: the server refuses JSON deeper than 64 levels before any tree is
// built (server/http/json_limits.h), so deeper inputs are no input a parser
// behind it sees, and nlohmann's recursive parser would only exhaust the
// stack on them. (Model files are read through ReadJsonFile, which has its
// own limit; their fuzz target goes through it.)
#ifndef BEACON_TESTS_FUZZ_JSON_DEPTH_H_
#define BEACON_TESTS_FUZZ_JSON_DEPTH_H_

#include <string_view>

#include "util/json_depth.h"

namespace beacon::fuzz {

inline constexpr int kMaxJsonDepth = 64;  // the server's JsonLimits default

inline int JsonDepth(std::string_view text, int limit = kMaxJsonDepth) { return JsonNestingDepth(text, limit); }

}  // namespace beacon::fuzz

#endif  // BEACON_TESTS_FUZZ_JSON_DEPTH_H_
