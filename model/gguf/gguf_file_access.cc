// Typed metadata getters and tensor lookup of GgufFile. Every value reached
// here was validated by Parse(), so decoding stays within the file; what can
// still fail is a type or range that does not fit the request.
#include <cfloat>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "model/gguf/gguf_file.h"

namespace beacon {
namespace {

// A double that converts to float without leaving float's range (NaN and
// infinities convert as themselves).
bool FitsFloat(double d) { return !std::isfinite(d) || std::fabs(d) <= FLT_MAX; }

absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

absl::Status GgufFile::KeyError(std::string_view key, const absl::Status& cause) const {
  return absl::Status(cause.code(), absl::StrCat(name_, ": metadata '", AbslView(key), "' ", cause.message()));
}

absl::StatusOr<const GgufValue*> GgufFile::Require(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    return absl::NotFoundError(absl::StrCat(name_, ": metadata key '", AbslView(key), "' not found"));
  }
  return v;
}

absl::Status GgufFile::ArrayOf(std::string_view key, const GgufValue** out) const {
  absl::StatusOr<const GgufValue*> v = Require(key);
  if (!v.ok()) return v.status();
  if (!(*v)->is_array()) {
    return KeyError(key,
                    absl::InvalidArgumentError(absl::StrCat("has type ", (*v)->TypeName(), ", expected an array")));
  }
  *out = *v;
  return absl::OkStatus();
}

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Require(key);
  if (!v.ok()) return v.status();
  absl::StatusOr<std::string_view> s = GgufValueAsString(**v);
  if (!s.ok()) return KeyError(key, s.status());
  return std::string(*s);
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Require(key);
  if (!v.ok()) return v.status();
  absl::StatusOr<int64_t> i = GgufValueAsInt(**v);
  if (!i.ok()) return KeyError(key, i.status());
  return *i;
}

absl::StatusOr<uint32_t> GgufFile::GetU32(std::string_view key) const {
  absl::StatusOr<int64_t> i = GetInt(key);
  if (!i.ok()) return i.status();
  if (*i < 0 || *i > std::numeric_limits<uint32_t>::max()) {
    return KeyError(key, absl::InvalidArgumentError(absl::StrCat("value ", *i, " does not fit in uint32")));
  }
  return static_cast<uint32_t>(*i);
}

absl::StatusOr<float> GgufFile::GetF32(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Require(key);
  if (!v.ok()) return v.status();
  absl::StatusOr<double> d = GgufValueAsDouble(**v);
  if (!d.ok()) return KeyError(key, d.status());
  if (!FitsFloat(*d)) {
    return KeyError(key, absl::InvalidArgumentError(absl::StrCat("value ", *d, " does not fit in float")));
  }
  return static_cast<float>(*d);
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = Require(key);
  if (!v.ok()) return v.status();
  absl::StatusOr<bool> b = GgufValueAsBool(**v);
  if (!b.ok()) return KeyError(key, b.status());
  return *b;
}

absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* array;
  if (absl::Status st = ArrayOf(key, &array); !st.ok()) return st;
  if (array->elem_type != GgufValueType::kString) {
    return KeyError(
        key, absl::InvalidArgumentError(absl::StrCat("has type ", array->TypeName(), ", expected ARRAY[STRING]")));
  }
  std::vector<std::string> out;
  out.reserve(array->count);  // bounded: each element took at least 8 file bytes
  absl::Status st = ForEachGgufArrayElement(*array, [&](const GgufValue& e) {
    out.emplace_back(e.bytes);
    return true;
  });
  if (!st.ok()) return KeyError(key, st);
  return out;
}

absl::StatusOr<std::vector<int32_t>> GgufFile::GetI32Array(std::string_view key) const {
  const GgufValue* array;
  if (absl::Status st = ArrayOf(key, &array); !st.ok()) return st;
  if (!GgufIsIntegerType(array->elem_type)) {
    return KeyError(
        key, absl::InvalidArgumentError(absl::StrCat("has type ", array->TypeName(), ", expected an integer array")));
  }
  std::vector<int32_t> out;
  out.reserve(array->count);  // bounded: each element took at least 1 file byte
  absl::Status error;
  absl::Status st = ForEachGgufArrayElement(*array, [&](const GgufValue& e) {
    absl::StatusOr<int64_t> i = GgufValueAsInt(e);
    if (!i.ok() || *i < std::numeric_limits<int32_t>::min() || *i > std::numeric_limits<int32_t>::max()) {
      error = absl::InvalidArgumentError(
          absl::StrCat("element ", out.size(), " (offset ", e.offset, ") does not fit in int32"));
      return false;
    }
    out.push_back(static_cast<int32_t>(*i));
    return true;
  });
  if (!st.ok()) return KeyError(key, st);
  if (!error.ok()) return KeyError(key, error);
  return out;
}

absl::StatusOr<std::vector<float>> GgufFile::GetF32Array(std::string_view key) const {
  const GgufValue* array;
  if (absl::Status st = ArrayOf(key, &array); !st.ok()) return st;
  if (!GgufIsFloatType(array->elem_type)) {
    return KeyError(
        key, absl::InvalidArgumentError(absl::StrCat("has type ", array->TypeName(), ", expected a float array")));
  }
  std::vector<float> out;
  out.reserve(array->count);
  absl::Status error;
  absl::Status st = ForEachGgufArrayElement(*array, [&](const GgufValue& e) {
    const double d = *GgufValueAsDouble(e);
    if (!FitsFloat(d)) {
      error = absl::InvalidArgumentError(absl::StrCat("element ", out.size(), " value ", d, " does not fit in float"));
      return false;
    }
    out.push_back(static_cast<float>(d));
    return true;
  });
  if (!st.ok()) return KeyError(key, st);
  if (!error.ok()) return KeyError(key, error);
  return out;
}

absl::StatusOr<GgufTensor> GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) {
    return absl::NotFoundError(absl::StrCat(name_, ": tensor '", AbslView(name), "' not found"));
  }
  const GgufTensorInfo& info = tensors_[it->second];
  if (!IsSupportedDType(info.ggml_type) || !info.size_known) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": tensor ", AbslView(name), " has unsupported type ", GgmlTypeLabel(info.ggml_type)));
  }
  GgufTensor t;
  t.name = info.name;
  t.n_dims = info.n_dims;
  t.ne = info.ne;
  t.ggml_type = info.ggml_type;
  t.dtype = static_cast<DType>(info.ggml_type);
  t.data = reinterpret_cast<const uint8_t*>(bytes_.data()) + data_offset_ + info.offset;
  t.nbytes = info.nbytes;
  return t;
}

}  // namespace beacon
