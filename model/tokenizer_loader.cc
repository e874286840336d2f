#include "model/tokenizer_loader.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf_loader.h"
#include "model/hf_tokenizer_json.h"
#include "util/utf8.h"

namespace beacon {
namespace {

namespace fs = std::filesystem;

// Templates are a few KiB; a larger file is not one (and is not read whole).
constexpr int64_t kMaxTemplateBytes = int64_t{1} << 20;

absl::StatusOr<TokenizerData> FromHfDir(const std::string& dir) {
  const fs::path json_path = fs::path(dir) / "tokenizer.json";
  std::error_code ec;
  if (!fs::exists(json_path, ec)) {
    return absl::NotFoundError(absl::StrCat("tokenizer ", dir, ": the directory has no tokenizer.json"));
  }
  absl::StatusOr<TokenizerData> data = ReadHfTokenizerJson(json_path.string());
  if (!data.ok()) return data.status();
  if (absl::Status s = UseChatTemplateJinja(dir, &*data); !s.ok()) return s;
  return data;
}

absl::StatusOr<TokenizerData> FromGguf(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<TokenizerData> data = ReadGgufTokenizer(**file);
  if (!data.ok()) {
    return absl::Status(data.status().code(), absl::StrCat("tokenizer ", path, ": ", data.status().message()));
  }
  return data;
}

}  // namespace

absl::StatusOr<TokenizerData> LoadTokenizerData(std::string_view spec) {
  const std::string path(spec);
  if (path.empty()) return absl::InvalidArgumentError("tokenizer: empty path");
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat("tokenizer ", path, " does not exist"));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat tokenizer ", path));
  }
  if (S_ISDIR(st.st_mode)) return FromHfDir(path);
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  const bool gguf = in.read(magic, sizeof(magic)) && std::string_view(magic, 4) == "GGUF";
  if (gguf) return FromGguf(path);
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer ", path, " is neither a GGUF file nor a directory with tokenizer.json"));
}

absl::StatusOr<std::string> ReadChatTemplateFile(std::string_view spec) {
  const std::string path(spec);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("chat template ", path, " is a directory, not a file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("chat template ", path, " cannot be read"));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size > kMaxTemplateBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat template ", path, " is ", size, " bytes; at most ", kMaxTemplateBytes));
  }
  in.seekg(0);
  std::ostringstream text;
  text << in.rdbuf();
  std::string out = text.str();
  if (out.find_first_not_of(" \t\r\n") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("chat template ", path, " is empty"));
  }
  if (out.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("chat template ", path, " holds NUL bytes: not a text file"));
  }
  if (!IsValidUtf8(out)) return absl::InvalidArgumentError(absl::StrCat("chat template ", path, " is not valid UTF-8"));
  return out;
}

absl::Status UseChatTemplateJinja(const std::string& dir, TokenizerData* data) {
  const fs::path path = fs::path(dir) / "chat_template.jinja";
  std::error_code ec;
  if (!fs::exists(path, ec)) return absl::OkStatus();
  absl::StatusOr<std::string> t = ReadChatTemplateFile(path.string());
  if (!t.ok()) return t.status();
  data->chat_template = *std::move(t);
  return absl::OkStatus();
}

}  // namespace beacon
