// The two type systems of a GGUF file: metadata value types (GgufValueType)
// and ggml tensor element types (plain uint32 ids, named and sized here).
//
// The ggml table covers the ids llama.cpp has assigned so far (0..39) so that
// a file holding, say, IQ4_NL tensors can be parsed, bounds-checked and
// reported by name ("IQ4_NL (20)") even though no kernel here reads it. Which
// ids the engine can compute with is DType's business (kernels/cpu/dtype.h).
#ifndef BEACON_MODEL_GGUF_GGUF_TYPES_H_
#define BEACON_MODEL_GGUF_GGUF_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace beacon {

// GGUF metadata value types; the numeric values are the on-disk ids.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
inline constexpr uint32_t kGgufValueTypeCount = 13;

// "UINT8", "STRING", ...; "type <id>" for ids outside the enum.
std::string GgufValueTypeName(GgufValueType t);
// Bytes of one value of a fixed-size type; 0 for STRING and ARRAY (and for
// ids outside the enum).
size_t GgufValueTypeSize(GgufValueType t);
bool GgufIsIntegerType(GgufValueType t);
bool GgufIsFloatType(GgufValueType t);

// Storage geometry of a ggml element type: `block_elems` elements take
// `block_bytes` bytes. Both are 0 for ids that are unassigned or retired
// (4, 5, 31-33, 36-38) or beyond the table.
struct GgmlTypeTraits {
  std::string_view name;  // "Q4_1"; empty when unknown
  int64_t block_elems = 0;
  int64_t block_bytes = 0;

  bool known() const { return block_elems > 0; }
};
GgmlTypeTraits GgmlTypeInfo(uint32_t ggml_type);

// "Q6_K (14)", or "unknown (77)" for ids without a name: the form every
// error message uses.
std::string GgmlTypeLabel(uint32_t ggml_type);

}  // namespace beacon

#endif  // BEACON_MODEL_GGUF_GGUF_TYPES_H_
