// The runtime the OpenAI reader's tests prepare requests with: the
// R1-Distill vocabulary and chat template (tests/fixtures/tokenizers) over
// tiny dummy weights, so a reasoning model's requests render through a real
// template without a real model file.
#ifndef BEACON_TESTS_SERVER_OPENAI_R1_RUNTIME_H_
#define BEACON_TESTS_SERVER_OPENAI_R1_RUNTIME_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/runtime.h"

namespace beacon {

inline absl::StatusOr<std::unique_ptr<Runtime>> R1DummyRuntime() {
  RuntimeOptions o;
  o.model = "dummy:" + std::string(BEACON_SOURCE_DIR) + "/tests/data/tiny-r1-qwen2.json";
  o.tokenizer = std::string(BEACON_SOURCE_DIR) + "/tests/fixtures/tokenizers/r1-distill-qwen-7b-vocab.gguf";
  o.threads = 1;
  return Runtime::Create(o);
}

}  // namespace beacon

#endif  // BEACON_TESTS_SERVER_OPENAI_R1_RUNTIME_H_
