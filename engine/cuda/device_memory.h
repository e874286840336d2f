// Owning handles of device and pinned host memory. Allocation returns a
// Status (out of memory is RESOURCE_EXHAUSTED naming the size), never throws.
// Thread ownership: the engine thread.
#ifndef BEACON_ENGINE_CUDA_DEVICE_MEMORY_H_
#define BEACON_ENGINE_CUDA_DEVICE_MEMORY_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "engine/cuda/cuda_status.h"

namespace beacon {

// `bytes` of device memory (cudaMalloc), freed on destruction.
class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  ~DeviceAllocation() { Reset(); }
  DeviceAllocation(DeviceAllocation&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceAllocation& operator=(DeviceAllocation&& o) noexcept {
    if (this != &o) {
      Reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  // Frees what was held, then allocates `bytes` (uninitialised).
  absl::Status Allocate(size_t bytes, const char* what) {
    Reset();
    if (bytes == 0) return absl::OkStatus();
    const cudaError_t err = cudaMalloc(&ptr_, bytes);
    if (err != cudaSuccess) {
      ptr_ = nullptr;
      cudaGetLastError();
      return CudaStatus(
          err, absl::StrFormat("allocating %.1f MiB of device memory for %s", bytes / 1048576.0, what).c_str());
    }
    bytes_ = bytes;
    return absl::OkStatus();
  }
  // Allocates only when the current size is smaller (contents then lost).
  absl::Status Reserve(size_t bytes, const char* what) {
    return bytes <= bytes_ ? absl::OkStatus() : Allocate(bytes, what);
  }
  void Reset() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory (cudaMallocHost), so async copies are truly async.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { Reset(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  absl::Status Reserve(size_t bytes, const char* what) {
    if (bytes <= bytes_) return absl::OkStatus();
    Reset();
    const cudaError_t err = cudaMallocHost(&ptr_, bytes);
    if (err != cudaSuccess) {
      ptr_ = nullptr;
      cudaGetLastError();
      return CudaStatus(
          err, absl::StrFormat("allocating %.1f MiB of pinned host memory for %s", bytes / 1048576.0, what).c_str());
    }
    bytes_ = bytes;
    return absl::OkStatus();
  }
  void Reset() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_CUDA_DEVICE_MEMORY_H_
