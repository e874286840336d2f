// beacon-bench cuda: the CUDA backend's benchmarks (issue #9), each a ratio
// taken in one run against a physical limit or a peer configuration:
//   - decode step time at several batch sizes against the HBM roofline
//     (weights + KV read per step over a device-to-device copy bandwidth
//     measured in the same run);
//   - BeaconKV's overhead: the per-step cost of observing queries (ring and
//     FPS updates on the device) plus each eviction amortised over its
//     interval, as a share of the full-cache decode step;
//   - throughput at a fixed KV pool (sized for `pool_seqs` full sequences)
//     under continuous batching, `beacon` at a budget against `full`.
#ifndef BEACON_BENCH_CUDA_BENCH_H_
#define BEACON_BENCH_CUDA_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "bench/cuda_profile.h"
#include "engine/runtime.h"
#include "kv/policy/kv_policy.h"

namespace beacon {

// Bytes read + written per second by a large cudaMemcpy device to device.
absl::StatusOr<double> DeviceCopyBandwidth();

struct CudaDecodeResult {
  double step_ms = 0;         // wall time per step, as a caller of the backend sees it
  double device_step_ms = 0;  // the step's device work alone (CudaBackend::TimeSteps)
  double bytes_per_step = 0;  // weights + KV read
};
// Greedy decode of `batch` sequences of `context` cached slots, `steps` timed
// steps; then, when `profile` is enabled, one more step in a profiled range
// named `label`.
absl::StatusOr<CudaDecodeResult> BenchCudaDecode(Runtime* rt, int batch, int32_t context, int steps,
                                                 const KvPolicyOptions& policy, ProfileRanges* profile = nullptr,
                                                 const std::string& label = "");

struct EvictionCost {
  double evict_ms = 0;  // one eviction of one sequence, synchronised
  int32_t slots_before = 0;
};
// One eviction of a beacon sequence holding `slots` slots down to its budget
// (the mean of 3); the last one in a profiled range named "evict" when
// `profile` is enabled.
absl::StatusOr<EvictionCost> BenchEviction(Runtime* rt, const KvPolicyOptions& policy, int32_t slots,
                                           ProfileRanges* profile = nullptr);

struct ThroughputResult {
  int concurrency = 0;
  int64_t tokens = 0;
  double seconds = 0;
  int64_t evictions = 0;
  // Bytes the timed steps had to read at least: per step the streamed
  // weights plus K and V of every slot the batch held (and the step's new
  // token). Prefills of replacement sequences are not counted, so
  // tokens / (bytes_read / bandwidth) is an upper bound on tokens/s.
  double bytes_read = 0;
  double tokens_per_second() const { return seconds > 0 ? tokens / seconds : 0; }
  double bound_tokens_per_second(double bandwidth) const {
    return bytes_read > 0 ? tokens / (bytes_read / bandwidth) : 0;
  }
};
// Continuous batching over a pool of pool_tokens slots: as many sequences as
// fit by their peak footprint (SequenceCompressor::PeakSlots), each prompt
// `prompt` + `output` generated tokens; starts at steady state (sequences
// staggered over their output) and counts tokens over `steps` steps,
// replacing finished sequences (their prefill time included).
absl::StatusOr<ThroughputResult> BenchPoolThroughput(Runtime* rt, const KvPolicyOptions& policy, int64_t pool_tokens,
                                                     int32_t prompt, int32_t output, int steps);

}  // namespace beacon

#endif  // BEACON_BENCH_CUDA_BENCH_H_
