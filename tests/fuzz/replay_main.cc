// Runs LLVMFuzzerTestOneInput once over every regular file in a directory
// (argv[1]): the seed corpus and every crash input found so far, replayed in
// each ordinary test run. Fails when the directory is missing or empty, so a
// broken corpus path cannot pass silently.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  std::error_code ec;
  std::filesystem::directory_iterator it(argv[1], ec);
  if (ec) {
    std::fprintf(stderr, "cannot read %s: %s\n", argv[1], ec.message().c_str());
    return 1;
  }
  int files = 0;
  for (const auto& entry : it) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "cannot read %s\n", entry.path().c_str());
      return 1;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++files;
  }
  if (files == 0) {
    std::fprintf(stderr, "%s holds no corpus files\n", argv[1]);
    return 1;
  }
  std::printf("replayed %d corpus files\n", files);
  return 0;
}
