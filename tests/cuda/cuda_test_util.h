// Helpers shared by the CUDA kernel tests: device detection (tests skip on a
// machine without a GPU), an RAII device buffer, random bf16 data and a
// tolerance check that fails on NaN (output buffers are poisoned with NaN
// before each launch, so an element the kernel forgot to write fails).
//
// bf16 values live on the host as uint16_t bit patterns and are converted
// with the project's Fp32ToBf16 / Bf16ToFp32 (kernels/cpu/dtype.h).
#ifndef BEACON_TESTS_CUDA_CUDA_TEST_UTIL_H_
#define BEACON_TESTS_CUDA_CUDA_TEST_UTIL_H_

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dtype.h"

namespace beacon::cuda_test {

// Empty when a CUDA device is usable, else the reason there is none.
inline std::string NoDeviceReason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it so later calls do not report it
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
  }
  if (count == 0) return "no CUDA device";
  return "";
}

// Use at the top of a test body: skips the test on a machine without a GPU.
#define BEACON_REQUIRE_CUDA_DEVICE()                                      \
  do {                                                                    \
    const std::string reason = ::beacon::cuda_test::NoDeviceReason();     \
    if (!reason.empty()) GTEST_SKIP() << "CUDA test skipped: " << reason; \
  } while (0)

#define BEACON_CUDA_ASSERT_OK(expr)                                                        \
  do {                                                                                     \
    const cudaError_t beacon_err = (expr);                                                 \
    ASSERT_EQ(beacon_err, cudaSuccess) << #expr << ": " << cudaGetErrorString(beacon_err); \
  } while (0)

// Owns `n` elements of T in device memory.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    status_ = cudaMalloc(reinterpret_cast<void**>(&ptr_), (n == 0 ? 1 : n) * sizeof(T));
    if (status_ != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  cudaError_t status() const { return status_; }
  T* get() const { return ptr_; }
  size_t size() const { return n_; }

  // REQUIRES: host.size() == size().
  cudaError_t Upload(const std::vector<T>& host) {
    return cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  cudaError_t Download(std::vector<T>* host) const {
    host->resize(n_);
    return cudaMemcpy(host->data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
  }
  // All bytes 0xFF: a NaN in bf16 (0xFFFF) and in fp32.
  cudaError_t PoisonWithNaN() { return cudaMemset(ptr_, 0xFF, n_ * sizeof(T)); }

 private:
  size_t n_;
  T* ptr_ = nullptr;
  cudaError_t status_;
};

inline std::vector<uint16_t> RandomBf16(size_t n, uint64_t seed, float stddev = 1.0f, float mean = 0.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) x = Fp32ToBf16(dist(rng));
  return v;
}

inline std::vector<float> ToFloat(const std::vector<uint16_t>& bf16) {
  std::vector<float> f(bf16.size());
  for (size_t i = 0; i < bf16.size(); ++i) f[i] = Bf16ToFp32(bf16[i]);
  return f;
}

// Expects |got - want| <= atol + rtol * |want| elementwise; NaN or inf in
// `got` always fails. Reports the count and the first few offenders.
inline void ExpectBf16Near(const std::vector<uint16_t>& got, const std::vector<double>& want, double rtol, double atol,
                           const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = Bf16ToFp32(got[i]);
    const double w = want[i];
    if (std::isfinite(g) && std::abs(g - w) <= atol + rtol * std::abs(w)) continue;
    if (++bad <= 5) {
      first += "\n  [" + std::to_string(i) + "] got " + std::to_string(g) + " want " + std::to_string(w);
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements outside tolerance (rtol " << rtol
                     << ", atol " << atol << ")" << first;
}

}  // namespace beacon::cuda_test

#endif  // BEACON_TESTS_CUDA_CUDA_TEST_UTIL_H_
