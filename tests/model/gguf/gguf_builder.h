// A GGUF writer for tests: builds a file image from metadata and tensors,
// valid by default, with hooks to write invalid ones (raw value encodings,
// explicit offsets, overridden counts, any n_dims or type id).
//
// Header-only so that every test binary can include it without a build rule.
#ifndef BEACON_TESTS_ENGINE_GGUF_GGUF_BUILDER_H_
#define BEACON_TESTS_ENGINE_GGUF_GGUF_BUILDER_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "model/gguf/gguf_types.h"

namespace beacon::test {

inline void PutU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<char*>(&v), 4); }
inline void PutU64(std::string& out, uint64_t v) { out.append(reinterpret_cast<char*>(&v), 8); }
inline void PutString(std::string& out, const std::string& s) {
  PutU64(out, s.size());
  out += s;
}
template <typename T>
std::string Bytes(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(T));
}

// The encoding of an array value: element type, count, elements.
template <typename T>
std::string EncodeArray(GgufValueType elem, const std::vector<T>& values) {
  std::string out;
  PutU32(out, static_cast<uint32_t>(elem));
  PutU64(out, values.size());
  for (const T& v : values) out += Bytes(v);
  return out;
}
inline std::string EncodeStringArray(const std::vector<std::string>& values) {
  std::string out;
  PutU32(out, static_cast<uint32_t>(GgufValueType::kString));
  PutU64(out, values.size());
  for (const std::string& v : values) PutString(out, v);
  return out;
}
// Nested: an array whose elements are the given array encodings.
inline std::string EncodeArrayOfArrays(const std::vector<std::string>& encoded_arrays) {
  std::string out;
  PutU32(out, static_cast<uint32_t>(GgufValueType::kArray));
  PutU64(out, encoded_arrays.size());
  for (const std::string& a : encoded_arrays) out += a;
  return out;
}

// Bytes of a tensor of shape `ne` and ggml type `type` (known types only).
inline size_t GgmlTensorBytes(const std::vector<int64_t>& ne, uint32_t type) {
  const GgmlTypeTraits t = GgmlTypeInfo(type);
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return static_cast<size_t>(n / t.block_elems * t.block_bytes);
}

// Tensor payloads.
inline std::string F32Data(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}
inline std::string F16Data(const std::vector<float>& v) {
  std::string out;
  for (float f : v) out += Bytes(Fp32ToFp16(f));
  return out;
}
inline std::string BF16Data(const std::vector<float>& v) {
  std::string out;
  for (float f : v) out += Bytes(Fp32ToBf16(f));
  return out;
}
// Deterministic filler that is a valid encoding for every type whose scale
// fields are fp16: each scale is 1/64, quants/other bytes a byte pattern.
inline std::string PatternData(const std::vector<int64_t>& ne, uint32_t type, uint32_t seed = 1) {
  std::string out(GgmlTensorBytes(ne, type), '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : out) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return out;
}

class GgufBuilder {
 public:
  GgufBuilder& Version(uint32_t v) {
    version_ = v;
    return *this;
  }
  // The alignment used to lay out tensor data; Alignment() also writes the
  // general.alignment key, LayoutAlignment() only lays out.
  GgufBuilder& Alignment(uint32_t a) {
    align_ = a;
    return U32("general.alignment", a);
  }
  GgufBuilder& LayoutAlignment(uint32_t a) {
    align_ = a;
    return *this;
  }
  GgufBuilder& TensorCount(uint64_t n) {
    tensor_count_ = n;
    return *this;
  }
  GgufBuilder& KvCount(uint64_t n) {
    kv_count_ = n;
    return *this;
  }

  // A metadata entry: `encoded` is written verbatim after the type id.
  // Replaces an entry of the same key, keeping its position.
  GgufBuilder& Raw(const std::string& key, uint32_t type, std::string encoded) {
    for (auto& kv : kvs_) {
      if (kv.key == key) {
        kv.type = type;
        kv.encoded = std::move(encoded);
        return *this;
      }
    }
    kvs_.push_back({key, type, std::move(encoded)});
    return *this;
  }
  GgufBuilder& Remove(const std::string& key) {
    std::erase_if(kvs_, [&](const Kv& kv) { return kv.key == key; });
    return *this;
  }
  GgufBuilder& U8(const std::string& k, uint8_t v) { return Scalar(k, GgufValueType::kUint8, v); }
  GgufBuilder& I8(const std::string& k, int8_t v) { return Scalar(k, GgufValueType::kInt8, v); }
  GgufBuilder& U16(const std::string& k, uint16_t v) { return Scalar(k, GgufValueType::kUint16, v); }
  GgufBuilder& I16(const std::string& k, int16_t v) { return Scalar(k, GgufValueType::kInt16, v); }
  GgufBuilder& U32(const std::string& k, uint32_t v) { return Scalar(k, GgufValueType::kUint32, v); }
  GgufBuilder& I32(const std::string& k, int32_t v) { return Scalar(k, GgufValueType::kInt32, v); }
  GgufBuilder& U64(const std::string& k, uint64_t v) { return Scalar(k, GgufValueType::kUint64, v); }
  GgufBuilder& I64(const std::string& k, int64_t v) { return Scalar(k, GgufValueType::kInt64, v); }
  GgufBuilder& F32(const std::string& k, float v) { return Scalar(k, GgufValueType::kFloat32, v); }
  GgufBuilder& F64(const std::string& k, double v) { return Scalar(k, GgufValueType::kFloat64, v); }
  GgufBuilder& Bool(const std::string& k, bool v) { return Scalar(k, GgufValueType::kBool, static_cast<uint8_t>(v)); }
  GgufBuilder& Str(const std::string& k, const std::string& v) {
    std::string e;
    PutString(e, v);
    return Raw(k, static_cast<uint32_t>(GgufValueType::kString), std::move(e));
  }
  GgufBuilder& StrArray(const std::string& k, const std::vector<std::string>& v) {
    return Raw(k, static_cast<uint32_t>(GgufValueType::kArray), EncodeStringArray(v));
  }
  GgufBuilder& I32Array(const std::string& k, const std::vector<int32_t>& v) {
    return Raw(k, static_cast<uint32_t>(GgufValueType::kArray), EncodeArray(GgufValueType::kInt32, v));
  }
  GgufBuilder& F32Array(const std::string& k, const std::vector<float>& v) {
    return Raw(k, static_cast<uint32_t>(GgufValueType::kArray), EncodeArray(GgufValueType::kFloat32, v));
  }

  // A tensor whose data is laid out after the previous one at the next
  // multiple of the alignment. `ne` is written as given (any length).
  GgufBuilder& Tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type, std::string data) {
    RemoveTensor(name);
    tensors_.push_back({name, std::move(ne), type, std::move(data), std::nullopt});
    return *this;
  }
  // Patterned data of the right size for a known type.
  GgufBuilder& Tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type) {
    std::string data = PatternData(ne, type, static_cast<uint32_t>(tensors_.size() + 1));
    return Tensor(name, std::move(ne), type, std::move(data));
  }
  // A directory entry with an explicit data offset and no data of its own.
  GgufBuilder& TensorAt(const std::string& name, std::vector<int64_t> ne, uint32_t type, uint64_t offset) {
    tensors_.push_back({name, std::move(ne), type, "", offset});
    return *this;
  }
  GgufBuilder& RemoveTensor(const std::string& name) {
    std::erase_if(tensors_, [&](const TensorSpec& t) { return t.name == name; });
    return *this;
  }

  std::string Build() const {
    std::string out = "GGUF";
    PutU32(out, version_);
    PutU64(out, tensor_count_.value_or(tensors_.size()));
    PutU64(out, kv_count_.value_or(kvs_.size()));
    for (const Kv& kv : kvs_) {
      PutString(out, kv.key);
      PutU32(out, kv.type);
      out += kv.encoded;
    }
    std::vector<uint64_t> offsets;
    uint64_t cursor = 0;
    for (const TensorSpec& t : tensors_) {
      uint64_t offset = t.offset.value_or(AlignUp(cursor));
      if (!t.offset.has_value()) cursor = offset + t.data.size();
      offsets.push_back(offset);
      PutString(out, t.name);
      PutU32(out, static_cast<uint32_t>(t.ne.size()));
      for (int64_t d : t.ne) PutU64(out, static_cast<uint64_t>(d));
      PutU32(out, t.type);
      PutU64(out, offset);
    }
    if (tensors_.empty()) return out;
    out.resize(AlignUp(out.size()), '\0');
    const size_t data_start = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (tensors_[i].offset.has_value()) continue;
      out.resize(data_start + offsets[i], '\0');
      out += tensors_[i].data;
    }
    return out;
  }

 private:
  struct Kv {
    std::string key;
    uint32_t type;
    std::string encoded;
  };
  struct TensorSpec {
    std::string name;
    std::vector<int64_t> ne;
    uint32_t type;
    std::string data;
    std::optional<uint64_t> offset;
  };

  template <typename T>
  GgufBuilder& Scalar(const std::string& k, GgufValueType type, T v) {
    return Raw(k, static_cast<uint32_t>(type), Bytes(v));
  }
  uint64_t AlignUp(uint64_t x) const { return (x + align_ - 1) / align_ * align_; }

  uint32_t version_ = 3;
  uint32_t align_ = 32;
  std::optional<uint64_t> tensor_count_, kv_count_;
  std::vector<Kv> kvs_;
  std::vector<TensorSpec> tensors_;
};

}  // namespace beacon::test

#endif  // BEACON_TESTS_ENGINE_GGUF_GGUF_BUILDER_H_
