// What the text fuzz targets share: the real tokenizer they run on
// (DeepSeek-R1-Distill-Qwen-7B's vocabulary and chat template,
// tests/fixtures/tokenizers, read from the source tree once per process) and,
// for the request readers, a server's limits and the check of a prepared
// request. Header-only: each target is one translation unit plus this.
#ifndef BEACON_TESTS_FUZZ_FUZZ_FIXTURES_H_
#define BEACON_TESTS_FUZZ_FUZZ_FIXTURES_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer_loader.h"

#ifndef BEACON_SOURCE_DIR
#error "BEACON_SOURCE_DIR must name the source tree (the fuzz fixtures are read from it)"
#endif

namespace beacon::fuzz {

// Aborts (a fuzz setup error, not a finding) when the fixture cannot load.
inline const Tokenizer& R1Tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    auto data = LoadTokenizerData(BEACON_SOURCE_DIR "/tests/fixtures/tokenizers/r1-distill-qwen-7b-vocab.gguf");
    if (!data.ok()) {
      std::fprintf(stderr, "tokenizer fixture: %s\n", data.status().ToString().c_str());
      std::abort();
    }
    auto t = Tokenizer::Create(*std::move(data));
    if (!t.ok()) {
      std::fprintf(stderr, "tokenizer: %s\n", t.status().ToString().c_str());
      std::abort();
    }
    return *std::move(t);
  }();
  return *tok;
}

}  // namespace beacon::fuzz

#endif  // BEACON_TESTS_FUZZ_FUZZ_FIXTURES_H_
