#include "model/gguf/gguf_types.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace beacon {

std::string GgufValueTypeName(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: return "UINT8";
    case GgufValueType::kInt8: return "INT8";
    case GgufValueType::kUint16: return "UINT16";
    case GgufValueType::kInt16: return "INT16";
    case GgufValueType::kUint32: return "UINT32";
    case GgufValueType::kInt32: return "INT32";
    case GgufValueType::kFloat32: return "FLOAT32";
    case GgufValueType::kBool: return "BOOL";
    case GgufValueType::kString: return "STRING";
    case GgufValueType::kArray: return "ARRAY";
    case GgufValueType::kUint64: return "UINT64";
    case GgufValueType::kInt64: return "INT64";
    case GgufValueType::kFloat64: return "FLOAT64";
  }
  return absl::StrCat("type ", static_cast<uint32_t>(t));
}

size_t GgufValueTypeSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray: return 0;
  }
  return 0;
}

bool GgufIsIntegerType(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64: return true;
    default: return false;
  }
}

bool GgufIsFloatType(GgufValueType t) { return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64; }

namespace {

// Indexed by ggml type id. Sizes follow ggml-common.h's block structs; the
// K-quants and IQ types use super-blocks of 256 elements.
constexpr std::array<GgmlTypeTraits, 40> kGgmlTypes = {{
    {"F32", 1, 4},         // 0
    {"F16", 1, 2},         // 1
    {"Q4_0", 32, 18},      // 2
    {"Q4_1", 32, 20},      // 3
    {"", 0, 0},            // 4  Q4_2, retired
    {"", 0, 0},            // 5  Q4_3, retired
    {"Q5_0", 32, 22},      // 6
    {"Q5_1", 32, 24},      // 7
    {"Q8_0", 32, 34},      // 8
    {"Q8_1", 32, 36},      // 9
    {"Q2_K", 256, 84},     // 10
    {"Q3_K", 256, 110},    // 11
    {"Q4_K", 256, 144},    // 12
    {"Q5_K", 256, 176},    // 13
    {"Q6_K", 256, 210},    // 14
    {"Q8_K", 256, 292},    // 15
    {"IQ2_XXS", 256, 66},  // 16
    {"IQ2_XS", 256, 74},   // 17
    {"IQ3_XXS", 256, 98},  // 18
    {"IQ1_S", 256, 50},    // 19
    {"IQ4_NL", 32, 18},    // 20
    {"IQ3_S", 256, 110},   // 21
    {"IQ2_S", 256, 82},    // 22
    {"IQ4_XS", 256, 136},  // 23
    {"I8", 1, 1},          // 24
    {"I16", 1, 2},         // 25
    {"I32", 1, 4},         // 26
    {"I64", 1, 8},         // 27
    {"F64", 1, 8},         // 28
    {"IQ1_M", 256, 56},    // 29
    {"BF16", 1, 2},        // 30
    {"", 0, 0},            // 31 Q4_0_4_4, retired
    {"", 0, 0},            // 32 Q4_0_4_8, retired
    {"", 0, 0},            // 33 Q4_0_8_8, retired
    {"TQ1_0", 256, 54},    // 34
    {"TQ2_0", 256, 66},    // 35
    {"", 0, 0},            // 36 IQ4_NL_4_4, retired
    {"", 0, 0},            // 37 IQ4_NL_4_8, retired
    {"", 0, 0},            // 38 IQ4_NL_8_8, retired
    {"MXFP4", 32, 17},     // 39
}};

}  // namespace

GgmlTypeTraits GgmlTypeInfo(uint32_t ggml_type) {
  if (ggml_type >= kGgmlTypes.size()) return {};
  return kGgmlTypes[ggml_type];
}

std::string GgmlTypeLabel(uint32_t ggml_type) {
  const GgmlTypeTraits info = GgmlTypeInfo(ggml_type);
  const std::string_view name = info.name.empty() ? "unknown" : info.name;
  return absl::StrCat(absl::string_view(name.data(), name.size()), " (", ggml_type, ")");
}

}  // namespace beacon
