// JSON request bodies parsed with bounds a hostile client cannot get past.
//
// nlohmann::json builds a tree node per value, so a small body can cost far
// more memory than its size: 8 MB of `[` is 8 million nested arrays, about
// half a gigabyte, and the allocator keeps most of it after the request is
// answered. ParseJsonBounded first walks the body with the SAX parser, which
// builds nothing and stops at the first value past a limit, and builds the
// tree only for a body that passed: a rejected body costs no more than a
// few bytes per nesting level (the SAX parser's own stack).
#ifndef BEACON_SERVER_HTTP_JSON_LIMITS_H_
#define BEACON_SERVER_HTTP_JSON_LIMITS_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace beacon {

struct JsonLimits {
  // Containers (arrays and objects) nested inside each other, the outermost
  // counting as 1. The OpenAI request shapes need 4 (body, messages, a
  // message, its content parts); 64 leaves room for any client's extras.
  int32_t max_depth = 64;
  // Values anywhere in the body: every scalar, array and object, the body
  // itself included (object keys are not counted apart from their values).
  // A prompt of token ids holds a context's worth of integers, so this
  // exceeds any context length the server runs.
  int64_t max_values = 1 << 20;
  // Strings, object keys, arrays and objects: each is a separate allocation
  // of some 50-100 bytes in the tree, where a number, boolean or null is 16
  // bytes inline. A 3 MB body of a million `{}` would cost ~80 MB; this
  // keeps any tree near 25 MB. A chat of the 4096 messages the server
  // accepts, each with ten text parts, stays under it.
  int64_t max_strings_and_containers = 1 << 18;
};

// Parses `body` as one JSON value within `limits`.
// INVALID_ARGUMENT, naming the limit, for "JSON nesting deeper than N
// levels", "JSON with more than N values" and "JSON with more than N
// strings (keys included), arrays and objects"; INVALID_ARGUMENT "the body is
// not valid JSON ..." (with the byte offset) for malformed JSON or invalid
// UTF-8 in strings. Never throws.
absl::StatusOr<nlohmann::json> ParseJsonBounded(std::string_view body, const JsonLimits& limits = {});

}  // namespace beacon

#endif  // BEACON_SERVER_HTTP_JSON_LIMITS_H_
