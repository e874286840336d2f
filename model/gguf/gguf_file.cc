// Opening and validating a GGUF file. The typed accessors are in
// gguf_file_access.cc.
#include "model/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

// Hard limits on directory sizes. Real models have hundreds of keys and at
// most tens of thousands of tensors; anything beyond is a corrupt count.
constexpr uint64_t kMaxKeyValues = 1 << 20;
constexpr uint64_t kMaxTensors = 1 << 20;
// Smallest encodings that are read before any content check can reject them:
// an empty key with a BOOL value; an empty name with no dimensions.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

std::string Quoted(std::string_view s) {
  constexpr size_t kMax = 120;
  std::string out = absl::StrCat("'", absl::CHexEscape(absl::string_view(s.data(), std::min(s.size(), kMax))), "'");
  if (s.size() > kMax) out += "...";
  return out;
}

}  // namespace

struct GgufFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) munmap(addr, size);
  }
};

GgufFile::GgufFile(std::string_view bytes, std::string name) : bytes_(bytes), name_(std::move(name)) {}

GgufFile::~GgufFile() = default;

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  auto mapping = std::make_unique<Mapping>();
  if (st.st_size > 0) {
    mapping->size = static_cast<size_t>(st.st_size);
    void* addr = mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat("cannot map ", path));
    }
    mapping->addr = addr;
  }
  close(fd);  // the mapping keeps the file referenced
  std::string_view bytes(static_cast<const char*>(mapping->addr), mapping->size);
  std::unique_ptr<GgufFile> file(new GgufFile(bytes, path));
  file->mapping_ = std::move(mapping);
  if (absl::Status st = file->Parse(); !st.ok()) return st;
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(std::string_view bytes, std::string name) {
  std::unique_ptr<GgufFile> file(new GgufFile(bytes, std::move(name)));
  if (absl::Status st = file->Parse(); !st.ok()) return st;
  return file;
}

absl::Status GgufFile::Parse() {
  ByteCursor c(bytes_);
  std::string_view magic;
  if (!c.ReadBytes(4, &magic)) {
    return absl::DataLossError(
        absl::StrCat(name_, ": ", bytes_.size(), " bytes is too short for the GGUF magic at offset 0"));
  }
  if (magic != "GGUF") {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": bad magic ", Quoted(magic), " at offset 0 (expected 'GGUF'): not a GGUF file"));
  }
  if (!c.ReadU32(&version_)) {
    return absl::DataLossError(absl::StrCat(name_, ": truncated at the version field (offset 4)"));
  }
  if (version_ != 2 && version_ != 3) {
    const bool swapped = version_ == 0x02000000u || version_ == 0x03000000u;
    return absl::InvalidArgumentError(absl::StrCat(name_, ": unsupported GGUF version ", version_,
                                                   " at offset 4 (supported: 2, 3)",
                                                   swapped ? "; the file looks big-endian" : ""));
  }
  uint64_t tensor_count, kv_count;
  if (!c.ReadU64(&tensor_count) || !c.ReadU64(&kv_count)) {
    return absl::DataLossError(absl::StrCat(name_, ": truncated in the header counts (offset ", c.pos(), ")"));
  }
  if (tensor_count > kMaxTensors) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": tensor count ", tensor_count, " at offset 8 is absurd (limit ", kMaxTensors, ")"));
  }
  if (kv_count > kMaxKeyValues) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": metadata count ", kv_count, " at offset 16 is absurd (limit ", kMaxKeyValues, ")"));
  }
  if (absl::Status st = ParseMetadata(c, kv_count); !st.ok()) return st;

  if (const GgufValue* v = Find("general.alignment"); v != nullptr) {
    absl::StatusOr<uint32_t> a = GetU32("general.alignment");
    if (!a.ok()) return a.status();
    if (*a == 0 || (*a & (*a - 1)) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": general.alignment ", *a, " at offset ", v->offset, " is not a power of two"));
    }
    alignment_ = *a;
  }
  if (absl::Status st = ParseTensorInfos(c, tensor_count); !st.ok()) return st;
  // The data section starts at the next multiple of the alignment; a file
  // without tensors may end before it.
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  return CheckTensorExtents();
}

absl::Status GgufFile::ParseMetadata(ByteCursor& c, uint64_t kv_count) {
  if (kv_count > c.remaining() / kMinKeyValueBytes) {
    return absl::DataLossError(absl::StrCat(name_, ": ", kv_count, " metadata entries cannot fit in the remaining ",
                                            c.remaining(), " bytes after offset ", c.pos(), " (truncated file?)"));
  }
  kvs_.reserve(kv_count);
  for (uint64_t i = 0; i < kv_count; ++i) {
    const uint64_t at = c.pos();
    uint64_t len;
    std::string_view key;
    if (!c.ReadU64(&len)) {
      return absl::DataLossError(
          absl::StrCat(name_, ": truncated in metadata entry ", i, " (key length at offset ", at, ")"));
    }
    if (!c.ReadBytes(len, &key)) {
      return absl::DataLossError(absl::StrCat(name_, ": metadata entry ", i, " key length ", len, " at offset ", at,
                                              " exceeds the remaining ", c.remaining(), " bytes"));
    }
    if (key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": metadata entry ", i, " has an empty key at offset ", at));
    }
    const std::string where = absl::StrCat(name_, ": metadata ", Quoted(key));
    uint32_t type;
    if (!c.ReadU32(&type)) {
      return absl::DataLossError(absl::StrCat(where, ": truncated at the value type (offset ", c.pos(), ")"));
    }
    absl::StatusOr<GgufValue> value = ReadGgufValue(c, static_cast<GgufValueType>(type), where);
    if (!value.ok()) return value.status();
    if (!kv_index_.emplace(key, kvs_.size()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": duplicate metadata key ", Quoted(key), " at offset ", at));
    }
    kvs_.push_back(GgufKeyValue{key, *value});
  }
  return absl::OkStatus();
}

absl::Status GgufFile::ParseTensorInfos(ByteCursor& c, uint64_t tensor_count) {
  if (tensor_count > c.remaining() / kMinTensorInfoBytes) {
    return absl::DataLossError(absl::StrCat(name_, ": ", tensor_count, " tensor infos cannot fit in the remaining ",
                                            c.remaining(), " bytes after offset ", c.pos(), " (truncated file?)"));
  }
  tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo t;
    if (absl::Status st = ParseTensorInfo(c, t); !st.ok()) return st;
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": duplicate tensor name ", Quoted(t.name), " at offset ", t.info_offset));
    }
    tensors_.push_back(t);
  }
  return absl::OkStatus();
}

absl::Status GgufFile::ParseTensorInfo(ByteCursor& c, GgufTensorInfo& t) {
  t.info_offset = c.pos();
  uint64_t len;
  if (!c.ReadU64(&len)) {
    return absl::DataLossError(absl::StrCat(name_, ": truncated at a tensor name (offset ", t.info_offset, ")"));
  }
  if (!c.ReadBytes(len, &t.name)) {
    return absl::DataLossError(absl::StrCat(name_, ": tensor name length ", len, " at offset ", t.info_offset,
                                            " exceeds the remaining ", c.remaining(), " bytes"));
  }
  if (t.name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": empty tensor name at offset ", t.info_offset));
  }
  const std::string where = absl::StrCat(name_, ": tensor ", Quoted(t.name));
  auto truncated = [&](const char* field) {
    return absl::DataLossError(absl::StrCat(where, ": truncated at ", field, " (offset ", c.pos(), ")"));
  };
  uint32_t n_dims;
  if (!c.ReadU32(&n_dims)) return truncated("n_dims");
  if (n_dims < 1 || n_dims > kGgufMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": n_dims ", n_dims, " at offset ", c.pos() - 4,
                                                   " is out of range [1, ", kGgufMaxDims, "]"));
  }
  t.n_dims = static_cast<int>(n_dims);
  int64_t elements = 1;
  for (int d = 0; d < t.n_dims; ++d) {
    uint64_t raw;
    if (!c.ReadU64(&raw)) return truncated("a dimension");
    if (raw == 0 || raw > static_cast<uint64_t>(INT64_MAX)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ne[", d, "] = ", static_cast<int64_t>(raw),
                                                     " at offset ", c.pos() - 8, " must be positive"));
    }
    t.ne[d] = static_cast<int64_t>(raw);
    if (__builtin_mul_overflow(elements, t.ne[d], &elements)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the element count overflows at ne[", d, "] (offset ", c.pos() - 8, ")"));
    }
  }
  if (!c.ReadU32(&t.ggml_type)) return truncated("the type");
  if (!c.ReadU64(&t.offset)) return truncated("the data offset");

  const GgmlTypeTraits traits = GgmlTypeInfo(t.ggml_type);
  if (traits.known()) {
    if (t.ne[0] % traits.block_elems != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": row length ", t.ne[0], " is not a multiple of the block size ", traits.block_elems,
                       " of type ", GgmlTypeLabel(t.ggml_type), " (entry at offset ", t.info_offset, ")"));
    }
    const uint64_t blocks = static_cast<uint64_t>(elements / traits.block_elems);
    if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(traits.block_bytes), &t.nbytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": byte size overflows (entry at offset ", t.info_offset, ")"));
    }
    t.size_known = true;
  }
  if (t.offset % alignment_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": data offset ", t.offset, " (at offset ", c.pos() - 8,
                                                   ") is not a multiple of the alignment ", alignment_));
  }
  return absl::OkStatus();
}

absl::Status GgufFile::CheckTensorExtents() const {
  if (tensors_.empty()) return absl::OkStatus();
  const uint64_t size = bytes_.size();
  if (data_offset_ > size) {
    return absl::DataLossError(absl::StrCat(name_, ": the data section would start at offset ", data_offset_,
                                            ", past the end of the file (", size, " bytes)"));
  }
  const uint64_t avail = size - data_offset_;
  for (const GgufTensorInfo& t : tensors_) {
    if (!t.size_known) continue;  // reported when the tensor is asked for
    if (t.offset > avail || t.nbytes > avail - t.offset) {
      return absl::DataLossError(absl::StrCat(name_, ": tensor ", Quoted(t.name), ": ", t.nbytes,
                                              " bytes at data offset ", t.offset, " (file offset ", data_offset_, " + ",
                                              t.offset, ") run past the end of the file (", size, " bytes)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace beacon
