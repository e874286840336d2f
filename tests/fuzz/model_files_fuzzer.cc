// libFuzzer target for the readers of a Hugging Face checkpoint, which an
// operator may take from anywhere: the safetensors header and data section
// (model/safetensors.h), config.json (model/hf_config.h), tokenizer.json and
// tokenizer_config.json (model/hf_tokenizer_json.h).
//
// Each input is written to files and read through the real loaders, as files
// on disk would be: ReadJsonFile's own depth limit and every check on the way
// (issue 46: no depth shortcut here). The first byte picks the reader:
//   - even: the rest is a .safetensors file, in an anonymous in-memory file
//     (memfd) opened through its /proc path (mmap included). Any input must
//     open or fail with a Status; when it opens, every tensor's bytes are read
//     (so ASan sees an extent outside the mapping) and its shape's element
//     count is checked against its byte count.
//   - 1 (mod 4): the rest is config.json, read by ParseHfConfigFile, strict
//     and with unsupported features ignored.
//   - 3 (mod 4): the rest is tokenizer.json, then, after a NUL byte if there
//     is one, tokenizer_config.json, read by ReadHfTokenizerJson. A file that
//     reads gives a vocabulary no larger than the file's entries allow, and
//     its special ids inside it.
//
// Built with -fsanitize=fuzzer,address,undefined by `make fuzz`;
// replay_main.cc drives the same entry point over tests/fuzz/model_files_corpus.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kernels/cpu/dtype.h"
#include "model/hf_config.h"
#include "model/hf_tokenizer_json.h"
#include "model/safetensors.h"

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

// A directory of this process's own, for the JSON files (created once).
const std::string& Dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/beacon-fuzz-model-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) std::abort();
    return std::string(tmpl);
  }();
  return dir;
}

// Writes `text` to Dir()/name (replacing it), or removes the file when
// `text` is null.
void Put(const char* name, const std::string_view* text) {
  const std::string path = Dir() + "/" + name;
  std::remove(path.c_str());
  if (text == nullptr) return;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(text->data(), 1, text->size(), f) != text->size()) std::abort();
  std::fclose(f);
}

void FuzzConfig(std::string_view text) {
  Put("config.json", &text);
  for (bool ignore : {false, true}) {
    beacon::HfConfigOptions options;
    options.ignore_unsupported_features = ignore;
    auto config = beacon::ParseHfConfigFile(Dir() + "/config.json", options);
    // A config that parses has passed ModelConfig::Validate: nothing else to check here.
    volatile bool sink = config.ok();
    (void)sink;
  }
}

void FuzzTokenizerJson(std::string_view rest) {
  const size_t nul = rest.find('\0');
  const std::string_view tok = rest.substr(0, nul);
  const std::string_view config = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  Put("tokenizer.json", &tok);
  Put("tokenizer_config.json", nul == std::string_view::npos ? nullptr : &config);
  auto data = beacon::ReadHfTokenizerJson(Dir() + "/tokenizer.json");
  if (!data.ok()) return;
  const int64_t n = static_cast<int64_t>(data->tokens.size());
  // Dense ids: the vocabulary is bounded by the file, not by an id in it.
  if (n > static_cast<int64_t>(tok.size()) + 4096) std::abort();
  if (data->token_types.size() != data->tokens.size()) std::abort();
  for (int32_t id : {data->bos_id, data->eos_id}) {
    if (id < -1 || id >= n) std::abort();
  }
  for (int32_t id : data->extra_eos_ids) {
    if (id < 0 || id >= n) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    FuzzSafetensors(rest);
  } else if ((data[0] & 3) == 1) {
    FuzzConfig(rest);
  } else {
    FuzzTokenizerJson(rest);
  }
  return 0;
}
