// BeaconKV's per-sequence state in device memory: the query ring and the
// continual-FPS buffers of every (layer, query head), laid out by
// kernels/cuda/beacon_state.h. Attached to the sequence's KvPolicy
// (KvPolicy::set_device_state), so it is freed with the sequence: returned
// to the backend's BeaconStatePool when it came from there (the server
// reserves one at start-up), else its own allocation.
//
// The host keeps one counter: how many tokens the ring has seen (every layer
// sees every token, so one count serves all layers); the observe kernel
// derives ring indices from it.
#ifndef BEACON_ENGINE_CUDA_BEACON_DEVICE_STATE_H_
#define BEACON_ENGINE_CUDA_BEACON_DEVICE_STATE_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/cuda/beacon_state_pool.h"
#include "engine/cuda/device_memory.h"
#include "kernels/cuda/beacon_state.h"
#include "kv/policy/kv_policy.h"

namespace beacon {

class BeaconDeviceState : public PolicyDeviceState {
 public:
  // Allocates the state and zeroes it on `stream` (the stream its kernels
  // run on; once per sequence).
  static absl::StatusOr<std::unique_ptr<BeaconDeviceState>> Create(const BeaconDims& dims, cudaStream_t stream);
  // A state of pool->dims() taken from `pool` (zeroed on `stream`) and given
  // back on destruction; RESOURCE_EXHAUSTED when the pool has none free.
  static absl::StatusOr<std::unique_ptr<BeaconDeviceState>> FromPool(std::shared_ptr<BeaconStatePool> pool,
                                                                     cudaStream_t stream);
  ~BeaconDeviceState() override;

  const BeaconDims& dims() const { return dims_; }
  void* data() const { return data_; }
  bool pooled() const { return pool_ != nullptr; }
  // Tokens observed so far.
  int32_t ring_count() const { return ring_count_; }
  void Observed(int32_t n_tokens) { ring_count_ += n_tokens; }

 private:
  BeaconDims dims_{};
  DeviceAllocation memory_;                // own allocation (Create)
  std::shared_ptr<BeaconStatePool> pool_;  // or the pool data_ came from (FromPool)
  void* data_ = nullptr;
  int32_t ring_count_ = 0;
};

// The dims of `options` (beacon policy) for a model.
BeaconDims BeaconDimsFor(const KvPolicyOptions& options, const PolicyModelInfo& model);

// The state attached to `policy`, created (zeroed on `stream`) on first use:
// from `pool` when it is not null and has the policy's dims (then a step
// allocates nothing), else its own allocation.
absl::StatusOr<BeaconDeviceState*> BeaconStateOf(KvPolicy* policy, const PolicyModelInfo& model, cudaStream_t stream,
                                                 const std::shared_ptr<BeaconStatePool>& pool = nullptr);

bool operator==(const BeaconDims& a, const BeaconDims& b);

}  // namespace beacon

#endif  // BEACON_ENGINE_CUDA_BEACON_DEVICE_STATE_H_
