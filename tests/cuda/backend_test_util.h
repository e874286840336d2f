// Shared by the CUDA backend's model-level tests (cuda_backend_test.cc,
// cuda_beacon_test.cc): a Runtime on a device, and the logits-row error
// measure both bound.
#ifndef BEACON_TESTS_CUDA_BACKEND_TEST_UTIL_H_
#define BEACON_TESTS_CUDA_BACKEND_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "engine/runtime.h"
#include "gtest/gtest.h"

namespace beacon::backend_test {

// A Runtime for `model` on `device` ("cpu" or "cuda"); null (with a test
// failure) when it cannot be created. The CPU one keeps an f32 KV cache:
// the device tests measure the device's bf16 against the exact CPU result.
inline std::unique_ptr<Runtime> MakeRuntime(const std::string& model, const std::string& device) {
  RuntimeOptions o;
  o.model = model;
  o.device = device;
  if (device == "cpu") o.kv_cache_dtype = DType::kF32;
  absl::StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(o);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? std::move(*rt) : nullptr;
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
