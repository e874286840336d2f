// A parsed GGUF file (versions 2 and 3): metadata and tensor directory over
// bytes that are either memory-mapped (Open) or owned by the caller
// (FromBuffer).
//
// Layout (all little endian):
//   "GGUF" u32 version, u64 tensor_count, u64 kv_count
//   kv_count x  (string key, u32 value type, value)
//   tensor_count x (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
//                   u64 offset relative to the data section)
//   padding to `general.alignment` (default 32), then the data section.
// A string is a u64 length followed by that many bytes (no terminator).
//
// The file is untrusted: construction validates every length, count, type id,
// shape and tensor extent against the bytes actually present and fails with
// INVALID_ARGUMENT (a value that is wrong) or DATA_LOSS (bytes missing: a
// truncated file, data beyond the end), naming the file, the key or tensor,
// and the offset. After that, every accessor stays within the buffer.
//
// A GgufFile is immutable once built; const methods may be called from any
// thread. Views it returns (names, tensor data) live as long as the GgufFile
// (and, for FromBuffer, the caller's buffer).
#ifndef BEACON_MODEL_GGUF_GGUF_FILE_H_
#define BEACON_MODEL_GGUF_GGUF_FILE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/dtype.h"
#include "model/gguf/gguf_metadata.h"
#include "model/gguf/gguf_types.h"

namespace beacon {

inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr int kGgufMaxDims = 4;

// One entry of the tensor directory, as stored.
struct GgufTensorInfo {
  std::string_view name;
  int n_dims = 0;
  std::array<int64_t, kGgufMaxDims> ne = {1, 1, 1, 1};  // ne[0] is contiguous
  uint32_t ggml_type = 0;
  uint64_t offset = 0;       // relative to the data section
  uint64_t nbytes = 0;       // 0 when the type's size is unknown (see size_known)
  bool size_known = false;   // the ggml type has known geometry (GgmlTypeInfo)
  uint64_t info_offset = 0;  // file offset of this directory entry

  int64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

// A tensor the engine can read: its type is one of DType's.
struct GgufTensor {
  std::string_view name;
  int n_dims = 0;
  std::array<int64_t, kGgufMaxDims> ne = {1, 1, 1, 1};
  uint32_t ggml_type = 0;
  DType dtype = DType::kF32;
  const uint8_t* data = nullptr;  // within the file; alignment as the file gives it
  size_t nbytes = 0;

  int64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
 public:
  // Maps `path` read-only and parses it. NOT_FOUND when the path does not
  // exist; FAILED_PRECONDITION when it is not a readable regular file.
  // (A file truncated by another process while mapped raises SIGBUS on access:
  // model files are expected to be immutable while in use.)
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);

  // Parses `bytes`, which the caller keeps alive and unchanged for the
  // lifetime of the result. `name` labels error messages.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBuffer(std::string_view bytes, std::string name = "<buffer>");

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // may equal size() when no tensors
  std::string_view bytes() const { return bytes_; }

  // ---- Metadata. In file order; keys are unique. ----
  const std::vector<GgufKeyValue>& metadata() const { return kvs_; }
  bool Has(std::string_view key) const { return kv_index_.count(key) > 0; }
  // nullptr when absent.
  const GgufValue* Find(std::string_view key) const;

  // Typed getters: NOT_FOUND when the key is absent; INVALID_ARGUMENT naming
  // the key and both types when the stored type does not fit the request.
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  // Any integer type whose value fits.
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<uint32_t> GetU32(std::string_view key) const;
  // FLOAT32, or FLOAT64 within float range.
  absl::StatusOr<float> GetF32(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  // Arrays of any integer type whose every element fits in int32.
  absl::StatusOr<std::vector<int32_t>> GetI32Array(std::string_view key) const;
  // Arrays of FLOAT32, or FLOAT64 within float range.
  absl::StatusOr<std::vector<float>> GetF32Array(std::string_view key) const;

  // ---- Tensors. In file order; names are unique. ----
  const std::vector<GgufTensorInfo>& tensor_infos() const { return tensors_; }
  bool HasTensor(std::string_view name) const { return tensor_index_.count(name) > 0; }
  // NOT_FOUND when absent; INVALID_ARGUMENT "tensor X has unsupported type
  // Q6_K (14)" when its type is not a DType.
  absl::StatusOr<GgufTensor> FindTensor(std::string_view name) const;

 private:
  struct Mapping;
  GgufFile(std::string_view bytes, std::string name);

  absl::Status Parse();
  absl::Status ParseMetadata(ByteCursor& c, uint64_t kv_count);
  absl::Status ParseTensorInfos(ByteCursor& c, uint64_t tensor_count);
  absl::Status ParseTensorInfo(ByteCursor& c, GgufTensorInfo& t);
  absl::Status CheckTensorExtents() const;
  // The value of `key`, or NOT_FOUND naming the file and key.
  absl::StatusOr<const GgufValue*> Require(std::string_view key) const;
  // `cause` (a decoding error) with the file and key prefixed.
  absl::Status KeyError(std::string_view key, const absl::Status& cause) const;
  // The value of `key` when it is an array; NOT_FOUND or INVALID_ARGUMENT else.
  absl::Status ArrayOf(std::string_view key, const GgufValue** out) const;

  std::string_view bytes_;
  std::string name_;
  std::unique_ptr<Mapping> mapping_;  // set by Open
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> kvs_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace beacon

#endif  // BEACON_MODEL_GGUF_GGUF_FILE_H_
