// Shared by the CUDA backend's model-level tests (cuda_backend_test.cc,
// cuda_beacon_test.cc, the shared-prefix, prefix-cache and logprobs tests):
// a Runtime on a device, the tiny R1-vocabulary model they run, a greedy
// run's tokens, and the logits-row error measure.
#ifndef BEACON_TESTS_CUDA_BACKEND_TEST_UTIL_H_
#define BEACON_TESTS_CUDA_BACKEND_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/batch_runner.h"
#include "engine/runtime.h"
#include "gtest/gtest.h"

namespace beacon::backend_test {

// A Runtime for `model` on `device` ("cpu" or "cuda"); null (with a test
// failure) when it cannot be created. The CPU one keeps an f32 KV cache:
// the device tests measure the device's bf16 against the exact CPU result.
// `cuda`: the CUDA backend's options (kernel choices).
inline std::unique_ptr<Runtime> MakeRuntime(const std::string& model, const std::string& device,
                                            const CudaBackendOptions& cuda = {}) {
  RuntimeOptions o;
  o.model = model;
  o.device = device;
  o.cuda = cuda;
  if (device == "cpu") o.kv_cache_dtype = DType::kF32;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(o);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? std::move(*rt) : nullptr;
}

// tests/data/tiny-r1-qwen2.json's dummy weights (a tiny Qwen2 shape) with
// R1-Distill's real 152K vocabulary and tokenizer, on `device`. The CPU one
// keeps an f32 KV cache, as MakeRuntime.
inline std::unique_ptr<Runtime> MakeTinyR1Runtime(const std::string& device) {
  const std::string src = BEACON_SOURCE_DIR;
  RuntimeOptions o;
  o.model = "dummy:" + src + "/tests/data/tiny-r1-qwen2.json";
  o.tokenizer = src + "/tests/fixtures/tokenizers/r1-distill-qwen-7b-vocab.gguf";
  o.device = device;
  if (device == "cpu") o.kv_cache_dtype = DType::kF32;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(o);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? std::move(*rt) : nullptr;
}

// Runs `gens` together to completion; the tokens gens[which] sampled.
inline std::vector<int32_t> TokensOf(Backend* backend, std::span<Generation* const> gens, size_t which) {
  std::vector<int32_t> out;
  EXPECT_TRUE(RunToCompletion(backend, gens, {}, [&](size_t i, const TokenEvent& ev) {
                if (i == which) out.push_back(ev.id);
              }).ok());
  return out;
}

// |got - want|_2 / |want|_2 over one logits row.
inline double RelRms(const float* got, const float* want, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    num += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace beacon::backend_test

#endif  // BEACON_TESTS_CUDA_BACKEND_TEST_UTIL_H_
