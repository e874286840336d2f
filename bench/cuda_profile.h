// Profiled ranges for Nsight Compute (`ncu --profile-from-start off`), so
// that tools/gpu-check.sh gets the time and DRAM bytes of every kernel of one
// decode step (or one eviction) per configuration, without NVTX.
//
// A range is cudaProfilerStart, a marker kernel whose grid is (index + 1)
// blocks, the work, then cudaProfilerStop. ncu records the marker like any
// kernel, so tools/ncu_summary.py splits its CSV at each
// `ProfileMarkerKernel` row and names the kernels that follow by the label
// at `index` of the ranges the bench writes to its JSON ("profile_ranges").
// Without ncu attached the profiler calls do nothing and the marker is one
// empty launch.
#ifndef BEACON_BENCH_CUDA_PROFILE_H_
#define BEACON_BENCH_CUDA_PROFILE_H_

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace beacon {

class ProfileRanges {
 public:
  // `enabled` false: Begin/End do nothing and labels() stays empty.
  explicit ProfileRanges(bool enabled) : enabled_(enabled) {}

  // REQUIRES: no range open. Synchronises the device first, so that the
  // range holds only the work enqueued after Begin.
  absl::Status Begin(const std::string& label, cudaStream_t stream);
  // Synchronises, then stops the profiler. REQUIRES: a range open.
  absl::Status End();

  bool enabled() const { return enabled_; }
  const std::vector<std::string>& labels() const { return labels_; }

 private:
  bool enabled_;
  bool open_ = false;
  std::vector<std::string> labels_;
};

}  // namespace beacon

#endif  // BEACON_BENCH_CUDA_PROFILE_H_
