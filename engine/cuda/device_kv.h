// The device half of a KvCache built by the CUDA backend: the paged K/V and
// position arrays (kernels/cuda/paged_kv.h) for every block of the host
// BlockPool, and eviction on the device.
//
// Eviction (BeaconKV only, beacon_filter kAll; CudaBackend::CheckPolicy
// refuses the rest before a sequence starts): the sequence's block table
// goes up, LaunchBeaconScore scores every (layer, KV head) with the recent
// and beacon queries of its device state, LaunchSelectKeep picks the kept
// slots by kv/policy/selection.h's rule, LaunchCompact moves them to the front; one
// synchronisation at the end. The host then truncates the sequence. Its
// scratch comes from the backend's start-up reservation (EvictScratch).
//
// REQUIRES the EvictContext (owned by the backend) outlives the storage.
// Thread ownership: the engine thread.
#ifndef BEACON_ENGINE_CUDA_DEVICE_KV_H_
#define BEACON_ENGINE_CUDA_DEVICE_KV_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/cuda/beacon_state_pool.h"
#include "engine/cuda/device_memory.h"
#include "kernels/cuda/beacon_state.h"
#include "kernels/cuda/paged_kv.h"
#include "kernels/cuda/rope.h"
#include "kv/policy/kv_policy.h"
#include "kv/store/kv_cache.h"

namespace beacon {

// The scratch of device evictions (kernels/cuda/beacon_state_layout.h,
// BeaconEvictScratchLayout), one per backend: evictions run one at a time
// on the engine thread, so one buffer serves every cache and sequence. The
// backend reserves it at start-up (CudaBackend::ReservePolicyStates) for
// the most slots a sequence can hold, so an eviction inside a step never
// allocates device memory and cannot fail for want of it.
struct EvictScratch {
  DeviceAllocation memory;
  BeaconDims dims;  // the reservation's dims: the server's beacon options
  int32_t max_slots = 0;
  int32_t block_size = 0;  // the smallest block size it was sized for (the block table)
};

// What eviction needs from the backend.
struct EvictContext {
  cudaStream_t stream = nullptr;
  PolicyModelInfo model;
  RopeParams rope;
  BeaconScoreKernel score_kernel = BeaconScoreKernel::kMma;  // CudaBackendOptions::tensor_core_score
  std::shared_ptr<BeaconStatePool> beacon_pool;              // null until ReservePolicyStates
  std::shared_ptr<EvictScratch> scratch;                     // null until ReservePolicyStates
};

class DeviceKvStorage : public KvDeviceStorage {
 public:
  // Allocates the arrays for `num_blocks` blocks of `shape` (bf16 K/V);
  // RESOURCE_EXHAUSTED naming the size when the device is too small.
  static absl::StatusOr<std::unique_ptr<DeviceKvStorage>> Create(const KvCacheShape& shape, int32_t num_blocks,
                                                                 const EvictContext* context);
  // The device bytes Create allocates for `num_blocks` blocks of `shape`:
  // K and V in bf16 and each slot's position (int32), per layer and KV head.
  static size_t BytesFor(const KvCacheShape& shape, int64_t num_blocks);

  const PagedKv& paged() const { return paged_; }
  const EvictContext* context() const { return context_; }

  // Uses the backend's reserved scratch when it covers the eviction (the
  // reservation's dims, at most its slots); otherwise (a tool that never
  // reserved, a policy of other dims) grows a scratch of its own, as
  // BeaconStateOf gives such a policy its own state, and counts it.
  absl::Status Evict(SequenceKv* seq, KvPolicy* policy, const KvPolicyOptions& options, const Protection& protection,
                     int32_t n_keep, int32_t next_position) override;

  // Evictions that allocated a scratch of their own (0 in a server whose
  // reservation covers every request), for tests.
  int64_t own_scratch_allocations() const { return own_scratch_allocations_; }

 private:
  DeviceKvStorage() = default;

  const EvictContext* context_ = nullptr;
  DeviceAllocation memory_;
  PagedKv paged_;
  // Eviction scratch when the backend's reservation does not cover it.
  DeviceAllocation own_scratch_;
  int64_t own_scratch_allocations_ = 0;
};

}  // namespace beacon

#endif  // BEACON_ENGINE_CUDA_DEVICE_KV_H_
