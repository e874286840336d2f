#include "model/gguf/gguf_metadata.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

// Smallest possible encoding of one array element, used to reject counts the
// remaining bytes cannot hold before looping over them.
constexpr uint64_t kMinStringBytes = 8;        // u64 length, empty string
constexpr uint64_t kMinNestedArrayBytes = 12;  // u32 type + u64 count, no elements

absl::Status Truncated(const std::string& where, const std::string& what, uint64_t offset, uint64_t need,
                       uint64_t have) {
  return absl::DataLossError(
      absl::StrCat(where, ": ", what, " at offset ", offset, " needs ", need, " bytes but only ", have, " remain"));
}

bool ValidTypeId(uint32_t id) { return id < kGgufValueTypeCount; }

template <typename T>
T Load(std::string_view bytes) {
  T v;
  std::memcpy(&v, bytes.data(), sizeof(T));
  return v;
}

}  // namespace

std::string GgufValue::TypeName() const {
  if (!is_array()) return GgufValueTypeName(type);
  return absl::StrCat("ARRAY[", GgufValueTypeName(elem_type), "]");
}

absl::StatusOr<GgufValue> ReadGgufValue(ByteCursor& c, GgufValueType type, const std::string& where, int depth) {
  GgufValue v;
  v.type = type;
  v.offset = c.pos();
  if (!ValidTypeId(static_cast<uint32_t>(type))) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unknown value type ", static_cast<uint32_t>(type), " at offset ", v.offset));
  }
  if (const size_t size = GgufValueTypeSize(type); size > 0) {
    if (!c.ReadBytes(size, &v.bytes)) {
      return Truncated(where, GgufValueTypeName(type), v.offset, size, c.remaining());
    }
    if (type == GgufValueType::kBool && static_cast<uint8_t>(v.bytes[0]) > 1) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": bool value ", static_cast<uint8_t>(v.bytes[0]),
                                                     " at offset ", v.offset, " is not 0 or 1"));
    }
    return v;
  }
  if (type == GgufValueType::kString) {
    uint64_t len;
    if (!c.ReadU64(&len)) return Truncated(where, "string length", v.offset, 8, c.remaining());
    if (!c.ReadBytes(len, &v.bytes)) {
      return absl::DataLossError(absl::StrCat(where, ": string length ", len, " at offset ", v.offset,
                                              " exceeds the remaining ", c.remaining(), " bytes"));
    }
    return v;
  }

  // ARRAY: element type, count, then the elements without per-element type ids.
  uint32_t elem_id;
  if (!c.ReadU32(&elem_id)) return Truncated(where, "array type", v.offset, 4, c.remaining());
  if (!ValidTypeId(elem_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unknown array element type ", elem_id, " at offset ", v.offset));
  }
  v.elem_type = static_cast<GgufValueType>(elem_id);
  if (!c.ReadU64(&v.count)) return Truncated(where, "array length", v.offset + 4, 8, c.remaining());
  const uint64_t start = c.pos();
  const std::string elem_name = GgufValueTypeName(v.elem_type);
  auto too_long = [&](uint64_t min_bytes) {
    return absl::DataLossError(absl::StrCat(where, ": array of ", v.count, " ", elem_name, " at offset ", v.offset,
                                            " cannot fit in the remaining ", c.remaining(), " bytes (at least ",
                                            min_bytes, " bytes per element)"));
  };
  if (const size_t size = GgufValueTypeSize(v.elem_type); size > 0) {
    if (v.count > c.remaining() / size) return too_long(size);
    c.Skip(v.count * size);
    v.bytes = c.Since(start);
    if (v.elem_type == GgufValueType::kBool) {
      for (uint64_t i = 0; i < v.count; ++i) {
        if (static_cast<uint8_t>(v.bytes[i]) > 1) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": bool value ", static_cast<uint8_t>(v.bytes[i]),
                                                         " at offset ", start + i, " is not 0 or 1"));
        }
      }
    }
    return v;
  }
  if (v.elem_type == GgufValueType::kArray && depth + 1 >= kGgufMaxArrayDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": arrays nested deeper than ", kGgufMaxArrayDepth, " at offset ", v.offset));
  }
  const uint64_t min_bytes = v.elem_type == GgufValueType::kString ? kMinStringBytes : kMinNestedArrayBytes;
  if (v.count > c.remaining() / min_bytes) return too_long(min_bytes);
  for (uint64_t i = 0; i < v.count; ++i) {
    absl::StatusOr<GgufValue> elem = ReadGgufValue(c, v.elem_type, where, depth + 1);
    if (!elem.ok()) return elem.status();
  }
  v.bytes = c.Since(start);
  return v;
}

absl::Status ForEachGgufArrayElement(const GgufValue& array, absl::FunctionRef<bool(const GgufValue&)> fn) {
  if (!array.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("value of type ", array.TypeName(), " is not an array"));
  }
  // The elements start after the u32 element type and u64 count.
  ByteCursor c(array.bytes, array.offset + 12);
  const size_t size = GgufValueTypeSize(array.elem_type);
  for (uint64_t i = 0; i < array.count; ++i) {
    GgufValue elem;
    if (size > 0) {
      elem.type = array.elem_type;
      elem.offset = c.pos();
      if (!c.ReadBytes(size, &elem.bytes)) {
        return absl::InternalError("array elements overrun their validated bytes");
      }
    } else {
      absl::StatusOr<GgufValue> read = ReadGgufValue(c, array.elem_type, "array element");
      if (!read.ok()) return read.status();
      elem = *read;
    }
    if (!fn(elem)) break;
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> GgufValueAsInt(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::kUint8: return Load<uint8_t>(v.bytes);
    case GgufValueType::kInt8: return Load<int8_t>(v.bytes);
    case GgufValueType::kUint16: return Load<uint16_t>(v.bytes);
    case GgufValueType::kInt16: return Load<int16_t>(v.bytes);
    case GgufValueType::kUint32: return Load<uint32_t>(v.bytes);
    case GgufValueType::kInt32: return Load<int32_t>(v.bytes);
    case GgufValueType::kInt64: return Load<int64_t>(v.bytes);
    case GgufValueType::kUint64: {
      const uint64_t u = Load<uint64_t>(v.bytes);
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return absl::InvalidArgumentError(absl::StrCat("UINT64 value ", u, " does not fit in int64"));
      }
      return static_cast<int64_t>(u);
    }
    default: return absl::InvalidArgumentError(absl::StrCat("has type ", v.TypeName(), ", expected an integer"));
  }
}

absl::StatusOr<double> GgufValueAsDouble(const GgufValue& v) {
  if (v.type == GgufValueType::kFloat32) return Load<float>(v.bytes);
  if (v.type == GgufValueType::kFloat64) return Load<double>(v.bytes);
  return absl::InvalidArgumentError(absl::StrCat("has type ", v.TypeName(), ", expected FLOAT32 or FLOAT64"));
}

absl::StatusOr<bool> GgufValueAsBool(const GgufValue& v) {
  if (v.type != GgufValueType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat("has type ", v.TypeName(), ", expected BOOL"));
  }
  return v.bytes[0] != 0;
}

absl::StatusOr<std::string_view> GgufValueAsString(const GgufValue& v) {
  if (v.type != GgufValueType::kString) {
    return absl::InvalidArgumentError(absl::StrCat("has type ", v.TypeName(), ", expected STRING"));
  }
  return v.bytes;
}

std::string FormatGgufValue(const GgufValue& v, size_t max_elems) {
  switch (v.type) {
    case GgufValueType::kUint64: return absl::StrCat(Load<uint64_t>(v.bytes));
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: return absl::StrCat(*GgufValueAsDouble(v));
    case GgufValueType::kBool: return v.bytes[0] != 0 ? "true" : "false";
    case GgufValueType::kString: {
      constexpr size_t kMaxChars = 200;
      std::string out = absl::StrCat(
          "\"", absl::CHexEscape(absl::string_view(v.bytes.data(), std::min(v.bytes.size(), kMaxChars))), "\"");
      if (v.bytes.size() > kMaxChars) absl::StrAppend(&out, "...");
      return out;
    }
    case GgufValueType::kArray: {
      std::string out = "[";
      size_t shown = 0;
      absl::Status st = ForEachGgufArrayElement(v, [&](const GgufValue& elem) {
        if (shown == max_elems) return false;
        absl::StrAppend(&out, shown > 0 ? ", " : "", FormatGgufValue(elem, max_elems));
        ++shown;
        return true;
      });
      if (!st.ok()) return absl::StrCat("<", st.message(), ">");
      if (shown < v.count) absl::StrAppend(&out, shown > 0 ? ", " : "", "... (", v.count, " total)");
      return out + "]";
    }
    default: {
      absl::StatusOr<int64_t> i = GgufValueAsInt(v);
      return i.ok() ? absl::StrCat(*i) : absl::StrCat("<", i.status().message(), ">");
    }
  }
}

}  // namespace beacon
