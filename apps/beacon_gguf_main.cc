// beacon-gguf: what a GGUF file holds, as the engine reads it.
//
//   beacon-gguf types FILE   tensor count per type ("Q5_0 180"), one per line
//   beacon-gguf crc FILE     one JSON line per tensor the engine can read:
//                            {"name", "type", "elements", "crc32"}, crc32 of
//                            its float32 dequantisation (DequantizeRow) as
//                            little-endian bytes
//
// `crc` lets tests/reference/test_kquant_dequant.py compare our dequantiser
// with the `gguf` package's bit for bit on files of hundreds of megabytes
// without writing the floats out. Tensors of types the engine cannot read are
// listed by `types` and reported on stderr by `crc`.
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/dtype.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_types.h"
#include "util/cli_args.h"
#include "util/run_main.h"

namespace beacon {
namespace {

// CRC-32 (IEEE 802.3, reflected, as zlib.crc32), table-driven.
class Crc32 {
 public:
  Crc32() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table_[i] = c;
    }
  }
  void Update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) crc_ = table_[(crc_ ^ p[i]) & 0xFF] ^ (crc_ >> 8);
  }
  uint32_t value() const { return crc_ ^ 0xFFFFFFFFu; }

 private:
  uint32_t table_[256];
  uint32_t crc_ = 0xFFFFFFFFu;
};

const std::vector<cli::Command> kCommands = {
    {"types", "tensor count per type (\"Q5_0 180\"), one per line"},
    {"crc", "one JSON line per readable tensor: name, type, elements, crc32 of its float32 dequantisation"}};

int Main(int argc, char** argv) {
  const std::string cmd = argc >= 2 ? argv[1] : "";
  if (cli::IsHelpArg(cmd)) {
    std::printf("%s", cli::CommandsHelp("beacon-gguf", kCommands).c_str());
    return 0;
  }
  if (cmd != "types" && cmd != "crc") {
    std::fprintf(stderr, "%s", cli::CommandsHelp("beacon-gguf", kCommands).c_str());
    return 2;
  }
  cli::Args args;  // no options: FILE, and --help
  if (absl::Status s = args.Parse(argc, argv, 2); !s.ok()) {
    std::fprintf(stderr, "beacon-gguf: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (args.help()) {
    std::printf("%s", args.Help(absl::StrCat("usage: beacon-gguf ", cmd, " FILE")).c_str());
    return 0;
  }
  if (args.positional().size() != 1) {
    std::fprintf(stderr, "usage: beacon-gguf %s FILE\n", cmd.c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(args.positional()[0]);
  if (!file.ok()) {
    std::fprintf(stderr, "beacon-gguf: %s\n", std::string(file.status().message()).c_str());
    return 1;
  }
  if (cmd == "types") {
    std::map<std::string, int> counts;
    for (const GgufTensorInfo& t : (*file)->tensor_infos()) ++counts[GgmlTypeLabel(t.ggml_type)];
    for (const auto& [label, n] : counts) std::printf("%s %d\n", label.c_str(), n);
    return 0;
  }
  int unreadable = 0;
  for (const GgufTensorInfo& info : (*file)->tensor_infos()) {
    absl::StatusOr<GgufTensor> t = (*file)->FindTensor(info.name);
    if (!t.ok()) {
      std::fprintf(stderr, "beacon-gguf: %s\n", std::string(t.status().message()).c_str());
      ++unreadable;
      continue;
    }
    const int64_t cols = t->ne[0], rows = t->elements() / cols;
    const size_t row_bytes = DTypeRowBytes(t->dtype, cols);
    std::vector<float> row(cols);
    Crc32 crc;
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(t->dtype, t->data + row_bytes * r, row.data(), cols);
      crc.Update(row.data(), row.size() * sizeof(float));
    }
    std::printf("{\"name\": \"%s\", \"type\": \"%s\", \"elements\": %lld, \"crc32\": %u}\n",
                std::string(t->name).c_str(), std::string(DTypeName(t->dtype)).c_str(),
                static_cast<long long>(t->elements()), crc.value());
  }
  return unreadable == 0 ? 0 : 1;
}

}  // namespace
}  // namespace beacon

int main(int argc, char** argv) { return beacon::RunMain("beacon-gguf", beacon::Main, argc, argv); }
