// The dummy R1 model (tests/data/tiny-r1-qwen2.json) with DeepSeek-R1-Distill-
// Qwen-7B's real tokenizer, for the tests of reasoning: <think> and </think>
// are single tokens there. Optionally another chat template (a path).
#ifndef BEACON_TESTS_ENGINE_R1_RUNTIME_H_
#define BEACON_TESTS_ENGINE_R1_RUNTIME_H_

#include <memory>
#include <string>

#include "engine/runtime.h"
#include "gtest/gtest.h"

namespace beacon::testing {

// A path under the source tree.
inline std::string SourcePath(const std::string& rel) { return std::string(BEACON_SOURCE_DIR) + "/" + rel; }

// Null (and the calling test failed) when it does not load.
inline std::unique_ptr<Runtime> R1Runtime(const std::string& chat_template = "") {
  RuntimeOptions o;
  o.model = "dummy:" + SourcePath("tests/data/tiny-r1-qwen2.json");
  o.tokenizer = SourcePath("tests/fixtures/tokenizers/r1-distill-qwen-7b-vocab.gguf");
  o.chat_template = chat_template;
  o.threads = 1;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(o);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? *std::move(rt) : nullptr;
}

}  // namespace beacon::testing

#endif  // BEACON_TESTS_ENGINE_R1_RUNTIME_H_
