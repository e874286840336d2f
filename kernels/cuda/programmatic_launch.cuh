// Launching a kernel on a KernelStream (kernels/cuda/kernel_stream.h), and
// the device side of programmatic dependent launch. Included by .cu files only.
//
//   const LaunchConfig config(stream, grid, block, smem);
//   return LaunchResult(cudaLaunchKernelEx(config.get(), Kernel, args...));
//
// and, in Kernel, PdlEnter() before the first access to memory that another
// kernel of the stream writes or reads (the contract of kernel_stream.h).
// Under the CPU emulator (tests/cuda_emu) gen.py names the launch and the
// emulator reports a thread of a programmatic launch that returns without
// the wait.
#ifndef BEACON_KERNELS_CUDA_PROGRAMMATIC_LAUNCH_CUH_
#define BEACON_KERNELS_CUDA_PROGRAMMATIC_LAUNCH_CUH_

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/kernel_stream.h"

namespace beacon {

// A cudaLaunchConfig_t with its attribute storage; not copyable (it points
// into itself).
class LaunchConfig {
 public:
  // Positional: {gridDim, blockDim, dynamicSmemBytes, stream, attrs,
  // numAttrs} (the emulator's gridDim and blockDim are macros).
  LaunchConfig(KernelStream s, dim3 grid, dim3 block, size_t smem)
      : config_{grid, block, smem, s.stream, attr_, s.programmatic ? 1u : 0u} {
    attr_[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr_[0].val.programmaticStreamSerializationAllowed = 1;
  }
  LaunchConfig(const LaunchConfig&) = delete;
  LaunchConfig& operator=(const LaunchConfig&) = delete;
  const cudaLaunchConfig_t* get() const { return &config_; }

 private:
  cudaLaunchAttribute attr_[1] = {};  // before config_, which points at it
  cudaLaunchConfig_t config_;
};

// What a launcher returns for `return LaunchResult(cudaLaunchKernelEx(...))`:
// the launch's own error, else cudaGetLastError() (which a <<<>>> launcher
// returned: it also clears the launch's error, so that a later launcher
// does not report it as its own).
inline cudaError_t LaunchResult(cudaError_t launch) {
  const cudaError_t last = cudaGetLastError();
  return launch != cudaSuccess ? launch : last;
}

// Waits until the previous kernel of the stream has completed and its writes
// are visible (a no-op in a launch that was not programmatic), then lets the
// next kernel launch: it will wait for this one in turn, so every kernel
// still sees all that came before it. On GPUs before sm_90 there is no PDL
// and nothing to do.
__device__ __forceinline__ void PdlEnter() {
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
#elif !defined(__CUDACC__)  // the CPU emulator
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// A hint to bring the 128-byte line holding `p` into L2; for memory no kernel
// of the step writes (the weights), issued before PdlEnter so that the first
// loads overlap the previous kernel's tail. No effect on results.
__device__ __forceinline__ void PrefetchL2(const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

}  // namespace beacon

#endif  // BEACON_KERNELS_CUDA_PROGRAMMATIC_LAUNCH_CUH_
