// Stand-in for cuda_pipeline.h: the primitive cp.async interface, forwarded
// to the emulator's per-thread pipeline (fibers.cc). Zero-fill of a partial
// copy (`zfill`) is not modelled; the kernels here do not use it.
#pragma once

#include "cuda_runtime.h"

inline void __pipeline_memcpy_async(void* dst, const void* src, size_t bytes, size_t zfill = 0) {
  emu::PipelineCopy(dst, src, bytes);
}
inline void __pipeline_commit() { emu::PipelineCommit(); }
inline void __pipeline_wait_prior(size_t groups_in_flight) {
  emu::PipelineWaitPrior(static_cast<int>(groups_in_flight));
}
