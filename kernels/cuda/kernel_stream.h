// The stream a launcher puts its kernels on, and whether they may use
// programmatic dependent launch (PDL, sm_90 and later).
//
// Why PDL: a decode step at batch 1 is some ten short kernels a layer (about
// 360 at Qwen3-4B's 36 layers), each a few to a few tens of microseconds of
// weight reads. Between two kernels of one stream the GPU lets the first
// finish (its last blocks' tail), then launches the second and ramps it up;
// at that step's sizes those gaps are a large share of the time (issue 44:
// batch 1 at 41% of the HBM roofline). With PDL the second kernel is
// launched while the first still runs: its blocks start, do what does not
// depend on the first (index arithmetic, loads of the weights), and wait on
// the device (griddepcontrol.wait) for the first to complete and its writes
// to be visible. The ordering of the stream is kept; only the gap goes.
//
// Contract: a launcher that takes a KernelStream launches its kernels with
// cudaLaunchAttributeProgrammaticStreamSerialization when `programmatic`
// (kernels/cuda/programmatic_launch.cuh), and each of those kernels calls
// PdlEnter() in every thread before it touches memory that an earlier kernel
// writes or a later one reads, and before any return. A plain cudaStream_t
// converts to a non-programmatic KernelStream, so callers that do not opt in
// (tests, the eviction path) launch exactly as before. The backend opts in
// with CudaBackendOptions::programmatic_launch (engine/cuda_options.h).
#ifndef BEACON_KERNELS_CUDA_KERNEL_STREAM_H_
#define BEACON_KERNELS_CUDA_KERNEL_STREAM_H_

#include <cuda_runtime.h>

namespace beacon {

struct KernelStream {
  KernelStream(cudaStream_t s) : stream(s) {}  // NOLINT(google-explicit-constructor): any stream is one
  KernelStream(cudaStream_t s, bool pdl) : stream(s), programmatic(pdl) {}
  cudaStream_t stream = nullptr;
  bool programmatic = false;
};

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_KERNEL_STREAM_H_
