// LoadModel: picks the loader from the spec's form (see model_loader.h).
#include "model/model_loader.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace beacon {
namespace {

// Seed of "dummy:<config>" when no "@SEED" is given.
constexpr uint64_t kDefaultDummySeed = 0;

bool StartsWithGgufMagic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, sizeof(magic)) && std::memcmp(magic, "GGUF", 4) == 0;
}

// "path@123" -> ("path", 123). A suffix after the last '@' that is not all
// digits is part of the path ("a@b/config.json").
std::pair<std::string, uint64_t> SplitSeed(std::string_view spec) {
  const size_t at = spec.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view digits = spec.substr(at + 1);
    uint64_t seed = 0;
    const char* end = digits.data() + digits.size();
    auto [ptr, ec] = std::from_chars(digits.data(), end, seed);
    if (!digits.empty() && ec == std::errc() && ptr == end) {
      return {std::string(spec.substr(0, at)), seed};
    }
  }
  return {std::string(spec), kDefaultDummySeed};
}

absl::StatusOr<std::unique_ptr<LoadedModel>> Dispatch(std::string_view spec) {
  if (spec.starts_with("dummy:")) {
    spec.remove_prefix(6);
    auto [config_path, seed] = SplitSeed(spec);
    if (config_path.empty()) {
      return absl::InvalidArgumentError("model spec 'dummy:' needs a config.json path");
    }
    return LoadDummyModel(config_path, seed);
  }
  const std::string path(spec);
  if (path.empty()) return absl::InvalidArgumentError("empty model path");
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat("model path ", path, " does not exist"));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat model path ", path));
  }
  if (S_ISDIR(st.st_mode)) return LoadHfModel(path);
  if (absl::EndsWithIgnoreCase(path, ".gguf") || StartsWithGgufMagic(path)) {
    return LoadGgufModel(path);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "model path ", path, " is neither a GGUF file nor a directory with config.json (or use dummy:<config.json>)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(std::string_view spec) {
  absl::StatusOr<std::unique_ptr<LoadedModel>> model = Dispatch(spec);
  if (model.ok()) (*model)->source = std::string(spec);
  return model;
}

}  // namespace beacon
