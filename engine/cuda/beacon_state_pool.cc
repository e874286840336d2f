#include "engine/cuda/beacon_state_pool.h"

#include <cassert>

#include "absl/strings/str_format.h"
#include "engine/cuda/cuda_status.h"

namespace beacon {

absl::StatusOr<std::shared_ptr<BeaconStatePool>> BeaconStatePool::Create(const BeaconDims& dims, int32_t capacity) {
  if (capacity < 1) return absl::InvalidArgumentError(absl::StrFormat("BeaconKV state pool of %d states", capacity));
  if (!BeaconDimsValid(dims)) return absl::InvalidArgumentError("BeaconKV state pool: invalid policy dims");
  auto pool = std::shared_ptr<BeaconStatePool>(new BeaconStatePool());
  pool->dims_ = dims;
  pool->capacity_ = capacity;
  pool->stride_ = BeaconStateLayout::For(dims).total_bytes;  // a multiple of 256: every state stays aligned
  const std::string what =
      absl::StrFormat("BeaconKV states of %d sequences (%.1f MB each)", capacity, pool->stride_ / 1e6);
  if (absl::Status s = pool->memory_.Allocate(pool->stride_ * capacity, what.c_str()); !s.ok()) return s;
  for (int32_t i = capacity - 1; i >= 0; --i) pool->free_.push_back(i);
  return pool;
}

absl::StatusOr<void*> BeaconStatePool::Acquire(cudaStream_t stream) {
  if (free_.empty()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "all %d BeaconKV states of the pool are taken (more beacon sequences than reserved)", capacity_));
  }
  const int32_t i = free_.back();
  void* p = static_cast<char*>(memory_.get()) + stride_ * i;
  // Zeroed on the observe kernels' stream (a plain cudaMemset runs on the
  // legacy default stream, which the backend's non-blocking stream does not
  // wait for); the state of the previous holder must not leak in.
  BEACON_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, stride_, stream));
  free_.pop_back();
  return p;
}

void BeaconStatePool::Release(void* state) {
  const size_t off = static_cast<char*>(state) - static_cast<char*>(memory_.get());
  assert(off % stride_ == 0 && off / stride_ < static_cast<size_t>(capacity_));
  free_.push_back(static_cast<int32_t>(off / stride_));
}

}  // namespace beacon
