// libFuzzer target for the readers of a Hugging Face checkpoint, which an
// operator may take from anywhere: the safetensors header and data section
// (model/safetensors.h) and config.json (model/hf_config.h).
//
// The first byte picks the reader:
//   - even: the rest is a .safetensors file. It is written to an anonymous
//     in-memory file (memfd) and opened through its /proc path, as a file on
//     disk would be (mmap included). Any input must open or fail with a
//     Status; when it opens, every tensor's bytes are read (so ASan sees an
//     extent outside the mapping) and its shape's element count is checked
//     against its byte count.
//   - odd: the rest is config.json, parsed (depth-limited as a server's JSON
//     is) and read by ParseHfConfig, strict and with unsupported features
//     ignored.
//
// Built with -fsanitize=fuzzer,address,undefined by `make fuzz`;
// replay_main.cc drives the same entry point over tests/fuzz/model_files_corpus.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kernels/cpu/dtype.h"
#include "model/hf_config.h"
#include "model/safetensors.h"
#include "nlohmann/json.hpp"
#include "tests/fuzz/json_depth.h"

namespace {

void FuzzSafetensors(std::string_view bytes) {
  const int fd = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  auto file = beacon::SafetensorsFile::Open("/proc/self/fd/" + std::to_string(fd));
  if (file.ok()) {
    volatile uint8_t sink = 0;
    for (const beacon::SafetensorsTensor& t : (*file)->tensors()) {
      for (size_t i = 0; i < t.nbytes; ++i) sink = sink ^ t.data[i];
      if (t.dtype.has_value() && beacon::DTypeRowBytes(*t.dtype, t.numel()) != t.nbytes) {
        std::abort();  // Open promised end - begin == numel * element size
      }
      if ((*file)->Find(t.name) != &t) std::abort();
    }
  }
  close(fd);
}

void FuzzConfig(std::string_view text) {
  if (beacon::fuzz::JsonDepth(text) > beacon::fuzz::kMaxJsonDepth) return;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return;
  for (bool ignore : {false, true}) {
    beacon::HfConfigOptions options;
    options.ignore_unsupported_features = ignore;
    auto config = beacon::ParseHfConfig(j, "config.json", options);
    // A config that parses has passed ModelConfig::Validate: nothing else to check here.
    volatile bool sink = config.ok();
    (void)sink;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    FuzzSafetensors(rest);
  } else {
    FuzzConfig(rest);
  }
  return 0;
}
