// Reader for the safetensors format (Hugging Face), memory-mapped.
//
// File layout: u64 little-endian N; N bytes of UTF-8 JSON; the data section.
// The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin,
// end]} with offsets relative to the data section; "__metadata__" (a string
// map) is ignored. Open() validates everything before returning: N against
// the file size, every entry's fields and types, offsets in bounds,
// end - begin == product(shape) * element size (with overflow checks), and
// no two tensors overlapping. A bad file is an INVALID_ARGUMENT naming the
// file and the tensor, never a crash.
//
// Every safetensors dtype is accepted at Open() so that a checkpoint holding
// an unrelated integer buffer still opens; SafetensorsCheckpoint::Get()
// refuses tensors whose dtype the engine cannot use (anything but F32, F16,
// BF16), naming tensor and dtype.
//
// Thread safety: immutable after Open(); safe to read from any thread.
#ifndef BEACON_MODEL_SAFETENSORS_H_
#define BEACON_MODEL_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/dtype.h"

namespace beacon {

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;      // as written in the file: "F32", "BF16", "I64", ...
  std::optional<DType> dtype;  // set for F32, F16 and BF16 only
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping; may be unaligned
  size_t nbytes = 0;

  int64_t numel() const;
  std::string ShapeString() const;  // "[64, 576]"
};

// One mapped .safetensors file.
class SafetensorsFile {
 public:
  static absl::StatusOr<std::shared_ptr<const SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(absl::string_view name) const;

 private:
  SafetensorsFile() = default;
  absl::Status Parse();

  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  absl::flat_hash_map<std::string, size_t> index_;
};

// The weights of one checkpoint directory: a single model.safetensors, or the
// shards listed by model.safetensors.index.json ("weight_map": name -> file).
class SafetensorsCheckpoint {
 public:
  // NOT_FOUND when the directory holds neither file; INVALID_ARGUMENT for a
  // bad index (shard names must be plain file names inside `dir`; a tensor the
  // index places in a shard must be there; a name in two shards is an error).
  static absl::StatusOr<SafetensorsCheckpoint> OpenDir(const std::string& dir);
  static absl::StatusOr<SafetensorsCheckpoint> OpenFiles(const std::vector<std::string>& paths);

  // nullptr when absent.
  const SafetensorsTensor* Find(absl::string_view name) const;
  // The tensor, checked: NOT_FOUND naming it when absent, INVALID_ARGUMENT
  // naming tensor and dtype when the dtype is not F32/F16/BF16.
  absl::StatusOr<const SafetensorsTensor*> Get(absl::string_view name) const;

  // The file (shard) a tensor was read from, for messages.
  const std::string& FileOf(absl::string_view name) const;
  // Owners of the mappings, for ModelWeights::keep_alive.
  std::vector<std::shared_ptr<const void>> Mappings() const;
  size_t num_tensors() const { return by_name_.size(); }

 private:
  absl::Status Add(std::shared_ptr<const SafetensorsFile> file);

  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  // name -> (file index, tensor pointer into that file)
  absl::flat_hash_map<std::string, std::pair<size_t, const SafetensorsTensor*>> by_name_;
};

}  // namespace beacon

#endif  // BEACON_MODEL_SAFETENSORS_H_
