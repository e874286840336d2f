// A fixed pool of BeaconKV per-sequence device states (query ring + FPS
// buffers, kernels/cuda/beacon_state_layout.h), allocated once at start-up:
// a step then takes a sequence's state from the pool instead of calling
// cudaMalloc, so it cannot fail for memory, and the memory is reserved (and
// any shortage reported) before the server says it is ready.
//
// Sized for the most sequences that can hold a state at once: a sequence's
// state lives with its KvPolicy, which preemption replaces, so at most the
// scheduler's running cap. One set of dims (the server's beacon options);
// a policy with other dims gets its own allocation as before.
//
// Shared ownership: every state taken keeps the pool alive (a state may
// outlive the backend that handed it out, e.g. in a test's teardown order).
// Thread ownership: the engine thread.
#ifndef BEACON_ENGINE_CUDA_BEACON_STATE_POOL_H_
#define BEACON_ENGINE_CUDA_BEACON_STATE_POOL_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/device_memory.h"
#include "kernels/cuda/beacon_state_layout.h"

namespace beacon {

class BeaconStatePool {
 public:
  // `capacity` states of `dims` in one allocation. RESOURCE_EXHAUSTED (naming
  // the bytes) when the device cannot hold them; INVALID_ARGUMENT for
  // capacity < 1 or invalid dims.
  static absl::StatusOr<std::shared_ptr<BeaconStatePool>> Create(const BeaconDims& dims, int32_t capacity);

  const BeaconDims& dims() const { return dims_; }
  int32_t capacity() const { return capacity_; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  size_t state_bytes() const { return stride_; }

  // A free state's memory, zeroed on `stream` (the observe kernels' stream);
  // RESOURCE_EXHAUSTED when every state is taken. Give it back with Release.
  absl::StatusOr<void*> Acquire(cudaStream_t stream);
  // REQUIRES `state` came from this pool's Acquire and is not yet released.
  void Release(void* state);

 private:
  BeaconStatePool() = default;
  BeaconDims dims_{};
  int32_t capacity_ = 0;
  size_t stride_ = 0;  // BeaconStateLayout total bytes (256-byte aligned regions)
  DeviceAllocation memory_;
  std::vector<int32_t> free_;  // a stack of free indices
};

}  // namespace beacon

#endif  // BEACON_ENGINE_CUDA_BEACON_STATE_POOL_H_
