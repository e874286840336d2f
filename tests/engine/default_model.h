// The real default model, loaded once per test binary for the tests that
// run it (models/default.gguf; `make test` fetches it first).
#ifndef BEACON_TESTS_ENGINE_DEFAULT_MODEL_H_
#define BEACON_TESTS_ENGINE_DEFAULT_MODEL_H_

#include <filesystem>
#include <memory>

#include "engine/runtime.h"
#include "gtest/gtest.h"

namespace beacon::testing {

// Null when the model file is absent (tests then skip); fails the calling
// test when the file is there but does not load.
inline Runtime* DefaultModel() {
  static std::unique_ptr<Runtime> rt = [] {
    std::unique_ptr<Runtime> out;
    if (!std::filesystem::exists(BEACON_MODEL_PATH)) return out;
    RuntimeOptions o;
    o.model = BEACON_MODEL_PATH;
    o.threads = 2;
    auto created = Runtime::Create(o);
    EXPECT_TRUE(created.ok()) << created.status();
    if (created.ok()) out = std::move(*created);
    return out;
  }();
  return rt.get();
}

}  // namespace beacon::testing

#endif  // BEACON_TESTS_ENGINE_DEFAULT_MODEL_H_
