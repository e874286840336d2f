// GGUF metadata values as validated views into the file's bytes.
//
// Parsing a value (ReadGgufValue) checks its whole encoding once, recursively,
// without allocating in proportion to any count the file states: an array is
// kept as (element type, count, bytes) and decoded only when asked for. So a
// hostile file costs O(number of keys) memory, and every later decode of a
// value that passed ReadGgufValue stays within its bytes.
#ifndef BEACON_MODEL_GGUF_GGUF_METADATA_H_
#define BEACON_MODEL_GGUF_GGUF_METADATA_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/gguf/byte_cursor.h"
#include "model/gguf/gguf_types.h"

namespace beacon {

// Arrays nested deeper than this are rejected (bounds the parser's recursion).
inline constexpr int kGgufMaxArrayDepth = 8;

struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  // Scalars: the value's own bytes. STRING: the characters (no length prefix).
  // ARRAY: the encoded elements, after the element type and count.
  std::string_view bytes;
  GgufValueType elem_type = GgufValueType::kUint8;  // ARRAY only
  uint64_t count = 0;                               // ARRAY only
  uint64_t offset = 0;                              // file offset where the value's encoding starts

  bool is_array() const { return type == GgufValueType::kArray; }
  // "UINT32", "STRING", "ARRAY[INT32]", "ARRAY[ARRAY]".
  std::string TypeName() const;
};

struct GgufKeyValue {
  std::string_view key;
  GgufValue value;
};

// Reads and validates one value of `type` at the cursor (which must already
// have consumed the type id). `where` names the value in error messages
// ("model.gguf: metadata 'general.name'"). Errors: DATA_LOSS when the bytes
// run out, INVALID_ARGUMENT for a bad type id, a bool other than 0/1 or
// nesting deeper than kGgufMaxArrayDepth. `depth` counts enclosing arrays.
absl::StatusOr<GgufValue> ReadGgufValue(ByteCursor& cursor, GgufValueType type, const std::string& where,
                                        int depth = 0);

// Calls `fn` with each element of `array` in order until it returns false.
// REQUIRES: `array` came from ReadGgufValue and is an ARRAY. Errors only if
// the encoding is inconsistent, which ReadGgufValue rules out.
absl::Status ForEachGgufArrayElement(const GgufValue& array, absl::FunctionRef<bool(const GgufValue&)> fn);

// Scalar decoding. AsInt: any integer type (UINT64 above INT64_MAX fails).
// AsDouble: FLOAT32/FLOAT64. AsBool: BOOL. AsString: STRING.
// INVALID_ARGUMENT naming the actual type when the type does not match.
absl::StatusOr<int64_t> GgufValueAsInt(const GgufValue& v);
absl::StatusOr<double> GgufValueAsDouble(const GgufValue& v);
absl::StatusOr<bool> GgufValueAsBool(const GgufValue& v);
absl::StatusOr<std::string_view> GgufValueAsString(const GgufValue& v);

// Renders a value for logs and dumps; arrays show at most `max_elems`
// elements per level followed by "... (N total)". Strings are quoted and
// cut at 200 bytes.
std::string FormatGgufValue(const GgufValue& v, size_t max_elems = 8);

}  // namespace beacon

#endif  // BEACON_MODEL_GGUF_GGUF_METADATA_H_
