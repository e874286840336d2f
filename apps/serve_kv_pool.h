// beacon-serve's KV pool: how big it is and what is reserved on the device
// beside it. Either a size in token slots (--kv-pool-tokens) or, on a GPU, a
// share of the device's memory (--gpu-memory-utilization, as vLLM's option:
// the fraction of the device the whole server may use, weights and buffers
// included, the pool taking what is left).
#ifndef BEACON_APPS_SERVE_KV_POOL_H_
#define BEACON_APPS_SERVE_KV_POOL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/runtime.h"
#include "engine/serving/serve_request.h"
#include "kv/store/kv_cache.h"
#include "util/cli_args.h"

namespace beacon {

struct KvPoolConfig {
  int64_t tokens = 32768;     // --kv-pool-tokens
  int32_t block_size = 16;    // --kv-block-size
  double device_share = 0;    // --gpu-memory-utilization; > 0: size the pool from the device's memory
  int32_t max_running = 64;   // sequences whose BeaconKV state is reserved (--max-running)
  int32_t step_tokens = 512;  // the largest step (--max-step-tokens), whose buffers are reserved before sizing
};

// --gpu-memory-utilization: 0 when not given; else in (0, 1], with a CUDA
// device and without an explicit --kv-pool-tokens (INVALID_ARGUMENT naming
// the flags otherwise).
absl::StatusOr<double> ParseGpuMemoryUtilization(const cli::Args& args, const std::string& device);

// The pool, with BeaconKV's per-sequence state for max_running sequences and
// its eviction scratch reserved on the device when requests may run beacon
// (a step then never allocates them, and a device too small for them stops
// start-up naming the bytes instead of failing requests later). With a device
// share the state and the largest step's buffers are reserved first, so that
// what the device has left within the share is the pool's. Logs what it
// reserved. RESOURCE_EXHAUSTED naming the sizes when the device cannot hold
// them.
absl::StatusOr<std::unique_ptr<KvCache>> MakeServeKvPool(Runtime* runtime, const ServeLimits& limits,
                                                         const KvPoolConfig& pool);

}  // namespace beacon

#endif  // BEACON_APPS_SERVE_KV_POOL_H_
