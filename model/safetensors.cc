#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/hf_config.h"

namespace beacon {
namespace {

using json = nlohmann::json;

static_assert(std::endian::native == std::endian::little,
              "safetensors headers and data are little endian; add byte swapping");

// Header JSON larger than this is refused (the reference implementation's
// limit): it bounds the memory a hostile file can make the parser allocate.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

// Bytes per element of every dtype the format defines; 0 for unknown names.
size_t ElementBytes(absl::string_view dtype) {
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "BOOL" || dtype == "U8" || dtype == "I8" || dtype == "F8_E4M3" || dtype == "F8_E5M2") {
    return 1;
  }
  return 0;
}

std::optional<DType> EngineDType(absl::string_view dtype) {
  if (dtype == "F32") return DType::kF32;
  if (dtype == "F16") return DType::kF16;
  if (dtype == "BF16") return DType::kBF16;
  return std::nullopt;
}

}  // namespace

int64_t SafetensorsTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated not to overflow at Open()
  return n;
}

std::string SafetensorsTensor::ShapeString() const { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

absl::StatusOr<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ < 8) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": file of ", f->size_, " bytes is too short for a safetensors header"));
  }
  void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (m == MAP_FAILED) {
    f->size_ = 0;
    return absl::InternalError(absl::StrCat("mmap of ", path, " failed: ", std::strerror(errno)));
  }
  f->map_ = static_cast<const uint8_t*>(m);
  if (absl::Status s = f->Parse(); !s.ok()) return s;
  return std::shared_ptr<const SafetensorsFile>(std::move(f));
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), size_);
}

const SafetensorsTensor* SafetensorsFile::Find(absl::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::Status SafetensorsFile::Parse() {
  auto bad = [this](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(path_, ": ", parts...)); };
  uint64_t header_len;
  std::memcpy(&header_len, map_, 8);
  if (header_len > size_ - 8) {
    return bad("header length ", header_len, " exceeds the ", size_ - 8, " bytes after the length field");
  }
  if (header_len > kMaxHeaderBytes) return bad("header length ", header_len, " exceeds 100 MiB");
  const char* text = reinterpret_cast<const char*>(map_ + 8);
  const json header = json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return bad("header is not valid JSON");
  if (!header.is_object()) return bad("header is a JSON ", header.type_name(), ", not an object");

  const uint8_t* data = map_ + 8 + header_len;
  const uint64_t data_size = size_ - 8 - header_len;
  tensors_.reserve(header.size());
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    // A named copy: clang 14 cannot capture a structured binding.
    const std::string& tensor_name = name;
    auto bad_tensor = [&](auto&&... parts) { return bad("tensor ", tensor_name, ": ", parts...); };
    if (!entry.is_object()) return bad_tensor("entry is a JSON ", entry.type_name(), ", not an object");
    const auto dt = entry.find("dtype");
    const auto sh = entry.find("shape");
    const auto off = entry.find("data_offsets");
    if (dt == entry.end() || !dt->is_string()) return bad_tensor("'dtype' missing or not a string");
    if (sh == entry.end() || !sh->is_array()) return bad_tensor("'shape' missing or not an array");
    if (off == entry.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned()) {
      return bad_tensor("'data_offsets' must be two non-negative integers");
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype_name = dt->get<std::string>();
    const size_t elem = ElementBytes(t.dtype_name);
    if (elem == 0) return bad_tensor("unknown dtype '", t.dtype_name, "'");
    t.dtype = EngineDType(t.dtype_name);
    uint64_t numel = 1;
    for (const json& d : *sh) {
      if (!d.is_number_unsigned()) return bad_tensor("shape entries must be non-negative integers");
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, v, &numel) ||
          numel > static_cast<uint64_t>(INT64_MAX)) {
        return bad_tensor("shape ", sh->dump(), " overflows");
      }
      t.shape.push_back(static_cast<int64_t>(v));
    }
    uint64_t want_bytes;
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(elem), &want_bytes)) {
      return bad_tensor("shape ", sh->dump(), " overflows");
    }
    const uint64_t begin = (*off)[0].get<uint64_t>();
    const uint64_t end = (*off)[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return bad_tensor("data_offsets [", begin, ", ", end, "] out of bounds of the ", data_size, "-byte data section");
    }
    if (end - begin != want_bytes) {
      return bad_tensor("data_offsets span ", end - begin, " bytes but shape ", t.ShapeString(), " of ", t.dtype_name,
                        " needs ", want_bytes);
    }
    t.data = data + begin;
    t.nbytes = static_cast<size_t>(want_bytes);
    index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // Distinct tensors must not share bytes (a writer bug, or a crafted file).
  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& t : tensors_) {
    if (t.nbytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i - 1]->data + by_offset[i - 1]->nbytes > by_offset[i]->data) {
      return bad("tensors ", by_offset[i - 1]->name, " and ", by_offset[i]->name, " overlap");
    }
  }
  return absl::OkStatus();
}

// ---- SafetensorsCheckpoint ----------------------------------------------------

absl::Status SafetensorsCheckpoint::Add(std::shared_ptr<const SafetensorsFile> file) {
  const size_t fi = files_.size();
  for (const auto& t : file->tensors()) {
    const auto [it, inserted] = by_name_.try_emplace(t.name, fi, &t);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, " appears in both ",
                                                     files_[it->second.first]->path(), " and ", file->path()));
    }
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsCheckpoint> SafetensorsCheckpoint::OpenFiles(const std::vector<std::string>& paths) {
  SafetensorsCheckpoint ckpt;
  for (const auto& p : paths) {
    auto f = SafetensorsFile::Open(p);
    if (!f.ok()) return f.status();
    if (absl::Status s = ckpt.Add(*std::move(f)); !s.ok()) return s;
  }
  return ckpt;
}

absl::StatusOr<SafetensorsCheckpoint> SafetensorsCheckpoint::OpenDir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) return OpenFiles({single.string()});
  if (!fs::exists(index_path, ec)) {
    return absl::NotFoundError(absl::StrCat("no model.safetensors or model.safetensors.index.json in ", dir));
  }
  auto index = ReadJsonFile(index_path.string());
  if (!index.ok()) return index.status();
  const auto wm = index->is_object() ? index->find("weight_map") : index->end();
  if (wm == index->end() || !wm->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path.string(), ": 'weight_map' missing or not an object"));
  }
  std::set<std::string> shards;  // sorted: a deterministic opening order
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path.string(), ": weight_map entry for ", name, " is not a string"));
    }
    const std::string shard = file.get<std::string>();
    // A shard must be a plain file in `dir`: the index cannot point elsewhere.
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path.string(), ": shard name '", shard, "' for ", name, " is not a plain file name"));
    }
    shards.insert(shard);
  }
  std::vector<std::string> paths;
  paths.reserve(shards.size());
  for (const auto& s : shards) paths.push_back((fs::path(dir) / s).string());
  auto ckpt = OpenFiles(paths);
  if (!ckpt.ok()) return ckpt.status();
  for (const auto& [name, file] : wm->items()) {
    const std::string want = (fs::path(dir) / file.get<std::string>()).string();
    if (ckpt->Find(name) == nullptr || ckpt->FileOf(name) != want) {
      return absl::InvalidArgumentError(absl::StrCat(index_path.string(), ": weight_map places ", name, " in ", want,
                                                     " but that shard does not hold it"));
    }
  }
  return ckpt;
}

const SafetensorsTensor* SafetensorsCheckpoint::Find(absl::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second.second;
}

absl::StatusOr<const SafetensorsTensor*> SafetensorsCheckpoint::Get(absl::string_view name) const {
  const SafetensorsTensor* t = Find(name);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat("tensor ", name, " is missing from the checkpoint"));
  }
  if (!t->dtype.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " in ", FileOf(name), " has dtype ", t->dtype_name,
                                                   "; supported: F32, F16, BF16"));
  }
  return t;
}

const std::string& SafetensorsCheckpoint::FileOf(absl::string_view name) const {
  static const std::string kNone;
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? kNone : files_[it->second.first]->path();
}

std::vector<std::shared_ptr<const void>> SafetensorsCheckpoint::Mappings() const {
  return {files_.begin(), files_.end()};
}

}  // namespace beacon
